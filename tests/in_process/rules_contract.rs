//! The store's part of alert rules, the same checks against SQLite and
//! MongoDB through the `Store` interface: a device's rules changed field
//! by field, deliveries recorded as filtered or held once (the first
//! decision stands), burst windows that admit exactly `max` alerts however
//! many notifiers ask at once, and summaries that gather held alerts
//! until they close.

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{
    rules::{AlertRules, Burst, FilterReason, HoldReason},
    store::{
        Admission, Delivery, DeliveryClaim, DeliveryState, DevicePatch, DeviceRegistration,
        Holding, Priority, PushTarget, RulesPatch, Scope, Store, SummaryState,
        lease::{ClaimKey, ClaimRequest},
    },
};
use tocsin_tests::{StoreKind, for_each_store, open_store};
use uuid::Uuid;

fn scope() -> Scope {
    Scope::new("org", format!("p{}", Uuid::new_v4().simple()))
}

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("a time")
}

async fn device(store: &dyn Store, scope: &Scope, rules: AlertRules) -> common::store::Device {
    let registration = DeviceRegistration {
        target: PushTarget::Fcm {
            token: format!("fcm:{}", Uuid::new_v4()),
        },
        name: Some("Pixel".into()),
        rules,
    };
    store
        .upsert_device(scope, &registration, at(0))
        .await
        .expect("registered")
        .0
}

async fn a_device_patch_changes_only_what_it_names(kind: StoreKind) {
    let (store, _test) = open_store(kind).await;
    let s = scope();
    let rules = AlertRules {
        channels: Some(vec!["payments".into()]),
        tags: Some(vec!["vip".into()]),
        burst: Some(Burst {
            max: 5,
            per_minutes: 10,
        }),
        ..AlertRules::every_alert()
    };
    let registered = device(store.as_ref(), &s, rules.clone()).await;
    assert_eq!(registered.rules, rules, "the rules read back as written");

    let raise = DevicePatch {
        rules: RulesPatch {
            min_priority: Some(Some(Priority::High)),
            ..RulesPatch::default()
        },
        ..DevicePatch::default()
    };
    let changed = store
        .update_device(&s, registered.id, &raise, at(10))
        .await
        .expect("updated")
        .expect("found");
    assert_eq!(changed.rules.min_priority, Priority::High);
    assert_eq!(changed.rules.tags, rules.tags, "left as it was");
    assert_eq!(changed.rules.channels, rules.channels);
    assert_eq!(changed.updated_at, at(10));

    let clear = DevicePatch {
        rules: RulesPatch {
            tags: Some(None),
            burst: Some(None),
            min_priority: Some(None),
            ..RulesPatch::default()
        },
        name: Some(None),
    };
    store
        .update_device(&s, registered.id, &clear, at(20))
        .await
        .expect("updated");
    let stored = store.list_devices(&s).await.expect("listed");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].rules.tags, None);
    assert_eq!(stored[0].rules.burst, None);
    assert_eq!(
        stored[0].rules.min_priority,
        Priority::Low,
        "cleared is low"
    );
    assert_eq!(stored[0].name, None);
    assert_eq!(stored[0].rules.channels, rules.channels);

    assert!(
        store
            .update_device(&scope(), registered.id, &raise, at(30))
            .await
            .expect("asked")
            .is_none(),
        "another scope's device is not found"
    );
    assert!(
        store
            .update_device(&s, Uuid::now_v7(), &raise, at(30))
            .await
            .expect("asked")
            .is_none()
    );
}

fn withheld(event: Uuid, device: Uuid, state: DeliveryState) -> Delivery {
    Delivery {
        event_id: event,
        device_id: device,
        state,
        attempts: 0,
        error: None,
        apns_id: None,
        provider: None,
        summary_id: None,
        lease_until: None,
        updated_at: at(0),
    }
}

async fn withheld_deliveries_are_recorded_once_and_the_first_decision_stands(kind: StoreKind) {
    let (store, _test) = open_store(kind).await;
    let s = scope();
    let (event, phone, tablet) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let filtered = DeliveryState::Filtered(FilterReason::Tag);
    let held = DeliveryState::Held(HoldReason::QuietHours);
    let first = store
        .record_withheld(&[
            (s.clone(), withheld(event, phone, filtered)),
            (s.clone(), withheld(event, tablet, held)),
        ])
        .await
        .expect("recorded");
    assert_eq!(first, vec![true, true]);
    let again = store
        .record_withheld(&[(s.clone(), withheld(event, phone, held))])
        .await
        .expect("asked");
    assert_eq!(again, vec![false], "a record was there: it stands");

    // A claim finds the decision made: never sent.
    let request = ClaimRequest {
        now: at(1),
        lease: Duration::from_secs(30),
        max_attempts: 3,
    };
    let key = |device| ClaimKey {
        scope: s.clone(),
        event_id: event,
        device_id: device,
    };
    let claims = store
        .claim_deliveries(&[key(phone), key(tablet)], &request)
        .await
        .expect("claimed");
    assert_eq!(
        claims,
        vec![
            DeliveryClaim::Settled(filtered),
            DeliveryClaim::Settled(held)
        ]
    );
    // And a delivery claimed first is not overwritten as withheld.
    let laptop = Uuid::now_v7();
    store
        .claim_deliveries(&[key(laptop)], &request)
        .await
        .expect("claimed");
    let late = store
        .record_withheld(&[(s.clone(), withheld(event, laptop, filtered))])
        .await
        .expect("asked");
    assert_eq!(late, vec![false]);

    let mut listed = store.list_deliveries(&s, event).await.expect("listed");
    listed.sort_by_key(|d| d.device_id);
    let states: Vec<_> = listed.iter().map(|d| (d.device_id, d.state)).collect();
    let mut expected = vec![
        (phone, filtered),
        (tablet, held),
        (laptop, DeliveryState::Sending),
    ];
    expected.sort_by_key(|(d, _)| *d);
    assert_eq!(states, expected);
}

async fn a_burst_window_admits_exactly_max_however_many_ask_at_once(kind: StoreKind) {
    let (store, _test) = open_store(kind).await;
    let s = scope();
    let (device, burst) = (
        Uuid::now_v7(),
        Burst {
            max: 5,
            per_minutes: 1,
        },
    );
    let asks = (0..12).map(|_| store.admit_alert(&s, device, &burst, at(0)));
    let answers = futures::future::try_join_all(asks).await.expect("answered");
    let admitted = answers
        .iter()
        .filter(|a| **a == Admission::Admitted)
        .count();
    assert_eq!(admitted, 5, "{answers:?}");
    assert!(answers.contains(&Admission::Over {
        window_ends: at(60)
    }));
    // Within the window, still over; once it ends, the next alert opens
    // the next window.
    assert_eq!(
        store
            .admit_alert(&s, device, &burst, at(59))
            .await
            .expect("asked"),
        Admission::Over {
            window_ends: at(60)
        }
    );
    assert_eq!(
        store
            .admit_alert(&s, device, &burst, at(60))
            .await
            .expect("asked"),
        Admission::Admitted
    );
    assert_eq!(
        store
            .admit_alert(&s, Uuid::now_v7(), &burst, at(59))
            .await
            .expect("asked"),
        Admission::Admitted,
        "each device has its own window"
    );
}

async fn held_alerts_join_one_summary_until_it_closes(kind: StoreKind) {
    let (store, _test) = open_store(kind).await;
    let s = scope();
    let device = Uuid::now_v7();
    let due = at(600);
    let events: Vec<Uuid> = (0..8).map(|_| Uuid::now_v7()).collect();
    let holds = events
        .iter()
        .map(|e| store.hold_alert(&s, device, HoldReason::QuietHours, due, *e));
    let held = futures::future::try_join_all(holds).await.expect("held");
    let Holding::Held { summary_id } = held[0] else {
        panic!("not held: {held:?}")
    };
    assert!(
        held.iter().all(|h| *h == Holding::Held { summary_id }),
        "one summary for the window, made once however many hold at once: {held:?}"
    );
    assert_eq!(
        store
            .hold_alert(&s, device, HoldReason::QuietHours, due, events[0])
            .await
            .expect("held"),
        Holding::Held { summary_id },
        "holding again is idempotent"
    );
    let other = store
        .hold_alert(&s, device, HoldReason::Burst, due, events[0])
        .await
        .expect("held");
    assert_ne!(other, Holding::Held { summary_id }, "each reason its own");

    // Not due before its window ends.
    let before = store
        .summaries_due(at(599), at(599), None, 100)
        .await
        .expect("read");
    assert!(before.iter().all(|x| x.scope != s), "{before:?}");
    let due_now = store
        .summaries_due(at(600), at(600), None, 100)
        .await
        .expect("read");
    let mine: Vec<_> = due_now.iter().filter(|x| x.scope == s).collect();
    assert_eq!(mine.len(), 2, "{mine:?}");
    let summary = mine.iter().find(|x| x.id == summary_id).expect("it");
    let mut held_events = summary.events.clone();
    held_events.sort();
    let mut sorted = events.clone();
    sorted.sort();
    assert_eq!(held_events, sorted, "each event once");
    assert_eq!(summary.state, SummaryState::Open);

    // Its job published: not due again until its recheck.
    store
        .set_summary_recheck(&s, summary_id, at(1200))
        .await
        .expect("set");
    let later = store
        .summaries_due(at(900), at(900), None, 100)
        .await
        .expect("read");
    assert!(!later.iter().any(|x| x.id == summary_id));

    let closed = store
        .close_summary(&s, summary_id)
        .await
        .expect("closed")
        .expect("found");
    assert_eq!(closed.state, SummaryState::Closed);
    let late = Uuid::now_v7();
    assert_eq!(
        store
            .hold_alert(&s, device, HoldReason::QuietHours, due, late)
            .await
            .expect("asked"),
        Holding::Closed,
        "nothing joins a closed summary"
    );
    assert_eq!(
        store
            .hold_alert(&s, device, HoldReason::QuietHours, due, events[1])
            .await
            .expect("asked"),
        Holding::Held { summary_id },
        "an event it holds is still held there"
    );

    // Done: its id on the held deliveries of its events to its device.
    let records: Vec<_> = events
        .iter()
        .map(|e| {
            (
                s.clone(),
                withheld(*e, device, DeliveryState::Held(HoldReason::QuietHours)),
            )
        })
        .collect();
    store.record_withheld(&records).await.expect("recorded");
    store.finish_summary(&closed, true).await.expect("finished");
    for event in &events {
        let deliveries = store.list_deliveries(&s, *event).await.expect("listed");
        assert_eq!(deliveries[0].summary_id, Some(summary_id));
    }
    let after = store
        .summaries_due(
            DateTime::<Utc>::MAX_UTC,
            DateTime::<Utc>::MAX_UTC,
            None,
            100,
        )
        .await
        .expect("read");
    assert!(
        !after.iter().any(|x| x.id == summary_id),
        "done is never due"
    );
    assert_eq!(
        store
            .close_summary(&s, summary_id)
            .await
            .expect("asked")
            .map(|x| x.state),
        Some(SummaryState::Done)
    );
    assert!(
        store
            .close_summary(&scope(), summary_id)
            .await
            .expect("asked")
            .is_none(),
        "another scope's summary is not found"
    );
}

async fn retention_removes_sent_summaries_with_their_pushes(kind: StoreKind) {
    let (store, _test) = open_store(kind).await;
    let s = scope();
    let (device, event) = (Uuid::now_v7(), Uuid::now_v7());
    let hold = |due| store.hold_alert(&s, device, HoldReason::Burst, due, event);
    let Holding::Held { summary_id: old } = hold(at(60)).await.expect("held") else {
        panic!("not held")
    };
    let Holding::Held { summary_id: open } = hold(at(120)).await.expect("held") else {
        panic!("not held")
    };
    let done = store
        .close_summary(&s, old)
        .await
        .expect("closed")
        .expect("found");
    store.finish_summary(&done, true).await.expect("finished");
    // The summary's push, claimed under its id.
    let request = ClaimRequest {
        now: at(61),
        lease: Duration::from_secs(30),
        max_attempts: 3,
    };
    let push = ClaimKey {
        scope: s.clone(),
        event_id: old,
        device_id: device,
    };
    store
        .claim_deliveries(&[push], &request)
        .await
        .expect("claimed");

    let purged = store.purge_summaries(at(3600), 100).await.expect("purged");
    assert_eq!((purged.summaries, purged.deliveries), (1, 1), "{purged:?}");
    assert!(
        store
            .list_deliveries(&s, old)
            .await
            .expect("listed")
            .is_empty()
    );
    assert!(
        store.close_summary(&s, old).await.expect("asked").is_none(),
        "gone"
    );
    assert!(
        store
            .close_summary(&s, open)
            .await
            .expect("asked")
            .is_some(),
        "an open summary stays, whatever its age"
    );
    let again = store.purge_summaries(at(3600), 100).await.expect("purged");
    assert_eq!(again.summaries, 0);
}

for_each_store!(
    retention_removes_sent_summaries_with_their_pushes,
    a_device_patch_changes_only_what_it_names,
    withheld_deliveries_are_recorded_once_and_the_first_decision_stands,
    a_burst_window_admits_exactly_max_however_many_ask_at_once,
    held_alerts_join_one_summary_until_it_closes,
);

//! One contract, every store: the same checks against SQLite and MongoDB,
//! through the `Store` interface ingest uses.

use std::{sync::Arc, time::Duration};

use chrono::Duration as Age;
use common::store::{ApiKey, IdempotencyBegin, KeyScope, Scope, StoredResponse};
use serde_json::{Map, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{StoreKind, TestConfig, for_each_store, open_store, pending_event};
use uuid::Uuid;

const TTL: Duration = Duration::from_secs(24 * 3600);
const LOCK: Duration = Duration::from_secs(60);
/// The id a claim reserves for what its request creates.
const RESOURCE: Uuid = Uuid::from_u128(0x0195_0000_0000_7000_8000_0000_0000_0001);
const STARTED: IdempotencyBegin = IdempotencyBegin::Started { resource: RESOURCE };

fn scope() -> Scope {
    Scope::new("org", format!("p{}", Uuid::new_v4().simple()))
}

fn response(body: &str) -> StoredResponse {
    StoredResponse {
        status: 201,
        content_type: "application/json".into(),
        body: body.as_bytes().to_vec(),
    }
}

fn api_key(scopes: Vec<KeyScope>) -> ApiKey {
    ApiKey {
        id: Uuid::now_v7(),
        name: Some("ci".into()),
        scope: scope(),
        hash: format!("{:064x}", Uuid::new_v4().as_u128()),
        prefix: "tocsin_abcdef".into(),
        rate_limit: Some(42),
        scopes,
        created_at: common::time::now(),
        revoked_at: None,
        previous_hash: None,
        previous_expires_at: None,
        last_used_at: None,
    }
}

async fn api_keys_are_found_by_hash_listed_and_revoked(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let key = api_key(KeyScope::ALL.to_vec());
    store.insert_api_key(&key).await.expect("inserted");
    assert_eq!(
        store.find_api_key_by_hash(&key.hash).await.expect("found"),
        Some(key.clone())
    );
    assert_eq!(
        store.find_api_key_by_hash("nope").await.expect("answered"),
        None
    );
    assert!(store.list_api_keys().await.expect("listed").contains(&key));
    let at = common::time::now();
    assert!(store.revoke_api_key(key.id, at).await.expect("revoked"));
    assert!(
        !store.revoke_api_key(key.id, at).await.expect("answered"),
        "revoking twice is a no-op"
    );
    assert!(
        !store
            .revoke_api_key(Uuid::now_v7(), at)
            .await
            .expect("answered")
    );
    let revoked = store
        .find_api_key_by_hash(&key.hash)
        .await
        .expect("found")
        .expect("still there");
    assert_eq!(revoked.revoked_at, Some(at));
    assert!(!revoked.is_active());
}

/// Whatever scopes a key has, found by hash or listed, it has exactly those:
/// none, one, some, all.
async fn api_key_scopes_round_trip(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let mut sets: Vec<Vec<KeyScope>> = vec![vec![], KeyScope::ALL.to_vec()];
    sets.extend(KeyScope::ALL.map(|s| vec![s]));
    sets.push(vec![KeyScope::EventsRead, KeyScope::DevicesWrite]);
    sets.push(KeyScope::ALL[1..].to_vec());
    let keys: Vec<ApiKey> = sets.into_iter().map(api_key).collect();
    for key in &keys {
        store.insert_api_key(key).await.expect("inserted");
    }
    let listed = store.list_api_keys().await.expect("listed");
    for key in &keys {
        let found = store
            .find_api_key_by_hash(&key.hash)
            .await
            .expect("found")
            .expect("there");
        assert_eq!(found.scopes, key.scopes);
        let in_list = listed.iter().find(|k| k.id == key.id).expect("listed");
        assert_eq!(in_list.scopes, key.scopes);
    }
}

async fn identities_merge_properties_and_union_aliases(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let props = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    let t0 = common::time::now();
    let first = store
        .merge_identity(
            &s,
            "u",
            props(json!({ "a": 1, "b": { "c": [1, 2] } })),
            vec!["x".into(), "y".into()],
            t0,
        )
        .await
        .expect("merged");
    assert_eq!(first.created_at, t0);
    let t1 = t0 + Age::seconds(5);
    let second = store
        .merge_identity(
            &s,
            "u",
            props(json!({ "a": 2, "d": null })),
            vec!["y".into(), "z".into()],
            t1,
        )
        .await
        .expect("merged");
    assert_eq!(
        serde_json::Value::Object(second.properties),
        json!({ "a": 2, "b": { "c": [1, 2] }, "d": null })
    );
    assert_eq!(second.aliases, vec!["x", "y", "z"]);
    assert_eq!((second.created_at, second.updated_at), (t0, t1));
    let other = store
        .merge_identity(&scope(), "u", Map::new(), vec![], t1)
        .await
        .expect("merged");
    assert!(
        other.properties.is_empty() && other.aliases.is_empty(),
        "scopes are separate"
    );
}

/// Users, by the rules of `common::store::user`: made and counted by the
/// events that name them (an alias's for its user), merged when an alias
/// names another, found by id or alias, and listed most recently seen
/// first from a position, narrowed by text and by a property.
async fn users_are_counted_merged_found_and_listed(kind: StoreKind) {
    use common::store::{PropertyMatch, UserFilter, UserPosition};
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let t0 = common::time::now() - Age::hours(1);
    let record = |user: &str, minutes: i64| {
        let mut e = pending_event(&s);
        e.user_id = Some(user.into());
        e.created_at = t0 + Age::minutes(minutes);
        e
    };
    for (user, minutes) in [
        ("anon", 1),
        ("ada", 5),
        ("anon", 3),
        ("grace", 4),
        ("linus", 2),
    ] {
        store
            .insert_event(&record(user, minutes))
            .await
            .expect("stored");
    }
    // Inserted again (a retried request): counted once.
    let again = record("linus", 6);
    store.insert_event(&again).await.expect("stored");
    store.insert_event(&again).await.expect("found");
    let props = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    let t1 = t0 + Age::minutes(10);
    let ada = store
        .merge_identity(
            &s,
            "ada",
            props(json!({ "plan": "pro", "seats": 3 })),
            vec!["anon".into()],
            t1,
        )
        .await
        .expect("merged");
    assert_eq!(
        (ada.event_count, ada.first_seen_at, ada.last_seen_at),
        (3, t0 + Age::minutes(1), t1),
        "the anonymous id's events are ada's; identify counts as seen"
    );
    store
        .insert_event(&record("anon", 7))
        .await
        .expect("stored");
    let by_alias = store
        .get_identity(&s, "anon")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(
        (by_alias.user_id.as_str(), by_alias.event_count),
        ("ada", 4)
    );
    assert_eq!(by_alias.aliases, ["anon"]);
    assert_eq!(store.get_identity(&s, "nobody").await.expect("read"), None);

    let list = |filter: UserFilter, after: Option<UserPosition>, limit: u32| {
        let (store, s) = (&store, &s);
        async move {
            store
                .list_users(s, &filter, after, limit)
                .await
                .expect("listed")
                .into_iter()
                .map(|u| (u.user_id, u.event_count))
                .collect::<Vec<_>>()
        }
    };
    let all = || UserFilter::default();
    let everyone = vec![
        ("ada".to_owned(), 4),
        ("linus".into(), 2),
        ("grace".into(), 1),
    ];
    assert_eq!(list(all(), None, 10).await, everyone);
    let first = store.list_users(&s, &all(), None, 1).await.expect("listed");
    assert_eq!(
        list(all(), Some(first[0].position()), 10).await,
        everyone[1..]
    );
    let text = UserFilter {
        text: Some("RAC".into()),
        property: None,
    };
    assert_eq!(list(text, None, 10).await, [("grace".to_owned(), 1)]);
    let alias = UserFilter {
        text: Some("ano".into()),
        property: None,
    };
    assert_eq!(list(alias, None, 10).await, [("ada".to_owned(), 4)]);
    let property = |p: &str| UserFilter {
        text: None,
        property: PropertyMatch::parse(p),
    };
    assert_eq!(
        list(property("seats:3"), None, 10).await,
        [("ada".to_owned(), 4)]
    );
    assert_eq!(
        list(property("plan:pro"), None, 10).await,
        [("ada".to_owned(), 4)]
    );
    assert!(list(property("seats:three"), None, 10).await.is_empty());

    // grace's own id becomes ada's alias: grace is merged in.
    let merged = store
        .merge_identity(&s, "anon", Map::new(), vec!["grace".into()], t1)
        .await
        .expect("merged");
    assert_eq!((merged.user_id.as_str(), merged.event_count), ("ada", 5));
    assert_eq!(merged.aliases, ["anon", "grace"]);
    assert_eq!(
        list(all(), None, 10).await,
        [("ada".to_owned(), 5), ("linus".into(), 2)]
    );
    let timeline = store
        .list_events(
            &s,
            &common::store::EventFilter {
                user_id: Some("grace".into()),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .expect("listed");
    let users: Vec<&str> = timeline
        .iter()
        .filter_map(|e| e.user_id.as_deref())
        .collect();
    assert_eq!(users, ["anon", "ada", "grace", "anon", "anon"]);
}

async fn idempotency_claims_replay_and_mismatch(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let now = common::time::now();
    let begin = |key: &'static str, print: &'static str| {
        let store = Arc::clone(&store);
        let s = s.clone();
        async move {
            store
                .begin_idempotent(&s, key, print, RESOURCE, now, TTL, LOCK)
                .await
                .expect("begun")
        }
    };
    assert_eq!(begin("k", "f1").await, STARTED);
    assert_eq!(begin("k", "f1").await, IdempotencyBegin::InFlight);
    assert_eq!(begin("k", "f2").await, IdempotencyBegin::Mismatch);
    store
        .complete_idempotent(&s, "k", &response("{\"ok\":1}"))
        .await
        .expect("completed");
    assert_eq!(
        begin("k", "f1").await,
        IdempotencyBegin::Replay(response("{\"ok\":1}"))
    );
    assert_eq!(begin("k", "f2").await, IdempotencyBegin::Mismatch);

    // Releasing an in-flight claim frees the key; releasing a completed one does nothing.
    assert_eq!(begin("r", "f1").await, STARTED);
    store.release_idempotent(&s, "r").await.expect("released");
    assert_eq!(begin("r", "f2").await, STARTED);
    store.release_idempotent(&s, "k").await.expect("released");
    assert_eq!(
        begin("k", "f1").await,
        IdempotencyBegin::Replay(response("{\"ok\":1}"))
    );

    // Another scope has keys of its own.
    let other = store
        .begin_idempotent(&scope(), "k", "f9", RESOURCE, now, TTL, LOCK)
        .await
        .expect("begun");
    assert_eq!(other, STARTED);
}

async fn expired_and_abandoned_claims_can_be_taken_over(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let long_ago = common::time::now() - Age::hours(25);
    let now = common::time::now();
    assert_eq!(
        store
            .begin_idempotent(&s, "old", "f1", RESOURCE, long_ago, TTL, LOCK)
            .await
            .expect("begun"),
        STARTED
    );
    store
        .complete_idempotent(&s, "old", &response("old"))
        .await
        .expect("completed");
    // 25 hours later the key is free again, even with another body.
    assert_eq!(
        store
            .begin_idempotent(&s, "old", "f2", RESOURCE, now, TTL, LOCK)
            .await
            .expect("begun"),
        STARTED
    );

    let two_minutes_ago = now - Age::minutes(2);
    assert_eq!(
        store
            .begin_idempotent(&s, "stuck", "f1", RESOURCE, two_minutes_ago, TTL, LOCK)
            .await
            .expect("begun"),
        STARTED
    );
    // A claim in flight for longer than the lock timeout was abandoned.
    assert_eq!(
        store
            .begin_idempotent(&s, "stuck", "f1", RESOURCE, now, TTL, LOCK)
            .await
            .expect("begun"),
        STARTED
    );
    assert_eq!(
        store
            .begin_idempotent(&s, "stuck", "f1", RESOURCE, now, TTL, LOCK)
            .await
            .expect("begun"),
        IdempotencyBegin::InFlight
    );
}

async fn an_abandoned_claim_is_taken_over_at_once_by_the_same_request_with_its_reserved_id(
    kind: StoreKind,
) {
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let now = common::time::now();
    let first = Uuid::now_v7();
    let begin = |print: &'static str, resource: Uuid| {
        let store = Arc::clone(&store);
        let s = s.clone();
        async move {
            store
                .begin_idempotent(&s, "k", print, resource, now, TTL, LOCK)
                .await
                .expect("begun")
        }
    };
    assert_eq!(
        begin("f1", first).await,
        IdempotencyBegin::Started { resource: first }
    );
    store.abandon_idempotent(&s, "k").await.expect("abandoned");
    // The same request runs again at once, with the id its first try
    // reserved; another body is still a different request.
    assert_eq!(
        begin("f2", Uuid::now_v7()).await,
        IdempotencyBegin::Mismatch
    );
    assert_eq!(
        begin("f1", Uuid::now_v7()).await,
        IdempotencyBegin::Started { resource: first }
    );
    assert_eq!(
        begin("f1", Uuid::now_v7()).await,
        IdempotencyBegin::InFlight
    );
}

async fn an_event_inserted_twice_is_stored_once(kind: StoreKind) {
    use common::store::{Event, Inserted, NotificationState as N};
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let event = Event {
        title: "first".into(),
        notify: false,
        notification: N::Skipped,
        ..pending_event(&s)
    };
    assert_eq!(
        store.insert_event(&event).await.expect("inserted"),
        Inserted::New
    );
    let again = Event {
        title: "second".into(),
        ..event.clone()
    };
    assert_eq!(
        store.insert_event(&again).await.expect("answered"),
        Inserted::Existing(Box::new(event))
    );
    assert_eq!(store.events_stored(&s).await.expect("counted"), 1);
}

async fn concurrent_claims_have_exactly_one_winner(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let now = common::time::now();
    let claims = (0..20).map(|_| {
        let store = Arc::clone(&store);
        let s = s.clone();
        tokio::spawn(async move {
            store
                .begin_idempotent(&s, "one", "f", Uuid::now_v7(), now, TTL, LOCK)
                .await
                .expect("begun")
        })
    });
    let outcomes: Vec<_> = futures::future::join_all(claims)
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect();
    let started = outcomes
        .iter()
        .filter(|o| matches!(o, IdempotencyBegin::Started { .. }))
        .count();
    assert_eq!(started, 1, "{outcomes:?}");
    assert!(outcomes.iter().all(|o| matches!(
        o,
        IdempotencyBegin::Started { .. } | IdempotencyBegin::InFlight
    )));
}

async fn the_store_reopens_with_its_data(kind: StoreKind) {
    let (store, test) = open_store(kind).await;
    let s = scope();
    store
        .merge_identity(
            &s,
            "kept",
            Map::new(),
            vec!["a".into()],
            common::time::now(),
        )
        .await
        .expect("merged");
    drop(store);
    let reopened = common::store::open(&test.store_config(), Duration::from_secs(10))
        .await
        .expect("reopens");
    let identity = reopened
        .merge_identity(&s, "kept", Map::new(), vec![], common::time::now())
        .await
        .expect("merged");
    assert_eq!(identity.aliases, vec!["a"]);
    reopened.ping().await.expect("ping");
}

async fn deliveries_are_claimed_as_leases_fenced_and_given_up(kind: StoreKind) {
    use common::store::{Delivery, DeliveryClaim, DeliveryState, lease::ClaimRequest};
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let (event, device) = (Uuid::now_v7(), Uuid::now_v7());
    let now = common::time::now();
    let lease = Duration::from_secs(60);
    let claim = |at| {
        let store = Arc::clone(&store);
        let s = s.clone();
        async move {
            let request = ClaimRequest {
                now: at,
                lease,
                max_attempts: 4,
            };
            store
                .claim_deliveries(
                    &[common::store::lease::ClaimKey {
                        scope: s.clone(),
                        event_id: event,
                        device_id: device,
                    }],
                    &request,
                )
                .await
                .expect("claimed")[0]
        }
    };
    let until = now + Age::seconds(60);
    assert_eq!(
        claim(now).await,
        DeliveryClaim::Acquired {
            attempt: 1,
            lease_until: until,
            retaken: false,
        }
    );
    assert_eq!(
        claim(now).await,
        DeliveryClaim::Busy { until },
        "someone is sending it"
    );
    // The sender died: once its lease runs out the claim is taken over, as
    // a possible repeat (the dead sender may have pushed).
    let later = now + Age::seconds(61);
    assert!(matches!(
        claim(later).await,
        DeliveryClaim::Acquired {
            attempt: 2,
            retaken: true,
            ..
        }
    ));
    // The first sender comes back late: its outcome is not recorded.
    let mut record = Delivery {
        event_id: event,
        device_id: device,
        state: DeliveryState::Delivered,
        attempts: 1,
        error: None,
        apns_id: None,
        summary_id: None,
        provider: Some("apns".into()),
        lease_until: None,
        updated_at: later,
    };
    assert!(
        !store
            .finish_deliveries(&[(s.clone(), record.clone())])
            .await
            .expect("answered")[0]
    );
    // The second records a transient failure: the retry waits for its time.
    let retry_at = later + Age::seconds(5);
    record.state = DeliveryState::Retrying;
    record.attempts = 2;
    record.error = Some("503".into());
    record.lease_until = Some(retry_at);
    assert!(
        store
            .finish_deliveries(&[(s.clone(), record.clone())])
            .await
            .expect("finished")[0]
    );
    assert_eq!(claim(later).await, DeliveryClaim::Busy { until: retry_at });
    // A recorded failure is retried, not repeated.
    assert!(matches!(
        claim(retry_at).await,
        DeliveryClaim::Acquired {
            attempt: 3,
            retaken: false,
            ..
        }
    ));
    record.state = DeliveryState::Delivered;
    record.attempts = 3;
    record.error = None;
    record.lease_until = None;
    assert!(
        store
            .finish_deliveries(&[(s.clone(), record.clone())])
            .await
            .expect("finished")[0]
    );
    assert_eq!(
        claim(later + Age::hours(1)).await,
        DeliveryClaim::Settled(DeliveryState::Delivered)
    );
    assert_eq!(
        store.list_deliveries(&s, event).await.expect("listed"),
        vec![record]
    );

    // A delivery whose workers die every time is given up, and stays so.
    let doomed = Uuid::now_v7();
    let mut at = now;
    for attempt in 1..=4 {
        let request = ClaimRequest {
            now: at,
            lease,
            max_attempts: 4,
        };
        assert!(matches!(
            store.claim_deliveries(&[common::store::lease::ClaimKey { scope: s.clone(), event_id: event, device_id: doomed }], &request).await.expect("claimed")[0],
            DeliveryClaim::Acquired { attempt: a, .. } if a == attempt
        ));
        at += Age::seconds(61);
    }
    let request = ClaimRequest {
        now: at,
        lease,
        max_attempts: 4,
    };
    assert_eq!(
        store
            .claim_deliveries(
                &[common::store::lease::ClaimKey {
                    scope: s.clone(),
                    event_id: event,
                    device_id: doomed
                }],
                &request
            )
            .await
            .expect("claimed")[0],
        DeliveryClaim::GaveUp { attempts: 4 }
    );
    assert_eq!(
        store
            .claim_deliveries(
                &[common::store::lease::ClaimKey {
                    scope: s.clone(),
                    event_id: event,
                    device_id: doomed
                }],
                &request
            )
            .await
            .expect("claimed")[0],
        DeliveryClaim::Settled(DeliveryState::Failed)
    );
    assert!(
        store
            .list_deliveries(&scope(), event)
            .await
            .expect("listed")
            .is_empty(),
        "scoped"
    );
}

async fn events_are_read_many_at_once_each_in_its_own_scope(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let (ours, theirs) = (scope(), scope());
    let (a, b, c) = (
        pending_event(&ours),
        pending_event(&ours),
        pending_event(&theirs),
    );
    for event in [&a, &b, &c] {
        store.insert_event(event).await.expect("inserted");
    }
    let read = store
        .get_events(&[
            (ours.clone(), b.id),
            (theirs.clone(), a.id),
            (ours.clone(), Uuid::now_v7()),
            (theirs.clone(), c.id),
            (ours.clone(), a.id),
            (ours.clone(), b.id),
        ])
        .await
        .expect("read");
    let ids: Vec<Option<Uuid>> = read.iter().map(|e| e.as_ref().map(|e| e.id)).collect();
    assert_eq!(
        ids,
        [Some(b.id), None, None, Some(c.id), Some(a.id), Some(b.id)],
        "each key answered in order, only in its own scope"
    );
    assert_eq!(read[4], store.get_event(&ours, a.id).await.expect("read"));
    assert!(store.get_events(&[]).await.expect("read").is_empty());
}

async fn an_event_settles_from_its_deliveries_in_one_call(kind: StoreKind) {
    use common::store::{
        Delivery, DeliveryState, Event, NotificationState as N, lease::ClaimRequest,
    };
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let now = common::time::now();
    let state_of = |id| {
        let (store, s) = (Arc::clone(&store), s.clone());
        async move {
            let event = store.get_event(&s, id).await.expect("read");
            event.expect("stored").notification
        }
    };
    let event = Event {
        notification: N::Queued,
        ..pending_event(&s)
    };
    store.insert_event(&event).await.expect("inserted");
    let (sent, sending) = (Uuid::now_v7(), Uuid::now_v7());
    let request = ClaimRequest {
        now,
        lease: Duration::from_secs(60),
        max_attempts: 4,
    };
    for device in [sent, sending] {
        store
            .claim_deliveries(
                &[common::store::lease::ClaimKey {
                    scope: s.clone(),
                    event_id: event.id,
                    device_id: device,
                }],
                &request,
            )
            .await
            .expect("claimed");
    }
    let delivered = Delivery {
        event_id: event.id,
        device_id: sent,
        state: DeliveryState::Delivered,
        attempts: 1,
        error: None,
        apns_id: None,
        summary_id: None,
        provider: Some("log".into()),
        lease_until: None,
        updated_at: now,
    };
    assert!(
        store
            .finish_deliveries(&[(s.clone(), delivered.clone())])
            .await
            .expect("finished")[0]
    );

    // A delivery still being sent to an eligible device keeps it open.
    let open_one = store
        .settle_notification(&s, event.id, &[sent, sending])
        .await
        .expect("answered");
    assert_eq!(open_one, None);
    assert_eq!(state_of(event.id).await, N::Queued);
    // Once that device is no longer eligible, what was sent settles it.
    let settled = store
        .settle_notification(&s, event.id, &[sent])
        .await
        .expect("settled");
    assert_eq!(settled, Some(N::Delivered));
    assert_eq!(state_of(event.id).await, N::Delivered);
    let due = store
        .events_due(&N::UNSETTLED, now + Age::days(1), None, 10)
        .await
        .expect("listed");
    assert!(due.iter().all(|e| e.id != event.id), "no longer due");

    // No delivery at all: skipped.
    let quiet = pending_event(&s);
    store.insert_event(&quiet).await.expect("inserted");
    let settled = store
        .settle_notification(&s, quiet.id, &[])
        .await
        .expect("settled");
    assert_eq!(settled, Some(N::Skipped));
    assert_eq!(state_of(quiet.id).await, N::Skipped);

    // A settled notification is never moved again, nor is another
    // project's event, and an unknown event is no error.
    let failed = pending_event(&s);
    store.insert_event(&failed).await.expect("inserted");
    store
        .set_notification_state(&s, failed.id, &N::UNSETTLED, N::Failed, None)
        .await
        .expect("moved");
    store
        .settle_notification(&s, failed.id, &[])
        .await
        .expect("answered");
    assert_eq!(state_of(failed.id).await, N::Failed);
    let theirs = pending_event(&scope());
    store.insert_event(&theirs).await.expect("inserted");
    store
        .settle_notification(&s, theirs.id, &[])
        .await
        .expect("answered");
    let stored = store
        .get_event(&theirs.scope, theirs.id)
        .await
        .expect("read");
    assert_eq!(stored.expect("stored").notification, N::Pending);
    store
        .settle_notification(&s, Uuid::now_v7(), &[])
        .await
        .expect("an unknown event is no error");
}

async fn notification_states_move_only_from_the_expected_ones(kind: StoreKind) {
    use common::store::{Event, NotificationState as N};
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let event = Event {
        created_at: common::time::now() - Age::seconds(10),
        request_id: Some("req".into()),
        notification_due_at: Some(common::time::now() - Age::seconds(5)),
        ..pending_event(&s)
    };
    store.insert_event(&event).await.expect("inserted");
    // Each test has its own database, so the counts are exact.
    let count = |state| {
        let store = Arc::clone(&store);
        async move {
            store
                .count_in_notification_state(state)
                .await
                .expect("counted")
        }
    };
    assert_eq!((count(N::Pending).await, count(N::Queued).await), (1, 0));
    let pending = store
        .events_due(&[N::Pending], common::time::now(), None, 10)
        .await
        .expect("listed");
    assert!(
        store
            .events_due(
                &[N::Pending],
                common::time::now() - Age::seconds(6),
                None,
                10
            )
            .await
            .expect("listed")
            .is_empty(),
        "not due yet"
    );
    assert!(
        store
            .events_due(&[N::Pending], common::time::now(), Some(event.id), 10)
            .await
            .expect("listed")
            .is_empty(),
        "after the cursor"
    );
    assert!(
        pending
            .iter()
            .any(|e| e.id == event.id && e.request_id.as_deref() == Some("req"))
    );
    assert!(
        store
            .set_notification_state(&s, event.id, &[N::Pending], N::Queued, None)
            .await
            .expect("moved")
    );
    assert!(
        store
            .set_notification_state(&s, event.id, &[N::Pending, N::Queued], N::Delivered, None)
            .await
            .expect("moved")
    );
    assert!(
        !store
            .set_notification_state(&s, event.id, &[N::Pending], N::Queued, None)
            .await
            .expect("answered"),
        "a late queued never overwrites delivered"
    );
    assert!(
        !store
            .set_notification_state(&scope(), event.id, &[N::Delivered], N::Failed, None)
            .await
            .expect("answered"),
        "scoped"
    );
    let stored = store
        .get_event(&s, event.id)
        .await
        .expect("read")
        .expect("there");
    assert_eq!(stored.notification, N::Delivered);
    assert_eq!((count(N::Pending).await, count(N::Delivered).await), (0, 1));
}

/// The relay's work list holds unsettled events alone: an event recorded
/// with `notify: false` (skipped) or one whose push is settled is never on
/// it, whichever states are asked for, and is still counted in its state.
async fn only_unsettled_events_are_due(kind: StoreKind) {
    use common::store::{Event, NotificationState as N};
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let due_at = Some(common::time::now() - Age::seconds(5));
    let pending = Event {
        notification_due_at: due_at,
        ..pending_event(&s)
    };
    let skipped = Event {
        notify: false,
        notification: N::Skipped,
        notification_due_at: None,
        ..pending_event(&s)
    };
    let settled = Event {
        notification_due_at: due_at,
        ..pending_event(&s)
    };
    for event in [&pending, &skipped, &settled] {
        store.insert_event(event).await.expect("inserted");
    }
    assert!(
        store
            .set_notification_state(&s, settled.id, &[N::Pending], N::Delivered, None)
            .await
            .expect("moved")
    );
    let due: Vec<_> = store
        .events_due(&N::ALL, common::time::now(), None, 10)
        .await
        .expect("listed")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(due, vec![pending.id]);
    for state in N::SETTLED {
        assert!(
            store
                .events_due(&[state], common::time::now(), None, 10)
                .await
                .expect("listed")
                .is_empty(),
            "{state:?}"
        );
    }
    let mut counts = Vec::new();
    for state in N::ALL {
        counts.push(
            store
                .count_in_notification_state(state)
                .await
                .expect("counted"),
        );
    }
    // Pending, queued, delivered, failed, skipped.
    assert_eq!(counts, vec![1, 0, 1, 0, 1]);
}

/// The event and the outcome of the request that created it are one write:
/// once the event is stored, the key replays the outcome, even when the
/// request then died before its answer was sent (its claim abandoned, as
/// after a deadline), and a second event is never written for the key.
async fn an_event_inserted_with_its_outcome_makes_the_key_replay_it(kind: StoreKind) {
    let (store, test) = open_store(kind).await;
    let s = scope();
    let now = common::time::now();
    let begun = store
        .begin_idempotent(&s, "k", "f", RESOURCE, now, TTL, LOCK)
        .await
        .expect("claimed");
    assert_eq!(begun, STARTED);
    let mut event = pending_event(&s);
    event.id = RESOURCE;
    let outcome = common::store::IdempotentOutcome {
        key: "k".into(),
        response: response("{\"the\":\"answer\"}"),
    };
    let inserted = store
        .insert_event_with_outcome(&event, &outcome)
        .await
        .expect("stored");
    assert_eq!(inserted, common::store::Inserted::New);
    lose_the_outcome_copy(&test, &s, "k").await;
    store.abandon_idempotent(&s, "k").await.expect("abandoned");
    let again = store
        .begin_idempotent(&s, "k", "f", Uuid::now_v7(), now, TTL, LOCK)
        .await
        .expect("claimed again");
    assert_eq!(again, IdempotencyBegin::Replay(outcome.response.clone()));
    assert_eq!(store.events_stored(&s).await.expect("count"), 1);
    // An event already stored keeps its outcome; another is not recorded.
    let other = common::store::IdempotentOutcome {
        key: "k".into(),
        response: response("other"),
    };
    let inserted = store
        .insert_event_with_outcome(&event, &other)
        .await
        .expect("found");
    assert!(matches!(inserted, common::store::Inserted::Existing(_)));
    let replay = store
        .begin_idempotent(&s, "k", "f", Uuid::now_v7(), now, TTL, LOCK)
        .await
        .expect("replayed");
    assert_eq!(replay, IdempotencyBegin::Replay(outcome.response));
}

/// MongoDB has no transaction to write the event and its idempotency record
/// together: the outcome lives in the event document, and the record gets a
/// copy. This loses the copy, as a crash between the two writes would.
/// (SQLite writes both in one transaction: there is no copy to lose.)
async fn lose_the_outcome_copy(test: &TestConfig, s: &Scope, key: &str) {
    if let common::store::StoreConfig::Mongo { uri, database, .. } = test.store_config() {
        let client = mongodb::Client::with_uri_str(&uri)
            .await
            .expect("mongo client");
        let updated = client
            .database(&database)
            .collection::<mongodb::bson::Document>("idempotency")
            .update_one(
                mongodb::bson::doc! { "org": &s.org, "project": &s.project, "key": key },
                mongodb::bson::doc! { "$set": { "status": null }, "$unset": { "contentType": "", "body": "" } },
            )
            .await
            .expect("copy lost");
        assert_eq!(updated.matched_count, 1);
    }
}

/// Insights: set and incremented by the same rules in every store (an
/// integer stays one, a refusal writes nothing), listed in creation order,
/// deleted, and every change (a deletion too) followed by time across
/// scopes.
async fn insights_are_set_incremented_listed_deleted_and_followed(kind: StoreKind) {
    use common::store::{InsightNumber::*, InsightRefusal, InsightValue};
    let (store, _t) = open_store(kind).await;
    let s = scope();
    let t0 = common::time::now();
    let (first, created) = store
        .set_insight(
            &s,
            "Revenue",
            &InsightValue::Number(Integer(1999)),
            Some("💰"),
            t0,
        )
        .await
        .expect("stored")
        .expect("accepted");
    assert!(created);
    assert_eq!((first.created_at, first.updated_at), (t0, t0));
    let t1 = t0 + Age::seconds(1);
    let (added, created) = store
        .increment_insight(&s, "Revenue", Integer(1), None, t1)
        .await
        .expect("stored")
        .expect("accepted");
    assert!(!created);
    assert_eq!(
        added.value,
        InsightValue::Number(Integer(2000)),
        "still an integer"
    );
    assert_eq!(added.icon.as_deref(), Some("💰"), "the icon stays");
    assert_eq!((added.created_at, added.updated_at), (t0, t1));
    let (float, _) = store
        .increment_insight(&s, "Revenue", Float(0.5), None, t1)
        .await
        .expect("stored")
        .expect("accepted");
    assert_eq!(float.value, InsightValue::Number(Float(2000.5)));
    let (fresh, created) = store
        .increment_insight(&s, "Trials", Integer(3), Some("🧪"), t1)
        .await
        .expect("stored")
        .expect("accepted");
    assert!(created);
    assert_eq!(fresh.value, InsightValue::Number(Integer(3)));
    store
        .set_insight(&s, "Status", &InsightValue::Text("green".into()), None, t1)
        .await
        .expect("stored")
        .expect("accepted");
    assert_eq!(
        store
            .increment_insight(&s, "Status", Integer(1), None, t1)
            .await
            .expect("answered"),
        Err(InsightRefusal::NotANumber("a string"))
    );
    let max = common::store::insight::MAX_MAGNITUDE;
    store
        .set_insight(&s, "Big", &InsightValue::Number(Integer(max)), None, t1)
        .await
        .expect("stored")
        .expect("accepted");
    assert_eq!(
        store
            .increment_insight(&s, "Big", Integer(1), None, t1)
            .await
            .expect("answered"),
        Err(InsightRefusal::OutOfRange)
    );
    let listed = store.list_insights(&s).await.expect("listed");
    let summary: Vec<(&str, &InsightValue)> = listed
        .iter()
        .map(|i| (i.title.as_str(), &i.value))
        .collect();
    assert_eq!(
        summary,
        [
            ("Revenue", &InsightValue::Number(Float(2000.5))),
            ("Big", &InsightValue::Number(Integer(max))),
            ("Status", &InsightValue::Text("green".into())),
            ("Trials", &InsightValue::Number(Integer(3))),
        ],
        "creation order, then (created at the same time) by title; the refusals changed nothing"
    );
    assert!(
        store
            .list_insights(&scope())
            .await
            .expect("listed")
            .is_empty()
    );

    // Every change since a time, across scopes, the deletion included.
    let t2 = t1 + Age::seconds(1);
    let other = scope();
    store
        .set_insight(&other, "Theirs", &InsightValue::Flag(true), None, t2)
        .await
        .expect("stored")
        .expect("accepted");
    assert!(
        store
            .delete_insight(&s, "Trials", t2)
            .await
            .expect("deleted")
    );
    assert!(
        !store
            .delete_insight(&s, "Trials", t2)
            .await
            .expect("answered")
    );
    let changed = store.insights_changed(t2, 100).await.expect("changes");
    let ours: Vec<_> = changed
        .iter()
        .filter(|c| c.scope == s || c.scope == other)
        .map(|c| {
            (
                c.scope.clone(),
                c.title.as_str(),
                c.changed_at,
                c.insight.is_some(),
            )
        })
        .collect();
    assert_eq!(ours.len(), 2, "{changed:?}");
    assert!(
        ours.contains(&(other.clone(), "Theirs", t2, true)),
        "{ours:?}"
    );
    assert!(ours.contains(&(s.clone(), "Trials", t2, false)), "{ours:?}");
    let before = store.insights_changed(t0, 100).await.expect("changes");
    let trials: Vec<i64> = before
        .iter()
        .filter(|c| c.scope == s && c.title == "Trials")
        .map(|c| c.version)
        .collect();
    assert_eq!(trials.len(), 1, "one row per insight, as it stands");
    assert!(
        before
            .windows(2)
            .all(|w| w[0].changed_at <= w[1].changed_at),
        "oldest change first"
    );
    // Created again after its deletion: its version moves on.
    let (again, created) = store
        .increment_insight(&s, "Trials", Integer(1), None, t2)
        .await
        .expect("stored")
        .expect("accepted");
    assert!(created);
    assert_eq!(again.value, InsightValue::Number(Integer(1)));
    let now = store.insights_changed(t2, 100).await.expect("changes");
    let version = now
        .iter()
        .find(|c| c.scope == s && c.title == "Trials")
        .map(|c| c.version)
        .expect("changed");
    assert!(version > trials[0], "{version} after {}", trials[0]);
}

/// Increments from many tasks at once, through two handles on the same
/// store as two processes would hold: none is lost.
async fn concurrent_increments_through_two_handles_lose_none(kind: StoreKind) {
    use common::store::{InsightNumber::Integer, InsightValue};
    let (first, test) = open_store(kind).await;
    let second = common::store::open(&test.store_config(), Duration::from_secs(10))
        .await
        .expect("a second handle");
    let s = scope();
    let tasks = (0..8).map(|n| {
        let store = if n % 2 == 0 {
            Arc::clone(&first)
        } else {
            Arc::clone(&second)
        };
        let s = s.clone();
        tokio::spawn(async move {
            for _ in 0..25 {
                store
                    .increment_insight(&s, "Hits", Integer(1), None, common::time::now())
                    .await
                    .expect("stored")
                    .expect("accepted");
            }
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.expect("the task ran");
    }
    let listed = first.list_insights(&s).await.expect("listed");
    assert_eq!(listed[0].value, InsightValue::Number(Integer(200)));
}

for_each_store!(
    an_event_inserted_with_its_outcome_makes_the_key_replay_it,
    deliveries_are_claimed_as_leases_fenced_and_given_up,
    an_abandoned_claim_is_taken_over_at_once_by_the_same_request_with_its_reserved_id,
    an_event_inserted_twice_is_stored_once,
    notification_states_move_only_from_the_expected_ones,
    an_event_settles_from_its_deliveries_in_one_call,
    events_are_read_many_at_once_each_in_its_own_scope,
    only_unsettled_events_are_due,
    api_keys_are_found_by_hash_listed_and_revoked,
    api_key_scopes_round_trip,
    identities_merge_properties_and_union_aliases,
    users_are_counted_merged_found_and_listed,
    idempotency_claims_replay_and_mismatch,
    expired_and_abandoned_claims_can_be_taken_over,
    concurrent_claims_have_exactly_one_winner,
    the_store_reopens_with_its_data,
    insights_are_set_incremented_listed_deleted_and_followed,
    concurrent_increments_through_two_handles_lose_none,
);

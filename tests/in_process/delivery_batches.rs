//! Claims and outcomes in batches, on every store: a batch answers each
//! delivery as a claim of its own would, a delivery appears in a batch
//! twice or in two competing batches and is still claimed once, and a
//! batch of outcomes records only the claims still held.

use std::time::Duration;

use chrono::Duration as Age;
use common::store::{
    Delivery, DeliveryClaim, DeliveryState, Scope,
    lease::{ClaimKey, ClaimRequest},
};
use tocsin_tests::{StoreKind, for_each_store, open_store};
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(60);

fn key(scope: &Scope, event_id: Uuid, device_id: Uuid) -> ClaimKey {
    ClaimKey {
        scope: scope.clone(),
        event_id,
        device_id,
    }
}

fn at(now: chrono::DateTime<chrono::Utc>) -> ClaimRequest {
    ClaimRequest {
        now,
        lease: LEASE,
        max_attempts: 4,
    }
}

fn outcome(
    key: &ClaimKey,
    state: DeliveryState,
    attempts: u32,
    now: chrono::DateTime<chrono::Utc>,
) -> (Scope, Delivery) {
    (
        key.scope.clone(),
        Delivery {
            event_id: key.event_id,
            device_id: key.device_id,
            state,
            attempts,
            error: None,
            apns_id: None,
            summary_id: None,
            provider: Some("apns".into()),
            lease_until: None,
            updated_at: now,
        },
    )
}

async fn a_batch_answers_each_delivery_as_its_own_claim_would(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let scope = Scope::new("org", format!("p{}", Uuid::new_v4().simple()));
    let event = Uuid::now_v7();
    let [fresh, again, held, settled] = [(); 4].map(|_| key(&scope, event, Uuid::now_v7()));
    let now = common::time::now();
    // Another worker holds one delivery, and another is already delivered.
    for k in [&held, &settled] {
        store
            .claim_deliveries(std::slice::from_ref(k), &at(now))
            .await
            .expect("claimed");
    }
    let recorded = store
        .finish_deliveries(&[outcome(&settled, DeliveryState::Delivered, 1, now)])
        .await
        .expect("recorded");
    assert_eq!(recorded, vec![true]);

    let batch = [
        fresh.clone(),
        again.clone(),
        held.clone(),
        settled.clone(),
        // The same delivery twice in one batch (a job and its redelivered
        // copy in hand at once): claimed once.
        fresh.clone(),
    ];
    let until = now + Age::seconds(60);
    let claims = store
        .claim_deliveries(&batch, &at(now))
        .await
        .expect("claimed");
    assert_eq!(
        claims,
        vec![
            DeliveryClaim::Acquired {
                attempt: 1,
                lease_until: until,
                retaken: false,
            },
            DeliveryClaim::Acquired {
                attempt: 1,
                lease_until: until,
                retaken: false,
            },
            DeliveryClaim::Busy { until },
            DeliveryClaim::Settled(DeliveryState::Delivered),
            DeliveryClaim::Busy { until },
        ]
    );
    // The held lease runs out: a later batch takes it over, with the next
    // attempt, and still leaves the live ones alone.
    let later = now + Age::seconds(61);
    let claims = store
        .claim_deliveries(&[held.clone(), settled.clone()], &at(later))
        .await
        .expect("claimed");
    assert!(
        matches!(
            claims[0],
            DeliveryClaim::Acquired {
                attempt: 2,
                retaken: true,
                ..
            }
        ),
        "{claims:?}"
    );
    assert_eq!(claims[1], DeliveryClaim::Settled(DeliveryState::Delivered));
    assert!(
        store
            .claim_deliveries(&[], &at(later))
            .await
            .expect("nothing to claim")
            .is_empty()
    );
}

async fn competing_batches_claim_each_delivery_once(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let scope = Scope::new("org", format!("p{}", Uuid::new_v4().simple()));
    let keys: Vec<ClaimKey> = (0..3)
        .flat_map(|_| {
            let event = Uuid::now_v7();
            let scope = scope.clone();
            (0..8).map(move |_| key(&scope, event, Uuid::now_v7()))
        })
        .collect();
    let now = common::time::now();
    // Two notifiers claim the same deliveries at once, in their own orders.
    let mut reversed = keys.clone();
    reversed.reverse();
    let request = at(now);
    let (a, b) = tokio::join!(
        store.claim_deliveries(&keys, &request),
        store.claim_deliveries(&reversed, &request),
    );
    let (a, mut b) = (a.expect("claimed"), b.expect("claimed"));
    b.reverse();
    for ((k, a), b) in keys.iter().zip(&a).zip(&b) {
        let won = [a, b]
            .iter()
            .filter(|c| matches!(c, DeliveryClaim::Acquired { .. }))
            .count();
        assert_eq!(won, 1, "{k:?}: {a:?} and {b:?}");
        assert!(
            [a, b]
                .iter()
                .any(|c| matches!(c, DeliveryClaim::Busy { .. })),
            "{a:?} and {b:?}"
        );
    }
}

async fn a_batch_of_outcomes_records_only_the_claims_still_held(kind: StoreKind) {
    let (store, _t) = open_store(kind).await;
    let scope = Scope::new("org", format!("p{}", Uuid::new_v4().simple()));
    let event = Uuid::now_v7();
    let keys = [(); 3].map(|_| key(&scope, event, Uuid::now_v7()));
    let now = common::time::now();
    store
        .claim_deliveries(&keys, &at(now))
        .await
        .expect("claimed");
    // The third worker stalled past its lease; another took the delivery.
    let later = now + Age::seconds(61);
    store
        .claim_deliveries(&keys[2..], &at(later))
        .await
        .expect("taken over");
    let mut retrying = outcome(&keys[1], DeliveryState::Retrying, 1, later);
    retrying.1.error = Some("503".into());
    retrying.1.lease_until = Some(later + Age::seconds(5));
    let batch = [
        outcome(&keys[0], DeliveryState::Delivered, 1, later),
        retrying.clone(),
        outcome(&keys[2], DeliveryState::Delivered, 1, later),
    ];
    let recorded = store.finish_deliveries(&batch).await.expect("recorded");
    assert_eq!(recorded, vec![true, true, false]);
    // Recorded once: the same outcomes again find nothing to record.
    let again = store.finish_deliveries(&batch).await.expect("answered");
    assert_eq!(again, vec![false, false, false]);
    let mut listed = store.list_deliveries(&scope, event).await.expect("listed");
    listed.sort_by_key(|d| keys.iter().position(|k| k.device_id == d.device_id));
    let states: Vec<(DeliveryState, u32)> = listed.iter().map(|d| (d.state, d.attempts)).collect();
    assert_eq!(
        states,
        vec![
            (DeliveryState::Delivered, 1),
            (DeliveryState::Retrying, 1),
            (DeliveryState::Sending, 2),
        ]
    );
    assert_eq!(listed[1], retrying.1);
}

for_each_store!(
    a_batch_answers_each_delivery_as_its_own_claim_would,
    competing_batches_claim_each_delivery_once,
    a_batch_of_outcomes_records_only_the_claims_still_held,
);

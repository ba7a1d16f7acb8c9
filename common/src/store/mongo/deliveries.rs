//! Deliveries: the lease a worker claims before sending an event's push to
//! a device (the rule is `lease::decide`; every write here is conditional on
//! the record read, so of two racing workers one wins), and the outcome it
//! records while the claim is still its own.

use mongodb::bson::{Bson, Document, doc};
use uuid::Uuid;

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{date, delivery_from_doc, scope_filter},
    find_all, is_duplicate_key,
};
use crate::store::{
    Delivery, DeliveryClaim, DeliveryState, Scope, StoreError, StoreResult,
    lease::{self, ClaimRequest, Decision, Held},
};

pub(super) async fn claim(
    store: &MongoStore,
    scope: &Scope,
    event_id: Uuid,
    device_id: Uuid,
    request: &ClaimRequest,
) -> StoreResult<DeliveryClaim> {
    let key = doc! { "eventId": event_id.to_string(), "deviceId": device_id.to_string() };
    let now = date(&request.now);
    // Most claims are first claims: try the insert before reading
    // anything, and read only when a record turns out to exist.
    let mut look = false;
    for _ in 0..MAX_ATTEMPTS {
        let existing = if look {
            store
                .deliveries()
                .find_one(key.clone())
                .await
                .map_err(classify)?
        } else {
            None
        };
        look = true;
        let held = existing.as_ref().map(as_held).transpose()?;
        let decision = lease::decide(held, request);
        // Every write is conditional on the record read (or on there
        // being none), so of two workers racing only one wins.
        let written = match (decision, held) {
            (Decision::Answer(_), _) => true,
            (
                Decision::Take {
                    attempt,
                    lease_until,
                },
                None,
            ) => {
                let mut fresh = key.clone();
                fresh.insert("org", &scope.org);
                fresh.insert("project", &scope.project);
                fresh.insert("state", DeliveryState::Sending.as_str());
                fresh.insert("attempts", i64::from(attempt));
                fresh.insert("claimedAt", now);
                fresh.insert("leaseUntil", date(&lease_until));
                fresh.insert("updatedAt", now);
                match store.deliveries().insert_one(fresh).await {
                    Ok(_) => true,
                    Err(e) if is_duplicate_key(&e) => false,
                    Err(e) => return Err(classify(e)),
                }
            }
            (decision, Some(held)) => {
                let mut guard = key.clone();
                guard.insert("state", held.state.as_str());
                guard.insert("attempts", i64::from(held.attempts));
                let update = match decision {
                    Decision::Take {
                        attempt,
                        lease_until,
                    } => doc! { "$set": {
                        "state": DeliveryState::Sending.as_str(),
                        "attempts": i64::from(attempt),
                        "claimedAt": now,
                        "leaseUntil": date(&lease_until),
                        "updatedAt": now,
                    }},
                    _ => doc! { "$set": {
                        "state": DeliveryState::Failed.as_str(),
                        "error": lease::gave_up_reason(held.attempts),
                        "leaseUntil": Bson::Null,
                        "updatedAt": now,
                    }},
                };
                store
                    .deliveries()
                    .update_one(guard, update)
                    .await
                    .map_err(classify)?
                    .matched_count
                    == 1
            }
            (Decision::GiveUp { .. }, None) => true,
        };
        if written {
            return Ok(decision.claim());
        }
    }
    Err(StoreError::unavailable(
        "delivery claim is contended; try again",
    ))
}

/// What a stored delivery holds, as far as claiming goes.
fn as_held(d: &Document) -> StoreResult<Held> {
    let current = delivery_from_doc(d)?;
    // Records from before leases: a claim's lease was a minute.
    let lease_until = current.lease_until.unwrap_or_else(|| {
        d.get_datetime("claimedAt")
            .map(|t| t.to_chrono() + chrono::Duration::seconds(60))
            .unwrap_or_default()
    });
    Ok(Held {
        state: current.state,
        attempts: current.attempts,
        lease_until,
    })
}

pub(super) async fn finish(
    store: &MongoStore,
    scope: &Scope,
    delivery: &Delivery,
) -> StoreResult<bool> {
    let mut filter = scope_filter(scope);
    filter.insert("eventId", delivery.event_id.to_string());
    filter.insert("deviceId", delivery.device_id.to_string());
    filter.insert("state", DeliveryState::Sending.as_str());
    filter.insert("attempts", i64::from(delivery.attempts));
    let result = store
        .deliveries()
        .update_one(
            filter,
            doc! { "$set": {
                "state": delivery.state.as_str(),
                "error": delivery.error.clone(),
                "apnsId": delivery.apns_id.clone(),
                "provider": delivery.provider.clone(),
                "leaseUntil": delivery.lease_until.as_ref().map(date),
                "updatedAt": date(&delivery.updated_at),
            }},
        )
        .await
        .map_err(classify)?;
    Ok(result.matched_count == 1)
}

pub(super) async fn list(
    store: &MongoStore,
    scope: &Scope,
    event_id: Uuid,
) -> StoreResult<Vec<Delivery>> {
    let mut filter = scope_filter(scope);
    filter.insert("eventId", event_id.to_string());
    let docs = find_all(&store.deliveries(), filter, doc! { "deviceId": 1 }, None).await?;
    docs.iter().map(delivery_from_doc).collect()
}

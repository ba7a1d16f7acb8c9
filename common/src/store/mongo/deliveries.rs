//! Deliveries: the lease a worker claims before sending an event's push to
//! a device (the rule is `lease::decide`; every write here is conditional on
//! the record read, so of two racing workers one wins), and the outcome it
//! records while the claim is still its own. A batch of first claims is
//! one bulk insert, and a batch of outcomes one `update` command.

use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

use mongodb::{
    bson::{Bson, DateTime, Document, doc},
    error::{ErrorKind, InsertManyError},
};
use uuid::Uuid;

use super::{
    DUPLICATE_KEY, MAX_ATTEMPTS, MongoStore, classify,
    codec::{date, delivery_from_doc, scope_filter},
    find_all, is_duplicate_key,
};
use crate::store::{
    Delivery, DeliveryClaim, DeliveryState, DeliveryStore, Scope, StoreError, StoreResult,
    lease::{self, ClaimKey, ClaimRequest, Decision, Held},
};

#[async_trait]
impl DeliveryStore for MongoStore {
    /// Most claims of a batch are first claims: one unordered bulk insert
    /// takes them all, marked as this batch's. When some keys already had a
    /// record (a duplicate key), the records carrying the mark say which
    /// inserts went through (a server may not say which failed), and the
    /// others are claimed one by one, as is a key the batch holds twice.
    async fn claim_deliveries(
        &self,
        keys: &[ClaimKey],
        request: &ClaimRequest,
    ) -> StoreResult<Vec<DeliveryClaim>> {
        self.guard
            .call("claim_deliveries", async {
                let first = lease::decide(None, request);
                let Decision::Take {
                    attempt,
                    lease_until,
                    ..
                } = first
                else {
                    return Err(StoreError::Backend(anyhow::anyhow!(
                        "the lease rule does not take a delivery without a record"
                    )));
                };
                // Only a key's first place in the batch is inserted.
                let mut seen = HashSet::new();
                let firsts: Vec<bool> = keys.iter().map(|key| seen.insert(key)).collect();
                if seen.is_empty() {
                    return Ok(Vec::new());
                }
                let mark = Uuid::new_v4().to_string();
                let now = date(&request.now);
                let docs = keys
                    .iter()
                    .zip(&firsts)
                    .filter(|(_, first)| **first)
                    .map(|(key, _)| {
                        let mut doc = fresh(key, attempt, date(&lease_until), now);
                        doc.insert("claimedBy", &mark);
                        doc
                    });
                let mut taken = firsts.clone();
                if let Err(e) = self.deliveries().insert_many(docs).ordered(false).await {
                    if !any_duplicate_key(&e) {
                        return Err(classify(e));
                    }
                    let ours = marked(self, keys, "claimedBy", &mark).await?;
                    for (key, taken) in keys.iter().zip(taken.iter_mut()) {
                        *taken = *taken && ours.iter().any(|(e, d, _)| same(key, e, d));
                    }
                }
                // Distinct keys are claimed concurrently; the places of a key the
                // batch holds twice one after the other, in batch order, so its first
                // place is the one that can take it (and the others find it held), even
                // when the bulk insert did not write it: a server may stop an unordered
                // insert at its first error.
                let mut places: HashMap<&ClaimKey, Vec<usize>> = HashMap::new();
                for (i, key) in keys.iter().enumerate() {
                    places.entry(key).or_default().push(i);
                }
                let taken = &taken;
                let claims = places.into_iter().map(|(key, places)| async move {
                    let mut claims = Vec::with_capacity(places.len());
                    for i in places {
                        let claim = if taken[i] {
                            first.claim()
                        } else {
                            claim_one(self, key, request, true).await?
                        };
                        claims.push((i, claim));
                    }
                    Ok::<_, StoreError>(claims)
                });
                let mut claims: Vec<_> = futures::future::try_join_all(claims)
                    .await?
                    .into_iter()
                    .flatten()
                    .collect();
                claims.sort_unstable_by_key(|(i, _)| *i);
                Ok(claims.into_iter().map(|(_, claim)| claim).collect())
            })
            .await
    }

    /// Every outcome of the batch in one unordered `update` command (one bulk
    /// write), each conditional on its claim still being the latest. The
    /// command answers how many matched, not which: when some did not, the
    /// records are read back, and the ones this batch wrote carry its mark.
    async fn finish_deliveries(&self, deliveries: &[(Scope, Delivery)]) -> StoreResult<Vec<bool>> {
        self.guard
            .call("finish_deliveries", async {
                if deliveries.is_empty() {
                    return Ok(Vec::new());
                }
                let mark = Uuid::new_v4().to_string();
                let updates: Vec<Document> = deliveries
                    .iter()
                    .map(|(scope, delivery)| {
                        let mut filter = scope_filter(scope);
                        filter.insert("eventId", delivery.event_id.to_string());
                        filter.insert("deviceId", delivery.device_id.to_string());
                        filter.insert("state", DeliveryState::Sending.as_str());
                        filter.insert("attempts", i64::from(delivery.attempts));
                        doc! {
                            "q": filter,
                            "u": { "$set": {
                                "state": delivery.state.as_str(),
                                "error": delivery.error.clone(),
                                "apnsId": delivery.apns_id.clone(),
                                "provider": delivery.provider.clone(),
                                "leaseUntil": delivery.lease_until.as_ref().map(date),
                                "updatedAt": date(&delivery.updated_at),
                                "finishedBy": &mark,
                            }},
                        }
                    })
                    .collect();
                let reply = self
                    .db
                    .run_command(doc! {
                        "update": self.deliveries().name(),
                        "updates": updates,
                        "ordered": false,
                    })
                    .await
                    .map_err(classify)?;
                if let Ok(errors) = reply.get_array("writeErrors")
                    && !errors.is_empty()
                {
                    return Err(StoreError::Backend(anyhow::anyhow!(
                        "recording deliveries failed: {errors:?}"
                    )));
                }
                let matched = match reply.get("n") {
                    Some(Bson::Int32(n)) => i64::from(*n),
                    Some(Bson::Int64(n)) => *n,
                    _ => -1,
                };
                if usize::try_from(matched).is_ok_and(|n| n == deliveries.len()) {
                    return Ok(vec![true; deliveries.len()]);
                }
                let keys = keys_of(deliveries);
                let written = marked(self, &keys, "finishedBy", &mark).await?;
                Ok(deliveries
                    .iter()
                    .map(|(_, d)| {
                        written.iter().any(|(e, v, attempts)| {
                            *attempts == i64::from(d.attempts)
                                && d.event_id.to_string() == *e
                                && d.device_id.to_string() == *v
                        })
                    })
                    .collect())
            })
            .await
    }

    /// One unordered bulk insert, each record marked as this batch's;
    /// when some keys already had a record (a duplicate key), the marked
    /// records say which were written.
    async fn record_withheld(&self, deliveries: &[(Scope, Delivery)]) -> StoreResult<Vec<bool>> {
        self.guard
            .call("record_withheld", async {
                if deliveries.is_empty() {
                    return Ok(Vec::new());
                }
                let mark = Uuid::new_v4().to_string();
                let keys = keys_of(deliveries);
                let docs = keys.iter().zip(deliveries).map(|(key, (_, d))| {
                    let mut doc = key_filter(key);
                    doc.insert("org", &key.scope.org);
                    doc.insert("project", &key.scope.project);
                    doc.insert("state", d.state.as_str());
                    doc.insert("reason", d.state.reason());
                    doc.insert("summaryId", d.summary_id.map(|id| id.to_string()));
                    doc.insert("attempts", 0_i64);
                    doc.insert("updatedAt", date(&d.updated_at));
                    doc.insert("recordedBy", &mark);
                    doc
                });
                match self.deliveries().insert_many(docs).ordered(false).await {
                    Ok(_) => Ok(vec![true; deliveries.len()]),
                    Err(e) if any_duplicate_key(&e) => {
                        let ours = marked(self, &keys, "recordedBy", &mark).await?;
                        Ok(keys
                            .iter()
                            .map(|key| ours.iter().any(|(e, d, _)| same(key, e, d)))
                            .collect())
                    }
                    Err(e) => Err(classify(e)),
                }
            })
            .await
    }

    async fn list_deliveries(&self, scope: &Scope, event_id: Uuid) -> StoreResult<Vec<Delivery>> {
        self.guard
            .call("list_deliveries", of_event(self, scope, event_id))
            .await
    }
}

/// Whether a failed write failed (at least in part) on a duplicate key,
/// however the server reports it.
fn any_duplicate_key(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        ErrorKind::InsertMany(InsertManyError {
            write_errors: Some(errors),
            write_concern_error: None,
            ..
        }) => errors.iter().all(|w| w.code == DUPLICATE_KEY),
        _ => is_duplicate_key(e),
    }
}

/// The (event, device, attempts) of the records of `keys` whose `field`
/// is `mark`: the ones a batch wrote.
async fn marked<'a>(
    store: &MongoStore,
    keys: impl IntoIterator<Item = &'a ClaimKey>,
    field: &str,
    mark: &str,
) -> StoreResult<Vec<(String, String, i64)>> {
    let keys: Vec<Document> = keys.into_iter().map(key_filter).collect();
    let docs = find_all(
        &store.deliveries(),
        doc! { "$or": keys, field: mark },
        doc! { "_id": 1 },
        None,
    )
    .await?;
    Ok(docs
        .iter()
        .filter_map(|d| {
            Some((
                d.get_str("eventId").ok()?.to_owned(),
                d.get_str("deviceId").ok()?.to_owned(),
                d.get_i64("attempts").ok()?,
            ))
        })
        .collect())
}

fn same(key: &ClaimKey, event_id: &str, device_id: &str) -> bool {
    key.event_id.to_string() == event_id && key.device_id.to_string() == device_id
}

/// Claims one delivery: reads the record (when `look`, or once the
/// insert of a fresh one meets a record), decides, and writes
/// conditionally on what was read, so of two racing workers one wins.
async fn claim_one(
    store: &MongoStore,
    key: &ClaimKey,
    request: &ClaimRequest,
    mut look: bool,
) -> StoreResult<DeliveryClaim> {
    let filter = key_filter(key);
    let now = date(&request.now);
    for _ in 0..MAX_ATTEMPTS {
        let existing = if look {
            store
                .deliveries()
                .find_one(filter.clone())
                .await
                .map_err(classify)?
        } else {
            None
        };
        look = true;
        let held = existing.as_ref().map(as_held).transpose()?;
        let decision = lease::decide(held, request);
        let written = match (decision, held) {
            (Decision::Answer(_), _) => true,
            (
                Decision::Take {
                    attempt,
                    lease_until,
                    ..
                },
                None,
            ) => match store
                .deliveries()
                .insert_one(fresh(key, attempt, date(&lease_until), now))
                .await
            {
                Ok(_) => true,
                Err(e) if is_duplicate_key(&e) => false,
                Err(e) => return Err(classify(e)),
            },
            (decision, Some(held)) => {
                let mut guard = filter.clone();
                guard.insert("state", held.state.as_str());
                guard.insert("attempts", i64::from(held.attempts));
                let update = match decision {
                    Decision::Take {
                        attempt,
                        lease_until,
                        ..
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

/// The record of a delivery's first claim.
fn fresh(key: &ClaimKey, attempt: u32, lease_until: DateTime, now: DateTime) -> Document {
    let mut fresh = key_filter(key);
    fresh.insert("org", &key.scope.org);
    fresh.insert("project", &key.scope.project);
    fresh.insert("state", DeliveryState::Sending.as_str());
    fresh.insert("attempts", i64::from(attempt));
    fresh.insert("claimedAt", now);
    fresh.insert("leaseUntil", lease_until);
    fresh.insert("updatedAt", now);
    fresh
}

/// The key of each delivery of a batch.
fn keys_of(deliveries: &[(Scope, Delivery)]) -> Vec<ClaimKey> {
    deliveries
        .iter()
        .map(|(scope, d)| ClaimKey {
            scope: scope.clone(),
            event_id: d.event_id,
            device_id: d.device_id,
        })
        .collect()
}

/// The unique key of a delivery's record.
fn key_filter(key: &ClaimKey) -> Document {
    doc! { "eventId": key.event_id.to_string(), "deviceId": key.device_id.to_string() }
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

/// Every delivery of an event, by device: `list_deliveries`, and the read
/// `settle_notification` makes first (within its own call).
pub(super) async fn of_event(
    store: &MongoStore,
    scope: &Scope,
    event_id: Uuid,
) -> StoreResult<Vec<Delivery>> {
    let mut filter = scope_filter(scope);
    filter.insert("eventId", event_id.to_string());
    let docs = find_all(&store.deliveries(), filter, doc! { "deviceId": 1 }, None).await?;
    docs.iter().map(delivery_from_doc).collect()
}

//! Idempotency keys: a claim per (scope, key) made by a unique index,
//! replays of completed requests, and take-overs of claims whose request
//! died (which first look for the outcome the request may have stored in
//! its event, see `events::insert_with_outcome`). Records expire through a
//! TTL index, and are also checked for age here because the TTL monitor
//! runs only once a minute.

use async_trait::async_trait;
use std::time::Duration;

use chrono::{DateTime, Utc};
use mongodb::{
    Collection,
    bson::{self, Bson, Document, doc, spec::BinarySubtype},
};
use uuid::Uuid;

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{corrupt, date, opt_str, scope_filter},
    is_duplicate_key,
};
use crate::store::{
    IdempotencyBegin, IdempotencyStore, IdempotentOutcome, Scope, StoreError, StoreResult,
    StoredResponse,
};

// The trait's arguments, plus the store.
#[async_trait]
impl IdempotencyStore for MongoStore {
    #[allow(clippy::too_many_arguments)]
    async fn begin_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        fingerprint: &str,
        resource: Uuid,
        now: DateTime<Utc>,
        ttl: Duration,
        lock_timeout: Duration,
    ) -> StoreResult<IdempotencyBegin> {
        self.guard
            .call("begin_idempotent", async {
                let mut id = scope_filter(scope);
                id.insert("key", key);
                let expired_before = now - ttl;
                let stale_before = now - lock_timeout;
                let mut fresh = id.clone();
                fresh.insert("fingerprint", fingerprint);
                fresh.insert("status", Bson::Null);
                fresh.insert("createdAt", date(&now));
                fresh.insert("lockedAt", date(&now));
                fresh.insert("resourceId", resource.to_string());
                for _ in 0..MAX_ATTEMPTS {
                    match self.idempotency().insert_one(fresh.clone()).await {
                        Ok(_) => return Ok(IdempotencyBegin::Started { resource }),
                        Err(e) if !is_duplicate_key(&e) => return Err(classify(e)),
                        Err(_) => {}
                    }
                    let Some(existing) = self
                        .idempotency()
                        .find_one(id.clone())
                        .await
                        .map_err(classify)?
                    else {
                        continue; // removed between our insert and read: try again
                    };
                    let created = existing
                        .get_datetime("createdAt")
                        .map_err(|e| corrupt("idempotency", e))?
                        .to_chrono();
                    let locked = existing
                        .get_datetime("lockedAt")
                        .map_err(|e| corrupt("idempotency", e))?
                        .to_chrono();
                    // The TTL monitor runs only once a minute: an expired record is
                    // replaced here rather than trusted.
                    if created < expired_before {
                        let mut guard = id.clone();
                        guard.insert("createdAt", date(&created));
                        let replaced = self
                            .idempotency()
                            .replace_one(guard, fresh.clone())
                            .await
                            .map_err(classify)?;
                        if replaced.matched_count == 1 {
                            return Ok(IdempotencyBegin::Started { resource });
                        }
                        continue;
                    }
                    if existing.get_str("fingerprint").ok() != Some(fingerprint) {
                        return Ok(IdempotencyBegin::Mismatch);
                    }
                    if existing.get_i32("status").is_ok() {
                        return Ok(IdempotencyBegin::Replay(stored_response(&existing)?));
                    }
                    if locked < stale_before {
                        // Taken over: the id reserved by the first try stays, so
                        // what it may have written is found, not doubled.
                        let reserved = existing
                            .get_str("resourceId")
                            .ok()
                            .and_then(|r| Uuid::parse_str(r).ok())
                            .unwrap_or(resource);
                        // The first try stored its event with the outcome in it, and
                        // only the copy here was lost: that outcome is the answer.
                        if let Some(response) = outcome_in_event(self, scope, key, reserved).await?
                        {
                            self.complete_idempotent(scope, key, &response).await?;
                            return Ok(IdempotencyBegin::Replay(response));
                        }
                        let mut guard = id.clone();
                        guard.insert("lockedAt", date(&locked));
                        guard.insert("status", Bson::Null);
                        let taken = self
                            .idempotency()
                            .update_one(
                                guard,
                                doc! { "$set": {
                                    "lockedAt": date(&now),
                                    "resourceId": reserved.to_string(),
                                }},
                            )
                            .await
                            .map_err(classify)?;
                        if taken.matched_count == 1 {
                            return Ok(IdempotencyBegin::Started { resource: reserved });
                        }
                        continue;
                    }
                    return Ok(IdempotencyBegin::InFlight);
                }
                Err(StoreError::unavailable(format!(
                    "idempotency key {key} is contended; try again"
                )))
            })
            .await
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()> {
        self.guard
            .call("complete_idempotent", async {
                complete_in(&self.idempotency(), scope, key, response).await
            })
            .await
    }

    async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        self.guard
            .call("release_idempotent", async {
                self.idempotency()
                    .delete_one(open_claim(scope, key))
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }

    async fn abandon_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        self.guard
            .call("abandon_idempotent", async {
                self.idempotency()
                    .update_one(
                        open_claim(scope, key),
                        doc! { "$set": { "lockedAt": bson::DateTime::from_millis(0) } },
                    )
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }
}

/// The field of an event document that keeps the outcome of the
/// idempotent request that created it.
pub(super) const OUTCOME_FIELD: &str = "idempotency";

pub(super) fn outcome_to_doc(outcome: &IdempotentOutcome) -> bson::Document {
    doc! {
        "key": &outcome.key,
        "status": i32::from(outcome.response.status),
        "contentType": &outcome.response.content_type,
        "body": bson::Binary {
            subtype: BinarySubtype::Generic,
            bytes: outcome.response.body.clone(),
        },
    }
}

/// The outcome kept in the event `id` of `scope`, if a request with `key`
/// created it.
async fn outcome_in_event(
    store: &MongoStore,
    scope: &Scope,
    key: &str,
    id: Uuid,
) -> StoreResult<Option<StoredResponse>> {
    let mut filter = scope_filter(scope);
    filter.insert("_id", id.to_string());
    filter.insert(format!("{OUTCOME_FIELD}.key"), key);
    let Some(event) = store.events().find_one(filter).await.map_err(classify)? else {
        return Ok(None);
    };
    let outcome = event
        .get_document(OUTCOME_FIELD)
        .map_err(|e| corrupt("event", e))?;
    Ok(Some(stored_response(outcome)?))
}

/// A response as kept in a record (`status`, `contentType`, `body`).
fn stored_response(record: &bson::Document) -> StoreResult<StoredResponse> {
    let status = record
        .get_i32("status")
        .map_err(|e| corrupt("idempotency", e))?;
    let body = match record.get("body") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        _ => Vec::new(),
    };
    Ok(StoredResponse {
        status: u16::try_from(status).map_err(|e| corrupt("idempotency", e))?,
        content_type: opt_str(record, "contentType").unwrap_or_default(),
        body,
    })
}

/// [`complete`] on the idempotency collection, for the group-commit
/// writer, which has the collection but not the store.
pub(super) async fn complete_in(
    idempotency: &Collection<Document>,
    scope: &Scope,
    key: &str,
    response: &StoredResponse,
) -> StoreResult<()> {
    let mut id = scope_filter(scope);
    id.insert("key", key);
    idempotency
        .update_one(
            id,
            doc! { "$set": {
                "status": i32::from(response.status),
                "contentType": &response.content_type,
                "body": bson::Binary { subtype: BinarySubtype::Generic, bytes: response.body.clone() },
            }},
        )
        .await
        .map_err(classify)?;
    Ok(())
}

/// The record of a claim on `key` that has no response yet.
fn open_claim(scope: &Scope, key: &str) -> bson::Document {
    let mut id = scope_filter(scope);
    id.insert("key", key);
    id.insert("status", Bson::Null);
    id
}

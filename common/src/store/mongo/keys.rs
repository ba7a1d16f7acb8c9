//! API keys: stored by the hash of their secret, found by it (or by the
//! secret a rotation replaced), listed, revoked, rotated, and when each was
//! last used.

use chrono::{DateTime, Utc};
use mongodb::bson::{Bson, doc};
use uuid::Uuid;

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{date, key_from_doc, key_to_doc},
    find_all,
};
use crate::store::{ApiKey, StoreError, StoreResult};

pub(super) async fn insert(store: &MongoStore, key: &ApiKey) -> StoreResult<()> {
    store
        .keys()
        .insert_one(key_to_doc(key))
        .await
        .map_err(classify)?;
    Ok(())
}

pub(super) async fn find_by_hash(store: &MongoStore, hash: &str) -> StoreResult<Option<ApiKey>> {
    store
        .keys()
        .find_one(doc! { "$or": [{ "hash": hash }, { "previousHash": hash }] })
        .await
        .map_err(classify)?
        .as_ref()
        .map(key_from_doc)
        .transpose()
}

pub(super) async fn list(store: &MongoStore) -> StoreResult<Vec<ApiKey>> {
    let docs = find_all(
        &store.keys(),
        doc! {},
        doc! { "createdAt": 1, "_id": 1 },
        None,
    )
    .await?;
    docs.iter().map(key_from_doc).collect()
}

pub(super) async fn revoke(store: &MongoStore, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
    let result = store
        .keys()
        .update_one(
            doc! { "_id": id.to_string(), "revokedAt": Bson::Null },
            doc! { "$set": { "revokedAt": date(&at) } },
        )
        .await
        .map_err(classify)?;
    Ok(result.modified_count == 1)
}

pub(super) async fn get(store: &MongoStore, id: Uuid) -> StoreResult<Option<ApiKey>> {
    store
        .keys()
        .find_one(doc! { "_id": id.to_string() })
        .await
        .map_err(classify)?
        .as_ref()
        .map(key_from_doc)
        .transpose()
}

/// Moves the current hash to `previousHash` with a conditional update on
/// the hash read (no update pipelines: the test server lacks them), again
/// if a concurrent rotation won.
pub(super) async fn rotate(
    store: &MongoStore,
    id: Uuid,
    hash: &str,
    prefix: &str,
    previous_expires_at: DateTime<Utc>,
) -> StoreResult<bool> {
    for _ in 0..MAX_ATTEMPTS {
        let Some(current) = get(store, id).await? else {
            return Ok(false);
        };
        if !current.is_active() {
            return Ok(false);
        }
        let result = store
            .keys()
            .update_one(
                doc! { "_id": id.to_string(), "revokedAt": Bson::Null, "hash": &current.hash },
                doc! { "$set": {
                    "previousHash": &current.hash,
                    "previousExpiresAt": date(&previous_expires_at),
                    "hash": hash,
                    "prefix": prefix,
                } },
            )
            .await
            .map_err(classify)?;
        if result.matched_count == 1 {
            return Ok(true);
        }
    }
    Err(StoreError::unavailable("key rotation contended; retry"))
}

pub(super) async fn set_last_used(
    store: &MongoStore,
    uses: &[(Uuid, DateTime<Utc>)],
) -> StoreResult<()> {
    for (id, at) in uses {
        store
            .keys()
            .update_one(
                doc! { "_id": id.to_string() },
                doc! { "$set": { "lastUsedAt": date(at) } },
            )
            .await
            .map_err(classify)?;
    }
    Ok(())
}

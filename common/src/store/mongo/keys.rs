//! API keys: stored by the hash of their secret, found by it, listed for the
//! admin CLI, revoked.

use chrono::{DateTime, Utc};
use mongodb::bson::{Bson, doc};
use uuid::Uuid;

use super::{
    MongoStore, classify,
    codec::{date, key_from_doc, key_to_doc},
    find_all,
};
use crate::store::{ApiKey, StoreResult};

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
        .find_one(doc! { "hash": hash })
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

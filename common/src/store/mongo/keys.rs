//! API keys: stored by the hash of their secret, found by it (or by the
//! secret a rotation replaced), listed, revoked, rotated, and when each was
//! last used.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mongodb::bson::{Bson, doc};
use uuid::Uuid;

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{date, key_from_doc, key_to_doc},
    find_all,
};
use crate::store::{ApiKey, KeyStore, StoreError, StoreResult};

#[async_trait]
impl KeyStore for MongoStore {
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        self.guard
            .call("insert_api_key", async {
                self.keys()
                    .insert_one(key_to_doc(key))
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        self.guard
            .call("find_api_key_by_hash", async {
                self.keys()
                    .find_one(doc! { "$or": [{ "hash": hash }, { "previousHash": hash }] })
                    .await
                    .map_err(classify)?
                    .as_ref()
                    .map(key_from_doc)
                    .transpose()
            })
            .await
    }

    async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>> {
        self.guard
            .call("list_api_keys", async {
                let docs = find_all(
                    &self.keys(),
                    doc! {},
                    doc! { "createdAt": 1, "_id": 1 },
                    None,
                )
                .await?;
                docs.iter().map(key_from_doc).collect()
            })
            .await
    }

    async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        self.guard
            .call("revoke_api_key", async {
                let result = self
                    .keys()
                    .update_one(
                        doc! { "_id": id.to_string(), "revokedAt": Bson::Null },
                        doc! { "$set": { "revokedAt": date(&at) } },
                    )
                    .await
                    .map_err(classify)?;
                Ok(result.modified_count == 1)
            })
            .await
    }

    async fn get_api_key(&self, id: Uuid) -> StoreResult<Option<ApiKey>> {
        self.guard
            .call("get_api_key", async {
                self.keys()
                    .find_one(doc! { "_id": id.to_string() })
                    .await
                    .map_err(classify)?
                    .as_ref()
                    .map(key_from_doc)
                    .transpose()
            })
            .await
    }

    /// Moves the current hash to `previousHash` with a conditional update on
    /// the hash read (no update pipelines: the test server lacks them), again
    /// if a concurrent rotation won.
    async fn rotate_api_key(
        &self,
        id: Uuid,
        hash: &str,
        prefix: &str,
        previous_expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.guard
            .call("rotate_api_key", async {
                for _ in 0..MAX_ATTEMPTS {
                    let Some(current) = self.get_api_key(id).await? else {
                        return Ok(false);
                    };
                    if !current.is_active() {
                        return Ok(false);
                    }
                    let result = self
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
            })
            .await
    }

    async fn set_keys_last_used(&self, uses: &[(Uuid, DateTime<Utc>)]) -> StoreResult<()> {
        self.guard
            .call("set_keys_last_used", async {
                for (id, at) in uses {
                    self.keys()
                        .update_one(
                            doc! { "_id": id.to_string() },
                            doc! { "$set": { "lastUsedAt": date(at) } },
                        )
                        .await
                        .map_err(classify)?;
                }
                Ok(())
            })
            .await
    }
}

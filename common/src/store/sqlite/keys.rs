//! API keys: stored by the hash of their secret, found by it (or by the
//! secret a rotation replaced), listed, revoked, rotated, and when each was
//! last used.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{KEY_COLUMNS, key_from_row, scope_names, ts},
};
use crate::store::{ApiKey, KeyStore, StoreResult};

#[async_trait]
impl KeyStore for SqliteStore {
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        let key = key.clone();
        self.run("insert_api_key", move |c| {
            c.execute(
                &format!(
                    "INSERT INTO api_keys ({KEY_COLUMNS}) \
                         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)"
                ),
                params![
                    key.id.to_string(),
                    key.name,
                    key.scope.org,
                    key.scope.project,
                    key.hash,
                    key.prefix,
                    key.rate_limit,
                    ts(&key.created_at),
                    key.revoked_at.as_ref().map(ts),
                    scope_names(&key.scopes)?,
                    key.previous_hash,
                    key.previous_expires_at.as_ref().map(ts),
                    key.last_used_at.as_ref().map(ts),
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        let hash = hash.to_owned();
        self.run("find_api_key_by_hash", move |c| {
            c.prepare_cached(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = ?1 \
                     UNION ALL SELECT {KEY_COLUMNS} FROM api_keys WHERE previous_hash = ?1 LIMIT 1"
            ))?
            .query_row([hash], key_from_row)
            .optional()
        })
        .await
    }

    async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>> {
        self.run("list_api_keys", |c| {
            c.prepare(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id"
            ))?
            .query_map([], key_from_row)?
            .collect()
        })
        .await
    }

    async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        self.run("revoke_api_key", move |c| {
            let n = c.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![id.to_string(), ts(&at)],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn get_api_key(&self, id: Uuid) -> StoreResult<Option<ApiKey>> {
        self.run("get_api_key", move |c| {
            c.prepare_cached(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = ?1"))?
                .query_row([id.to_string()], key_from_row)
                .optional()
        })
        .await
    }

    async fn rotate_api_key(
        &self,
        id: Uuid,
        hash: &str,
        prefix: &str,
        previous_expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let (hash, prefix) = (hash.to_owned(), prefix.to_owned());
        self.run("rotate_api_key", move |c| {
            let n = c.execute(
                "UPDATE api_keys SET previous_hash = hash, previous_expires_at = ?4, \
                     hash = ?2, prefix = ?3 WHERE id = ?1 AND revoked_at IS NULL",
                params![id.to_string(), hash, prefix, ts(&previous_expires_at)],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn set_keys_last_used(&self, uses: &[(Uuid, DateTime<Utc>)]) -> StoreResult<()> {
        let uses: Vec<(String, String)> = uses
            .iter()
            .map(|(id, at)| (id.to_string(), ts(at)))
            .collect();
        self.run("set_keys_last_used", move |c| {
            let tx = c.transaction()?;
            {
                let mut update =
                    tx.prepare_cached("UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1")?;
                for (id, at) in &uses {
                    update.execute(params![id, at])?;
                }
            }
            tx.commit()
        })
        .await
    }
}

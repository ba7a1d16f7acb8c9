//! API keys: stored by the hash of their secret, found by it, listed for the
//! admin CLI, revoked.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{KEY_COLUMNS, key_from_row, scope_names, ts},
};
use crate::store::{ApiKey, StoreResult};

pub(super) async fn insert(store: &SqliteStore, key: &ApiKey) -> StoreResult<()> {
    let key = key.clone();
    store
        .run(move |c| {
            c.execute(
                &format!(
                    "INSERT INTO api_keys ({KEY_COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"
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
                ],
            )?;
            Ok(())
        })
        .await
}

pub(super) async fn find_by_hash(store: &SqliteStore, hash: &str) -> StoreResult<Option<ApiKey>> {
    let hash = hash.to_owned();
    store
        .run(move |c| {
            c.prepare_cached(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = ?1"
            ))?
            .query_row([hash], key_from_row)
            .optional()
        })
        .await
}

pub(super) async fn list(store: &SqliteStore) -> StoreResult<Vec<ApiKey>> {
    store
        .run(|c| {
            c.prepare(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id"
            ))?
            .query_map([], key_from_row)?
            .collect()
        })
        .await
}

pub(super) async fn revoke(store: &SqliteStore, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
    store
        .run(move |c| {
            let n = c.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![id.to_string(), ts(&at)],
            )?;
            Ok(n == 1)
        })
        .await
}

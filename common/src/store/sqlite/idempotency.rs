//! Idempotency keys: a claim per (scope, key) taken inside the group-commit
//! writer's transaction, replays of completed requests, and take-overs of claims
//! whose request died. SQLite has no TTL index, so expired rows are treated
//! as absent and swept now and then.

use async_trait::async_trait;
use std::{sync::atomic::Ordering, time::Duration};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use uuid::Uuid;

use super::{SqliteStore, codec::parse_uuid};
use crate::store::{IdempotencyBegin, IdempotencyStore, Scope, StoreResult, StoredResponse};

/// How often expired idempotency rows are swept.
const SWEEP_EVERY_MS: i64 = 60_000;

// The trait's arguments, plus the store.
#[async_trait]
impl IdempotencyStore for SqliteStore {
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
        let scope = scope.clone();
        let fresh = resource.to_string();
        let key = key.to_owned();
        let fingerprint = fingerprint.to_owned();
        let now_ms = now.timestamp_millis();
        let expired_before = now_ms - ttl.as_millis() as i64;
        let stale_before = now_ms - lock_timeout.as_millis() as i64;
        let sweep = now_ms - self.last_sweep_ms.load(Ordering::Relaxed) > SWEEP_EVERY_MS;
        if sweep {
            self.last_sweep_ms.store(now_ms, Ordering::Relaxed);
        }
        // A claim waits for its commit only: its request answers nothing
        // lasting before the synced write of what it creates, which takes the
        // claim to disk with it. Lost to a power cut before that, a claim
        // leaves nothing to replay, and a 409 or 422 another request drew
        // from it said only that the key was taken.
        self.write_unsynced("begin_idempotent", move |tx| {
                if sweep {
                    tx.prepare_cached("DELETE FROM idempotency WHERE created_at_ms < ?1")?
                        .execute([expired_before])?;
                }
                let existing = tx
                    .prepare_cached(
                        "SELECT fingerprint, status, content_type, body, created_at_ms, locked_at_ms, \
                         resource_id FROM idempotency WHERE org = ?1 AND project = ?2 AND key = ?3",
                    )?
                    .query_row(params![scope.org, scope.project, key], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<u16>>(1)?,
                            r.get::<_, Option<String>>(2)?,
                            r.get::<_, Option<Vec<u8>>>(3)?,
                            r.get::<_, i64>(4)?,
                            r.get::<_, i64>(5)?,
                            r.get::<_, Option<String>>(6)?,
                        ))
                    })
                    .optional()?;
                let outcome = match existing {
                    Some((fp, status, content_type, body, created, locked, reserved))
                        if created >= expired_before =>
                    {
                        if fp != fingerprint {
                            IdempotencyBegin::Mismatch
                        } else if let Some(status) = status {
                            IdempotencyBegin::Replay(StoredResponse {
                                status,
                                content_type: content_type.unwrap_or_default(),
                                body: body.unwrap_or_default(),
                            })
                        } else if locked < stale_before {
                            // Taken over: the id reserved by the first try stays,
                            // so what it may have written is found, not doubled.
                            let resource = reserved.unwrap_or_else(|| fresh.clone());
                            tx.prepare_cached(
                                "UPDATE idempotency SET locked_at_ms = ?4, resource_id = ?5 \
                                 WHERE org = ?1 AND project = ?2 AND key = ?3",
                            )?
                            .execute(params![scope.org, scope.project, key, now_ms, resource])?;
                            IdempotencyBegin::Started {
                                resource: parse_uuid(&resource)?,
                            }
                        } else {
                            IdempotencyBegin::InFlight
                        }
                    }
                    _ => {
                        // Cached, as every statement of the write path: parsing
                        // this one anew took a fifth of the writer's time under
                        // a load of keyed requests.
                        tx.prepare_cached(
                            "INSERT OR REPLACE INTO idempotency \
                             (org, project, key, fingerprint, status, content_type, body, created_at_ms, \
                              locked_at_ms, resource_id) \
                             VALUES (?1,?2,?3,?4,NULL,NULL,NULL,?5,?5,?6)",
                        )?
                        .execute(params![scope.org, scope.project, key, fingerprint, now_ms, fresh])?;
                        IdempotencyBegin::Started { resource }
                    }
                };
                Ok(outcome)
            })
            .await
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()> {
        let scope = scope.clone();
        let key = key.to_owned();
        let response = response.clone();
        self.write("complete_idempotent", move |c| {
            complete_in(c, &scope, &key, &response)
        })
        .await
    }

    async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        on_open_claim(
            self,
            "release_idempotent",
            scope,
            key,
            "DELETE FROM idempotency WHERE org = ?1 AND project = ?2 AND key = ?3 AND status IS NULL",
        )
        .await
    }

    async fn abandon_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        on_open_claim(
            self,
            "abandon_idempotent",
            scope,
            key,
            "UPDATE idempotency SET locked_at_ms = 0 \
             WHERE org = ?1 AND project = ?2 AND key = ?3 AND status IS NULL",
        )
        .await
    }
}

/// Records `response` on the claim of `key`, inside the writer's
/// transaction (alone, or with the event the request created).
pub(super) fn complete_in(
    c: &Connection,
    scope: &Scope,
    key: &str,
    response: &StoredResponse,
) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE idempotency SET status = ?4, content_type = ?5, body = ?6 \
         WHERE org = ?1 AND project = ?2 AND key = ?3",
    )?
    .execute(params![
        scope.org,
        scope.project,
        key,
        response.status,
        response.content_type,
        response.body
    ])?;
    Ok(())
}

/// Runs `sql` on the claim of `key` that has no response yet (`?1`..`?3`
/// are the scope and the key), for the store method `method`.
async fn on_open_claim(
    store: &SqliteStore,
    method: &'static str,
    scope: &Scope,
    key: &str,
    sql: &'static str,
) -> StoreResult<()> {
    let scope = scope.clone();
    let key = key.to_owned();
    store
        .write(method, move |c| {
            c.execute(sql, params![scope.org, scope.project, key])?;
            Ok(())
        })
        .await
}

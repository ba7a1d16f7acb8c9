//! Deliveries: the lease a worker claims before sending an event's push to
//! a device (the rule is `lease::decide`, applied inside one write-locked
//! transaction), and the outcome it records while the claim is still its
//! own. A batch of claims, or of outcomes, shares one transaction: one
//! commit instead of one per push.

use async_trait::async_trait;
use std::sync::LazyLock;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{DELIVERY_COLUMNS, delivery_from_row, delivery_state, from_ms, ms, ts},
};
use crate::store::{
    Delivery, DeliveryClaim, DeliveryStore, Scope, StoreResult,
    lease::{self, ClaimKey, ClaimRequest, Decision, Held},
};

#[async_trait]
impl DeliveryStore for SqliteStore {
    /// Every claim of the batch in one write-locked transaction: one commit
    /// for the lot, and each read-and-write still atomic.
    async fn claim_deliveries(
        &self,
        keys: &[ClaimKey],
        request: &ClaimRequest,
    ) -> StoreResult<Vec<DeliveryClaim>> {
        let keys = keys.to_vec();
        let request = *request;
        self.run("claim_deliveries", move |c| {
            // IMMEDIATE: each read and the write after it are one atomic step.
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let claims = keys
                .iter()
                .map(|key| claim_in(&tx, key, &request))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            tx.commit()?;
            Ok(claims)
        })
        .await
    }

    /// Every outcome of the batch in one transaction (one commit), each
    /// written only if its claim is still the latest.
    async fn finish_deliveries(&self, deliveries: &[(Scope, Delivery)]) -> StoreResult<Vec<bool>> {
        let deliveries = deliveries.to_vec();
        self.run("finish_deliveries", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut finished = Vec::with_capacity(deliveries.len());
            {
                let mut update = tx.prepare_cached(
                    "UPDATE deliveries SET state = ?5, error = ?7, apns_id = ?8, updated_at = ?9, \
                         lease_until_ms = ?10, provider = ?11 \
                         WHERE event_id = ?1 AND device_id = ?2 AND org = ?3 AND project = ?4 \
                         AND state = 'sending' AND attempts = ?6",
                )?;
                for (scope, d) in &deliveries {
                    let n = update.execute(params![
                        d.event_id.to_string(),
                        d.device_id.to_string(),
                        scope.org,
                        scope.project,
                        d.state.as_str(),
                        d.attempts,
                        d.error,
                        d.apns_id,
                        ts(&d.updated_at),
                        d.lease_until.as_ref().map_or(0, ms),
                        d.provider,
                    ])?;
                    finished.push(n == 1);
                }
            }
            tx.commit()?;
            Ok(finished)
        })
        .await
    }

    /// Every record of the batch in one transaction; an existing record
    /// is left alone (`ON CONFLICT DO NOTHING`).
    async fn record_withheld(&self, deliveries: &[(Scope, Delivery)]) -> StoreResult<Vec<bool>> {
        let deliveries = deliveries.to_vec();
        self.run("record_withheld", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut written = Vec::with_capacity(deliveries.len());
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO deliveries (event_id, device_id, org, project, state, reason, \
                     summary_id, attempts, claimed_at_ms, lease_until_ms, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, 0, 0, ?8) \
                     ON CONFLICT (event_id, device_id) DO NOTHING",
                )?;
                for (scope, d) in &deliveries {
                    let n = insert.execute(params![
                        d.event_id.to_string(),
                        d.device_id.to_string(),
                        scope.org,
                        scope.project,
                        d.state.as_str(),
                        d.state.reason(),
                        d.summary_id.map(|id| id.to_string()),
                        ts(&d.updated_at),
                    ])?;
                    written.push(n == 1);
                }
            }
            tx.commit()?;
            Ok(written)
        })
        .await
    }

    async fn list_deliveries(&self, scope: &Scope, event_id: Uuid) -> StoreResult<Vec<Delivery>> {
        let scope = scope.clone();
        self.run("list_deliveries", move |c| list_in(c, &scope, event_id))
            .await
    }
}

/// One claim, inside the caller's transaction.
fn claim_in(
    tx: &rusqlite::Transaction<'_>,
    key: &ClaimKey,
    request: &ClaimRequest,
) -> rusqlite::Result<DeliveryClaim> {
    let (event, device) = (key.event_id.to_string(), key.device_id.to_string());
    let held = tx
        .prepare_cached(
            "SELECT state, attempts, lease_until_ms, reason FROM deliveries \
             WHERE event_id = ?1 AND device_id = ?2",
        )?
        .query_row(params![event, device], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, u32>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()?
        .map(|(state, attempts, until, reason)| {
            Ok::<_, rusqlite::Error>(Held {
                state: delivery_state(&state, reason.as_deref())?,
                attempts,
                lease_until: from_ms(until)?,
            })
        })
        .transpose()?;
    let decision = lease::decide(held, request);
    let now = ts(&request.now);
    match decision {
        Decision::Take {
            attempt,
            lease_until,
            ..
        } => {
            tx.prepare_cached(
                "INSERT INTO deliveries (event_id, device_id, org, project, state, attempts, \
                 claimed_at_ms, lease_until_ms, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, 'sending', ?5, ?6, ?7, ?8) \
                 ON CONFLICT (event_id, device_id) DO UPDATE SET state = 'sending', \
                 attempts = excluded.attempts, claimed_at_ms = excluded.claimed_at_ms, \
                 lease_until_ms = excluded.lease_until_ms, updated_at = excluded.updated_at",
            )?
            .execute(params![
                event,
                device,
                key.scope.org,
                key.scope.project,
                attempt,
                ms(&request.now),
                ms(&lease_until),
                now
            ])?;
        }
        Decision::GiveUp { attempts } => {
            tx.prepare_cached(
                "UPDATE deliveries SET state = 'failed', error = ?3, lease_until_ms = 0, \
                 updated_at = ?4 WHERE event_id = ?1 AND device_id = ?2",
            )?
            .execute(params![event, device, lease::gave_up_reason(attempts), now])?;
        }
        Decision::Answer(_) => {}
    }
    Ok(decision.claim())
}

/// Its text, made once: it runs for every event the notifier settles.
static SELECT_EVENT_DELIVERIES: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {DELIVERY_COLUMNS} FROM deliveries \
         WHERE event_id = ?1 AND org = ?2 AND project = ?3 ORDER BY device_id"
    )
});

/// An event's deliveries, by device, read on `c` (inside a write, too).
pub(super) fn list_in(
    c: &Connection,
    scope: &Scope,
    event_id: Uuid,
) -> rusqlite::Result<Vec<Delivery>> {
    c.prepare_cached(&SELECT_EVENT_DELIVERIES)?
        .query_map(
            params![event_id.to_string(), scope.org, scope.project],
            delivery_from_row,
        )?
        .collect()
}

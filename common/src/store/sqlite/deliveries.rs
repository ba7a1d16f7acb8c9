//! Deliveries: the lease a worker claims before sending an event's push to
//! a device (the rule is `lease::decide`, applied inside one write-locked
//! transaction), and the outcome it records while the claim is still its
//! own.

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{DELIVERY_COLUMNS, delivery_from_row, from_ms, ms, parse_enum, ts},
};
use crate::store::{
    Delivery, DeliveryClaim, DeliveryState, Scope, StoreResult,
    lease::{self, ClaimRequest, Decision, Held},
};

pub(super) async fn claim(
    store: &SqliteStore,
    scope: &Scope,
    event_id: Uuid,
    device_id: Uuid,
    request: &ClaimRequest,
) -> StoreResult<DeliveryClaim> {
    let scope = scope.clone();
    let request = *request;
    store
        .run(move |c| {
            let (event, device) = (event_id.to_string(), device_id.to_string());
            // IMMEDIATE: the read and the write below are one atomic step.
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let held = tx
                .prepare_cached(
                    "SELECT state, attempts, lease_until_ms FROM deliveries \
                     WHERE event_id = ?1 AND device_id = ?2",
                )?
                .query_row(params![event, device], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?, r.get::<_, i64>(2)?))
                })
                .optional()?
                .map(|(state, attempts, until)| {
                    Ok::<_, rusqlite::Error>(Held {
                        state: parse_enum(&state, DeliveryState::parse)?,
                        attempts,
                        lease_until: from_ms(until)?,
                    })
                })
                .transpose()?;
            let decision = lease::decide(held, &request);
            let now = ts(&request.now);
            match decision {
                Decision::Take { attempt, lease_until } => {
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
                        scope.org,
                        scope.project,
                        attempt,
                        ms(&request.now),
                        ms(&lease_until),
                        now
                    ])?;
                }
                Decision::GiveUp { attempts } => {
                    tx.execute(
                        "UPDATE deliveries SET state = 'failed', error = ?3, lease_until_ms = 0, \
                         updated_at = ?4 WHERE event_id = ?1 AND device_id = ?2",
                        params![event, device, lease::gave_up_reason(attempts), now],
                    )?;
                }
                Decision::Answer(_) => {}
            }
            tx.commit()?;
            Ok(decision.claim())
        })
        .await
}

pub(super) async fn finish(
    store: &SqliteStore,
    scope: &Scope,
    delivery: &Delivery,
) -> StoreResult<bool> {
    let scope = scope.clone();
    let d = delivery.clone();
    store
        .run(move |c| {
            let n = c
                .prepare_cached(
                    "UPDATE deliveries SET state = ?5, error = ?7, apns_id = ?8, updated_at = ?9, \
                     lease_until_ms = ?10, provider = ?11 \
                     WHERE event_id = ?1 AND device_id = ?2 AND org = ?3 AND project = ?4 \
                     AND state = 'sending' AND attempts = ?6",
                )?
                .execute(params![
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
            Ok(n == 1)
        })
        .await
}

pub(super) async fn list(
    store: &SqliteStore,
    scope: &Scope,
    event_id: Uuid,
) -> StoreResult<Vec<Delivery>> {
    let scope = scope.clone();
    store
        .run(move |c| {
            c.prepare_cached(&format!(
                "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE event_id = ?1 AND org = ?2 AND project = ?3 ORDER BY device_id"
            ))?
            .query_map(params![event_id.to_string(), scope.org, scope.project], delivery_from_row)?
            .collect()
        })
        .await
}

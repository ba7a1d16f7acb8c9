//! What devices' rules held back: burst windows (one row per device) and
//! summaries (one row per device and window, with the events held for it
//! as a JSON list). Every change is one write-locked transaction, so each
//! read and the write after it are one atomic step.

use async_trait::async_trait;

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{from_ms, ms, parse_enum, parse_json, parse_uuid, to_json},
};
use crate::{
    rules::{Burst, HoldReason},
    store::{Admission, Holding, Purged, Scope, StoreResult, Summary, SummaryState, SummaryStore},
};

const SUMMARY_COLUMNS: &str = "id, org, project, device_id, reason, due_ms, events, state";

fn summary_from_row(r: &Row<'_>) -> rusqlite::Result<Summary> {
    Ok(Summary {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        scope: Scope::new(r.get::<_, String>(1)?, r.get::<_, String>(2)?),
        device_id: parse_uuid(&r.get::<_, String>(3)?)?,
        reason: parse_enum(&r.get::<_, String>(4)?, HoldReason::parse)?,
        due_at: from_ms(r.get(5)?)?,
        events: parse_json(&r.get::<_, String>(6)?)?,
        state: parse_enum(&r.get::<_, String>(7)?, SummaryState::parse)?,
    })
}

fn summary_in(
    tx: &rusqlite::Transaction<'_>,
    scope: &Scope,
    id: Uuid,
) -> rusqlite::Result<Option<Summary>> {
    tx.query_row(
        &format!(
            "SELECT {SUMMARY_COLUMNS} FROM summaries WHERE id = ?1 AND org = ?2 AND project = ?3"
        ),
        params![id.to_string(), scope.org, scope.project],
        summary_from_row,
    )
    .optional()
}

#[async_trait]
impl SummaryStore for SqliteStore {
    async fn admit_alert(
        &self,
        scope: &Scope,
        device_id: Uuid,
        burst: &Burst,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission> {
        let scope = scope.clone();
        let burst = *burst;
        self.run("admit_alert", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let window = tx
                .query_row(
                    "SELECT start_ms, count FROM burst_windows WHERE device_id = ?1",
                    params![device_id.to_string()],
                    |r| Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?)),
                )
                .optional()?;
            let running = window
                .map(|(start, count)| (from_ms(start), count))
                .and_then(|(start, count)| Some((start.ok()?, count)))
                .filter(|(start, _)| now < *start + burst.window());
            let admission = match running {
                Some((start, count)) if count >= burst.max => Admission::Over {
                    window_ends: start + burst.window(),
                },
                Some((_, _)) => {
                    tx.execute(
                        "UPDATE burst_windows SET count = count + 1 WHERE device_id = ?1",
                        params![device_id.to_string()],
                    )?;
                    Admission::Admitted
                }
                None => {
                    tx.execute(
                        "INSERT INTO burst_windows (device_id, org, project, start_ms, count) \
                         VALUES (?1, ?2, ?3, ?4, 1) ON CONFLICT (device_id) DO UPDATE SET \
                         start_ms = excluded.start_ms, count = 1",
                        params![device_id.to_string(), scope.org, scope.project, ms(&now)],
                    )?;
                    Admission::Admitted
                }
            };
            tx.commit()?;
            Ok(admission)
        })
        .await
    }

    async fn hold_alert(
        &self,
        scope: &Scope,
        device_id: Uuid,
        reason: HoldReason,
        due_at: DateTime<Utc>,
        event_id: Uuid,
    ) -> StoreResult<Holding> {
        let scope = scope.clone();
        self.run("hold_alert", move |c| {
            let id = Summary::id_for(&scope, device_id, reason, due_at);
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let holding = match summary_in(&tx, &scope, id)? {
                Some(summary) if summary.events.contains(&event_id) => {
                    Holding::Held { summary_id: id }
                }
                Some(summary) if summary.state != SummaryState::Open => Holding::Closed,
                Some(mut summary) => {
                    summary.events.push(event_id);
                    tx.execute(
                        "UPDATE summaries SET events = ?2 WHERE id = ?1",
                        params![id.to_string(), to_json(&summary.events)?],
                    )?;
                    Holding::Held { summary_id: id }
                }
                None => {
                    tx.execute(
                        &format!(
                            "INSERT INTO summaries ({SUMMARY_COLUMNS}, recheck_ms) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'open', ?6)"
                        ),
                        params![
                            id.to_string(),
                            scope.org,
                            scope.project,
                            device_id.to_string(),
                            reason.as_str(),
                            ms(&due_at),
                            to_json(&[event_id])?,
                        ],
                    )?;
                    Holding::Held { summary_id: id }
                }
            };
            tx.commit()?;
            Ok(holding)
        })
        .await
    }

    async fn summaries_due(
        &self,
        ended_by: DateTime<Utc>,
        due_before: DateTime<Utc>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Summary>> {
        self.run("summaries_due", move |c| {
            c.prepare_cached(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM summaries \
                 WHERE state != 'done' AND recheck_ms <= ?1 AND id > ?2 AND due_ms <= ?4 \
                 ORDER BY id LIMIT ?3"
            ))?
            .query_map(
                params![
                    ms(&due_before),
                    after.map(|id| id.to_string()).unwrap_or_default(),
                    limit,
                    ms(&ended_by),
                ],
                summary_from_row,
            )?
            .collect()
        })
        .await
    }

    async fn set_summary_recheck(
        &self,
        scope: &Scope,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let scope = scope.clone();
        self.run("set_summary_recheck", move |c| {
            c.execute(
                "UPDATE summaries SET recheck_ms = ?4 WHERE id = ?1 AND org = ?2 AND project = ?3",
                params![id.to_string(), scope.org, scope.project, ms(&at)],
            )?;
            Ok(())
        })
        .await
    }

    async fn close_summary(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Summary>> {
        let scope = scope.clone();
        self.run("close_summary", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute(
                "UPDATE summaries SET state = 'closed' \
                 WHERE id = ?1 AND org = ?2 AND project = ?3 AND state = 'open'",
                params![id.to_string(), scope.org, scope.project],
            )?;
            let summary = summary_in(&tx, &scope, id)?;
            tx.commit()?;
            Ok(summary)
        })
        .await
    }

    async fn purge_summaries(
        &self,
        ended_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Purged> {
        self.run("purge_summaries", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let cutoff = ms(&ended_before);
            let ids: Vec<String> = tx
                .prepare_cached(
                    "SELECT id FROM summaries WHERE state = 'done' AND due_ms < ?1 LIMIT ?2",
                )?
                .query_map(params![cutoff, limit], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            let ids = to_json(&ids)?;
            let deliveries = tx.execute(
                "DELETE FROM deliveries WHERE event_id IN (SELECT value FROM json_each(?1))",
                [&ids],
            )?;
            let summaries = tx.execute(
                "DELETE FROM summaries WHERE id IN (SELECT value FROM json_each(?1))",
                [&ids],
            )?;
            // A window is over once it started before the cutoff by more
            // than any window lasts (a day).
            tx.execute(
                "DELETE FROM burst_windows WHERE start_ms < ?1",
                [cutoff - 86_400_000],
            )?;
            tx.commit()?;
            Ok(Purged {
                events: 0,
                deliveries: deliveries as u64,
                summaries: summaries as u64,
            })
        })
        .await
    }

    async fn finish_summary(&self, summary: &Summary, sent: bool) -> StoreResult<()> {
        let summary = summary.clone();
        self.run("finish_summary", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let id = summary.id.to_string();
            tx.execute(
                "UPDATE summaries SET state = 'done' WHERE id = ?1 AND org = ?2 AND project = ?3",
                params![id, summary.scope.org, summary.scope.project],
            )?;
            if sent {
                let mut mark = tx.prepare_cached(
                    "UPDATE deliveries SET summary_id = ?3 \
                     WHERE event_id = ?1 AND device_id = ?2 AND state = 'held'",
                )?;
                let device = summary.device_id.to_string();
                for event in &summary.events {
                    mark.execute(params![event.to_string(), device, id])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }
}

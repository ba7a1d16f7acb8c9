//! Destinations: one row each, listed per scope in id order (ids are
//! time-ordered, so oldest first); changed by read-modify-write inside one
//! transaction.

use std::sync::{Arc, atomic::Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{opt_ts, parse_enum, parse_json, parse_ts, parse_uuid, to_json, ts},
};
use crate::{
    destination::DestinationKind,
    rules::AlertRules,
    store::{Attempt, Destination, DestinationPatch, DestinationStore, Health, Scope, StoreResult},
};

const COLUMNS: &str = "id, org, project, kind, name, enabled, disabled_reason, channels, rules, \
     masked, sealed, failures, last_error, last_error_at, last_delivered_at, created_at, updated_at";

fn from_row(r: &Row<'_>) -> rusqlite::Result<Destination> {
    Ok(Destination {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        scope: Scope::new(r.get::<_, String>(1)?, r.get::<_, String>(2)?),
        kind: parse_enum(&r.get::<_, String>(3)?, DestinationKind::parse)?,
        name: r.get(4)?,
        enabled: r.get(5)?,
        disabled_reason: r.get(6)?,
        rules: AlertRules {
            channels: r
                .get::<_, Option<String>>(7)?
                .map(|c| parse_json(&c))
                .transpose()?,
            ..parse_json(&r.get::<_, String>(8)?)?
        },
        masked: parse_json(&r.get::<_, String>(9)?)?,
        sealed: r.get(10)?,
        health: Health {
            failures: r.get(11)?,
            last_error: r.get(12)?,
            last_error_at: opt_ts(r, 13)?,
            last_delivered_at: opt_ts(r, 14)?,
        },
        created_at: parse_ts(&r.get::<_, String>(15)?)?,
        updated_at: parse_ts(&r.get::<_, String>(16)?)?,
    })
}

/// Writes `d` whole, over the row with its id if there is one.
fn write(c: &rusqlite::Connection, d: &Destination) -> rusqlite::Result<()> {
    c.execute(
        &format!(
            "INSERT OR REPLACE INTO destinations ({COLUMNS}) \
             VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)"
        ),
        params![
            d.id.to_string(),
            d.scope.org,
            d.scope.project,
            d.kind.as_str(),
            d.name,
            d.enabled,
            d.disabled_reason,
            d.rules.channels.as_ref().map(to_json).transpose()?,
            to_json(&d.rules)?,
            to_json(&d.masked)?,
            d.sealed,
            d.health.failures,
            d.health.last_error,
            d.health.last_error_at.as_ref().map(ts),
            d.health.last_delivered_at.as_ref().map(ts),
            ts(&d.created_at),
            ts(&d.updated_at),
        ],
    )?;
    Ok(())
}

fn read(
    c: &rusqlite::Connection,
    scope: &Scope,
    id: Uuid,
) -> rusqlite::Result<Option<Destination>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM destinations WHERE id = ?1 AND org = ?2 AND project = ?3"),
        params![id.to_string(), scope.org, scope.project],
        from_row,
    )
    .optional()
}

impl SqliteStore {
    /// Reads the destination, changes it with `change` (which says whether
    /// it changed anything), and writes it back, in one transaction. A
    /// change counts for the recipients' cache when `recipients_see`: a
    /// health record alone changes nothing about who gets alerts.
    async fn change_destination(
        &self,
        name: &'static str,
        scope: &Scope,
        id: Uuid,
        recipients_see: bool,
        change: impl FnOnce(&mut Destination) -> bool + Send + 'static,
    ) -> StoreResult<Option<Destination>> {
        let scope = scope.clone();
        let changes = Arc::clone(&self.device_changes);
        self.run(name, move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(mut destination) = read(&tx, &scope, id)? else {
                return Ok(None);
            };
            if change(&mut destination) {
                write(&tx, &destination)?;
                tx.commit()?;
                if recipients_see {
                    changes.fetch_add(1, Ordering::Release);
                }
            }
            Ok(Some(destination))
        })
        .await
    }
}

#[async_trait]
impl DestinationStore for SqliteStore {
    async fn create_destination(&self, destination: &Destination) -> StoreResult<()> {
        let destination = destination.clone();
        let changes = Arc::clone(&self.device_changes);
        self.run("create_destination", move |c| {
            write(c, &destination)?;
            changes.fetch_add(1, Ordering::Release);
            Ok(())
        })
        .await
    }

    async fn list_destinations(&self, scope: &Scope) -> StoreResult<Vec<Destination>> {
        let scope = scope.clone();
        self.run("list_destinations", move |c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM destinations WHERE org = ?1 AND project = ?2 ORDER BY id"
            ))?
            .query_map(params![scope.org, scope.project], from_row)?
            .collect()
        })
        .await
    }

    async fn get_destination(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Destination>> {
        let scope = scope.clone();
        self.run("get_destination", move |c| read(c, &scope, id))
            .await
    }

    async fn update_destination(
        &self,
        scope: &Scope,
        id: Uuid,
        patch: &DestinationPatch,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Destination>> {
        let patch = patch.clone();
        self.change_destination("update_destination", scope, id, true, move |d| {
            let changed = patch.apply(d);
            if changed {
                d.updated_at = now;
            }
            changed
        })
        .await
    }

    async fn delete_destination(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
        let scope = scope.clone();
        let changes = Arc::clone(&self.device_changes);
        self.run("delete_destination", move |c| {
            let n = c.execute(
                "DELETE FROM destinations WHERE id = ?1 AND org = ?2 AND project = ?3",
                params![id.to_string(), scope.org, scope.project],
            )?;
            changes.fetch_add(1, Ordering::Release);
            Ok(n == 1)
        })
        .await
    }

    async fn record_attempt(
        &self,
        scope: &Scope,
        id: Uuid,
        attempt: &Attempt,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let gone = matches!(attempt, Attempt::Gone { .. });
        let attempt = attempt.clone();
        let found = self
            .change_destination("record_attempt", scope, id, gone, move |d| {
                d.record(&attempt, at);
                true
            })
            .await?;
        Ok(found.is_some())
    }
}

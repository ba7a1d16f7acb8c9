//! Devices: registered per scope under a unique token or Web Push endpoint
//! (whatever the kind), listed, deleted, and
//! deactivated when a push provider says the token is gone.

use async_trait::async_trait;
use std::sync::{Arc, atomic::Ordering};

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{DEVICE_COLUMNS, device_from_row, target_columns, to_json, ts},
};
use crate::store::{Device, DevicePatch, DeviceRegistration, DeviceStore, Scope, StoreResult};

#[async_trait]
impl DeviceStore for SqliteStore {
    async fn upsert_device(
        &self,
        scope: &Scope,
        registration: &DeviceRegistration,
        now: DateTime<Utc>,
    ) -> StoreResult<(Device, bool)> {
        let scope = scope.clone();
        let reg = registration.clone();
        let changes = Arc::clone(&self.device_changes);
        self.run("upsert_device", move |c| {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let existing = tx
                    .query_row(
                        &format!("SELECT {DEVICE_COLUMNS} FROM devices WHERE org = ?1 AND project = ?2 AND token = ?3"),
                        params![scope.org, scope.project, reg.target.address()],
                        device_from_row,
                    )
                    .optional()?;
                let created = existing.is_none();
                let device = Device {
                    id: existing.as_ref().map_or_else(Uuid::now_v7, |d| d.id),
                    scope: scope.clone(),
                    target: reg.target,
                    name: reg.name,
                    rules: reg.rules,
                    active: true,
                    deactivated_reason: None,
                    created_at: existing.as_ref().map_or(now, |d| d.created_at),
                    updated_at: now,
                };
                write_device(&tx, &device)?;
                tx.commit()?;
                changes.fetch_add(1, Ordering::Release);
                Ok((device, created))
            })
            .await
    }

    async fn list_devices(&self, scope: &Scope) -> StoreResult<Vec<Device>> {
        let scope = scope.clone();
        self.run("list_devices", move |c| {
                c.prepare_cached(&format!(
                    "SELECT {DEVICE_COLUMNS} FROM devices WHERE org = ?1 AND project = ?2 ORDER BY created_at, id"
                ))?
                .query_map(params![scope.org, scope.project], device_from_row)?
                .collect()
            })
            .await
    }

    async fn update_device(
        &self,
        scope: &Scope,
        id: Uuid,
        patch: &DevicePatch,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Device>> {
        let scope = scope.clone();
        let patch = patch.clone();
        let changes = Arc::clone(&self.device_changes);
        self.run("update_device", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(mut device) = tx
                .query_row(
                    &format!(
                        "SELECT {DEVICE_COLUMNS} FROM devices WHERE id = ?1 AND org = ?2 AND project = ?3"
                    ),
                    params![id.to_string(), scope.org, scope.project],
                    device_from_row,
                )
                .optional()?
            else {
                return Ok(None);
            };
            if patch.apply(&mut device) {
                device.updated_at = now;
                write_device(&tx, &device)?;
                tx.commit()?;
                changes.fetch_add(1, Ordering::Release);
            }
            Ok(Some(device))
        })
        .await
    }

    async fn delete_device(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
        let scope = scope.clone();
        let changes = Arc::clone(&self.device_changes);
        self.run("delete_device", move |c| {
            let n = c.execute(
                "DELETE FROM devices WHERE id = ?1 AND org = ?2 AND project = ?3",
                params![id.to_string(), scope.org, scope.project],
            )?;
            changes.fetch_add(1, Ordering::Release);
            Ok(n == 1)
        })
        .await
    }

    async fn deactivate_device(
        &self,
        scope: &Scope,
        id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let scope = scope.clone();
        let reason = reason.to_owned();
        let changes = Arc::clone(&self.device_changes);
        self.run("deactivate_device", move |c| {
            let n = c.execute(
                "UPDATE devices SET active = 0, deactivated_reason = ?4, updated_at = ?5 \
                     WHERE id = ?1 AND org = ?2 AND project = ?3",
                params![id.to_string(), scope.org, scope.project, reason, ts(&now)],
            )?;
            changes.fetch_add(1, Ordering::Release);
            Ok(n == 1)
        })
        .await
    }

    /// Device changes committed through this handle.
    fn device_changes(&self) -> u64 {
        self.device_changes.load(Ordering::Acquire)
    }
}

/// Writes `device` whole, over the record with its id if there is one.
fn write_device(tx: &rusqlite::Transaction<'_>, device: &Device) -> rusqlite::Result<()> {
    let channels = device.rules.channels.as_ref().map(to_json).transpose()?;
    let rules = to_json(&device.rules)?;
    let (environment, kind, p256dh, auth) = target_columns(&device.target);
    tx.execute(
        &format!(
            "INSERT OR REPLACE INTO devices ({DEVICE_COLUMNS}) \
             VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)"
        ),
        params![
            device.id.to_string(),
            device.scope.org,
            device.scope.project,
            device.target.address(),
            environment,
            device.name,
            channels,
            device.active,
            device.deactivated_reason,
            ts(&device.created_at),
            ts(&device.updated_at),
            kind,
            p256dh,
            auth,
            rules,
        ],
    )?;
    Ok(())
}

//! Devices: registered per scope under a unique token or Web Push endpoint
//! (whatever the kind), listed, deleted, and
//! deactivated when a push provider says the token is gone.

use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use mongodb::bson::doc;
use uuid::Uuid;

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{date, device_from_doc, device_to_doc, scope_filter},
    find_all, is_duplicate_key,
};
use crate::store::{Device, DeviceRegistration, Scope, StoreError, StoreResult};

pub(super) async fn upsert(
    store: &MongoStore,
    scope: &Scope,
    registration: &DeviceRegistration,
    now: DateTime<Utc>,
) -> StoreResult<(Device, bool)> {
    let _changing = Changing(store);
    let mut filter = scope_filter(scope);
    filter.insert("token", registration.target.address());
    // Read, then write conditionally (replace the record read, or insert
    // under the unique token); a lost race reads again.
    for _ in 0..MAX_ATTEMPTS {
        let existing = store
            .devices()
            .find_one(filter.clone())
            .await
            .map_err(classify)?
            .as_ref()
            .map(device_from_doc)
            .transpose()?;
        let device = Device {
            id: existing.as_ref().map_or_else(Uuid::now_v7, |d| d.id),
            scope: scope.clone(),
            target: registration.target.clone(),
            name: registration.name.clone(),
            channels: registration.channels.clone(),
            active: true,
            deactivated_reason: None,
            created_at: existing.as_ref().map_or(now, |d| d.created_at),
            updated_at: now,
        };
        let written = match &existing {
            Some(_) => store
                .devices()
                .replace_one(
                    doc! { "_id": device.id.to_string() },
                    device_to_doc(&device),
                )
                .await
                .map(|r| r.matched_count == 1),
            None => store
                .devices()
                .insert_one(device_to_doc(&device))
                .await
                .map(|_| true),
        };
        match written {
            Ok(true) => return Ok((device, existing.is_none())),
            Ok(false) => continue,
            Err(e) if is_duplicate_key(&e) => continue,
            Err(e) => return Err(classify(e)),
        }
    }
    Err(StoreError::unavailable(
        "device registration is contended; try again",
    ))
}

pub(super) async fn list(store: &MongoStore, scope: &Scope) -> StoreResult<Vec<Device>> {
    let docs = find_all(
        &store.devices(),
        scope_filter(scope),
        doc! { "createdAt": 1, "_id": 1 },
        None,
    )
    .await?;
    docs.iter().map(device_from_doc).collect()
}

pub(super) async fn delete(store: &MongoStore, scope: &Scope, id: Uuid) -> StoreResult<bool> {
    let _changing = Changing(store);
    let mut filter = scope_filter(scope);
    filter.insert("_id", id.to_string());
    let result = store.devices().delete_one(filter).await.map_err(classify)?;
    Ok(result.deleted_count == 1)
}

pub(super) async fn deactivate(
    store: &MongoStore,
    scope: &Scope,
    id: Uuid,
    reason: &str,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let _changing = Changing(store);
    let mut filter = scope_filter(scope);
    filter.insert("_id", id.to_string());
    let result = store
        .devices()
        .update_one(
            filter,
            doc! { "$set": { "active": false, "deactivatedReason": reason, "updatedAt": date(&now) } },
        )
        .await
        .map_err(classify)?;
    Ok(result.matched_count == 1)
}

/// Counts a device change when the call that makes it ends, however it
/// ends: answered, failed, or dropped by a caller that stopped waiting
/// (the server may still apply it), so no change goes uncounted.
struct Changing<'a>(&'a MongoStore);

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        self.0.device_changes.fetch_add(1, Ordering::Release);
    }
}

/// Device changes made through this handle.
pub(super) fn changes(store: &MongoStore) -> u64 {
    store.device_changes.load(Ordering::Acquire)
}

//! Devices: registered per scope under a unique token or Web Push endpoint
//! (whatever the kind), listed, deleted, and
//! deactivated when a push provider says the token is gone.

use async_trait::async_trait;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use mongodb::bson::doc;
use uuid::Uuid;

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{date, device_from_doc, device_to_doc, scope_filter},
    find_all, is_duplicate_key,
};
use crate::store::{
    Device, DevicePatch, DeviceRegistration, DeviceStore, Scope, StoreError, StoreResult,
};

#[async_trait]
impl DeviceStore for MongoStore {
    async fn upsert_device(
        &self,
        scope: &Scope,
        registration: &DeviceRegistration,
        now: DateTime<Utc>,
    ) -> StoreResult<(Device, bool)> {
        self.guard
            .call("upsert_device", async {
                let _changing = Changing(self);
                let mut filter = scope_filter(scope);
                filter.insert("token", registration.target.address());
                // Read, then write conditionally (replace the record read, or insert
                // under the unique token); a lost race reads again.
                for _ in 0..MAX_ATTEMPTS {
                    let existing = self
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
                        rules: registration.rules.clone(),
                        active: true,
                        deactivated_reason: None,
                        created_at: existing.as_ref().map_or(now, |d| d.created_at),
                        updated_at: now,
                    };
                    let written = match &existing {
                        Some(_) => self
                            .devices()
                            .replace_one(
                                doc! { "_id": device.id.to_string() },
                                device_to_doc(&device),
                            )
                            .await
                            .map(|r| r.matched_count == 1),
                        None => self
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
            })
            .await
    }

    async fn list_devices(&self, scope: &Scope) -> StoreResult<Vec<Device>> {
        self.guard
            .call("list_devices", async {
                let docs = find_all(
                    &self.devices(),
                    scope_filter(scope),
                    doc! { "createdAt": 1, "_id": 1 },
                    None,
                )
                .await?;
                docs.iter().map(device_from_doc).collect()
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
        self.guard
            .call("update_device", async {
                let _changing = Changing(self);
                let mut filter = scope_filter(scope);
                filter.insert("_id", id.to_string());
                // Read, change, and replace only the version read (its
                // `updatedAt`, which every write moves): a lost race reads
                // again, so two changes to different fields both stay.
                for _ in 0..MAX_ATTEMPTS {
                    let Some(read) = self
                        .devices()
                        .find_one(filter.clone())
                        .await
                        .map_err(classify)?
                    else {
                        return Ok(None);
                    };
                    let mut device = device_from_doc(&read)?;
                    if !patch.apply(&mut device) {
                        return Ok(Some(device));
                    }
                    let mut unchanged = filter.clone();
                    unchanged.insert("updatedAt", date(&device.updated_at));
                    device.updated_at =
                        now.max(device.updated_at + chrono::Duration::milliseconds(1));
                    let replaced = self
                        .devices()
                        .replace_one(unchanged, device_to_doc(&device))
                        .await
                        .map_err(classify)?;
                    if replaced.matched_count == 1 {
                        return Ok(Some(device));
                    }
                }
                Err(StoreError::unavailable(
                    "the device is being changed; try again",
                ))
            })
            .await
    }

    async fn delete_device(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
        self.guard
            .call("delete_device", async {
                let _changing = Changing(self);
                let mut filter = scope_filter(scope);
                filter.insert("_id", id.to_string());
                let result = self.devices().delete_one(filter).await.map_err(classify)?;
                Ok(result.deleted_count == 1)
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
        self.guard.call("deactivate_device", async {
        let _changing = Changing(self);
        let mut filter = scope_filter(scope);
        filter.insert("_id", id.to_string());
        let result = self
            .devices()
            .update_one(
                filter,
                doc! { "$set": { "active": false, "deactivatedReason": reason, "updatedAt": date(&now) } },
            )
            .await
            .map_err(classify)?;
        Ok(result.matched_count == 1)
        }).await
    }

    /// Device changes made through this handle.
    fn device_changes(&self) -> u64 {
        self.device_changes.load(Ordering::Acquire)
    }
}

/// Counts a device (or destination) change when the call that makes it
/// ends, however it ends: answered, failed, or dropped by a caller that
/// stopped waiting (the server may still apply it), so no change goes
/// uncounted.
pub(super) struct Changing<'a>(&'a MongoStore);

impl MongoStore {
    pub(super) fn changing(&self) -> Changing<'_> {
        Changing(self)
    }
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        self.0.device_changes.fetch_add(1, Ordering::Release);
    }
}

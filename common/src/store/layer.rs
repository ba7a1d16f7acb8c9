//! A store decorator: every call of the wrapped store goes through a
//! [`Layer`], which sees the method's name and the call's future. The
//! deadline every store gets is one layer (`super::deadline`); a test can
//! add one that counts the calls it cares about, around the real store.

use std::{future::Future, sync::Arc, time::Duration};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{
    Admin, ApiKey, AuditEntry, Bucket, ChannelStats, Delivery, DeliveryClaim, Device,
    DeviceRegistration, Event, EventFilter, EventPosition, IdempotencyBegin, Identity, Inserted,
    NameTaken, NotificationState, Organization, Project, Purged, Scope, Store, StoreResult,
    StoredResponse, lease::ClaimRequest,
};

/// What a decorator does around each call.
pub trait Layer: Send + Sync + 'static {
    /// Runs `call`, the wrapped store's `method`, and returns its outcome
    /// (or another).
    fn around<'a, T: Send + 'a>(
        &'a self,
        method: &'static str,
        call: impl Future<Output = StoreResult<T>> + Send + 'a,
    ) -> impl Future<Output = StoreResult<T>> + Send + 'a;
}

/// A store whose every call goes through `layer`.
pub struct Layered<L> {
    inner: Arc<dyn Store>,
    layer: L,
}

impl<L: Layer> Layered<L> {
    pub fn new(inner: Arc<dyn Store>, layer: L) -> Self {
        Self { inner, layer }
    }

    pub fn layer(&self) -> &L {
        &self.layer
    }
}

#[async_trait]
impl<L: Layer> Store for Layered<L> {
    async fn ping(&self) -> StoreResult<()> {
        self.layer.around("ping", self.inner.ping()).await
    }

    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        self.layer
            .around("insert_api_key", self.inner.insert_api_key(key))
            .await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        self.layer
            .around(
                "find_api_key_by_hash",
                self.inner.find_api_key_by_hash(hash),
            )
            .await
    }

    async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>> {
        self.layer
            .around("list_api_keys", self.inner.list_api_keys())
            .await
    }

    async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        self.layer
            .around("revoke_api_key", self.inner.revoke_api_key(id, at))
            .await
    }

    async fn insert_event(&self, event: &Event) -> StoreResult<Inserted> {
        self.layer
            .around("insert_event", self.inner.insert_event(event))
            .await
    }

    async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>> {
        self.layer
            .around("get_event", self.inner.get_event(scope, id))
            .await
    }

    async fn count_events(&self, scope: &Scope) -> StoreResult<u64> {
        self.layer
            .around("count_events", self.inner.count_events(scope))
            .await
    }

    async fn list_channels(&self, scope: &Scope) -> StoreResult<Vec<String>> {
        self.layer
            .around("list_channels", self.inner.list_channels(scope))
            .await
    }

    async fn list_events(
        &self,
        scope: &Scope,
        filter: &EventFilter,
        before: Option<EventPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.layer
            .around(
                "list_events",
                self.inner.list_events(scope, filter, before, limit),
            )
            .await
    }

    async fn events_after(
        &self,
        scope: Option<&Scope>,
        channel: Option<&str>,
        after: EventPosition,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.layer
            .around(
                "events_after",
                self.inner.events_after(scope, channel, after, limit),
            )
            .await
    }

    async fn channel_stats(&self, scope: &Scope) -> StoreResult<Vec<ChannelStats>> {
        self.layer
            .around("channel_stats", self.inner.channel_stats(scope))
            .await
    }

    async fn count_events_per_bucket(
        &self,
        scope: &Scope,
        channel: Option<&str>,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        bucket: Bucket,
    ) -> StoreResult<Vec<(DateTime<Utc>, u64)>> {
        self.layer
            .around(
                "count_events_per_bucket",
                self.inner
                    .count_events_per_bucket(scope, channel, since, until, bucket),
            )
            .await
    }

    async fn purge_events(
        &self,
        recorded_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Purged> {
        self.layer
            .around(
                "purge_events",
                self.inner.purge_events(recorded_before, limit),
            )
            .await
    }

    async fn get_identity(&self, scope: &Scope, user_id: &str) -> StoreResult<Option<Identity>> {
        self.layer
            .around("get_identity", self.inner.get_identity(scope, user_id))
            .await
    }

    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity> {
        self.layer
            .around(
                "merge_identity",
                self.inner
                    .merge_identity(scope, user_id, properties, aliases, now),
            )
            .await
    }

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
        self.layer
            .around(
                "begin_idempotent",
                self.inner.begin_idempotent(
                    scope,
                    key,
                    fingerprint,
                    resource,
                    now,
                    ttl,
                    lock_timeout,
                ),
            )
            .await
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()> {
        self.layer
            .around(
                "complete_idempotent",
                self.inner.complete_idempotent(scope, key, response),
            )
            .await
    }

    async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        self.layer
            .around(
                "release_idempotent",
                self.inner.release_idempotent(scope, key),
            )
            .await
    }

    async fn abandon_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        self.layer
            .around(
                "abandon_idempotent",
                self.inner.abandon_idempotent(scope, key),
            )
            .await
    }

    async fn set_notification_state(
        &self,
        scope: &Scope,
        event_id: Uuid,
        from: &[NotificationState],
        to: NotificationState,
        due: Option<DateTime<Utc>>,
    ) -> StoreResult<bool> {
        self.layer
            .around(
                "set_notification_state",
                self.inner
                    .set_notification_state(scope, event_id, from, to, due),
            )
            .await
    }

    async fn events_due(
        &self,
        states: &[NotificationState],
        due_before: DateTime<Utc>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.layer
            .around(
                "events_due",
                self.inner.events_due(states, due_before, after, limit),
            )
            .await
    }

    async fn count_in_notification_state(&self, state: NotificationState) -> StoreResult<u64> {
        self.layer
            .around(
                "count_in_notification_state",
                self.inner.count_in_notification_state(state),
            )
            .await
    }

    async fn upsert_device(
        &self,
        scope: &Scope,
        registration: &DeviceRegistration,
        now: DateTime<Utc>,
    ) -> StoreResult<(Device, bool)> {
        self.layer
            .around(
                "upsert_device",
                self.inner.upsert_device(scope, registration, now),
            )
            .await
    }

    async fn list_devices(&self, scope: &Scope) -> StoreResult<Vec<Device>> {
        self.layer
            .around("list_devices", self.inner.list_devices(scope))
            .await
    }

    async fn delete_device(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
        self.layer
            .around("delete_device", self.inner.delete_device(scope, id))
            .await
    }

    async fn deactivate_device(
        &self,
        scope: &Scope,
        id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.layer
            .around(
                "deactivate_device",
                self.inner.deactivate_device(scope, id, reason, now),
            )
            .await
    }

    async fn claim_delivery(
        &self,
        scope: &Scope,
        event_id: Uuid,
        device_id: Uuid,
        request: &ClaimRequest,
    ) -> StoreResult<DeliveryClaim> {
        self.layer
            .around(
                "claim_delivery",
                self.inner
                    .claim_delivery(scope, event_id, device_id, request),
            )
            .await
    }

    async fn finish_delivery(&self, scope: &Scope, delivery: &Delivery) -> StoreResult<bool> {
        self.layer
            .around(
                "finish_delivery",
                self.inner.finish_delivery(scope, delivery),
            )
            .await
    }

    async fn list_deliveries(&self, scope: &Scope, event_id: Uuid) -> StoreResult<Vec<Delivery>> {
        self.layer
            .around(
                "list_deliveries",
                self.inner.list_deliveries(scope, event_id),
            )
            .await
    }

    async fn get_api_key(&self, id: Uuid) -> StoreResult<Option<ApiKey>> {
        self.layer
            .around("get_api_key", self.inner.get_api_key(id))
            .await
    }

    async fn rotate_api_key(
        &self,
        id: Uuid,
        hash: &str,
        prefix: &str,
        previous_expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.layer
            .around(
                "rotate_api_key",
                self.inner
                    .rotate_api_key(id, hash, prefix, previous_expires_at),
            )
            .await
    }

    async fn set_keys_last_used(&self, uses: &[(Uuid, DateTime<Utc>)]) -> StoreResult<()> {
        self.layer
            .around("set_keys_last_used", self.inner.set_keys_last_used(uses))
            .await
    }

    async fn list_organizations(&self) -> StoreResult<Vec<Organization>> {
        self.layer
            .around("list_organizations", self.inner.list_organizations())
            .await
    }

    async fn insert_organization(
        &self,
        organization: &Organization,
    ) -> StoreResult<Result<(), NameTaken>> {
        self.layer
            .around(
                "insert_organization",
                self.inner.insert_organization(organization),
            )
            .await
    }

    async fn rename_organization(
        &self,
        id: Uuid,
        name: &str,
    ) -> StoreResult<Result<bool, NameTaken>> {
        self.layer
            .around(
                "rename_organization",
                self.inner.rename_organization(id, name),
            )
            .await
    }

    async fn list_projects(&self) -> StoreResult<Vec<Project>> {
        self.layer
            .around("list_projects", self.inner.list_projects())
            .await
    }

    async fn insert_project(&self, project: &Project) -> StoreResult<Result<(), NameTaken>> {
        self.layer
            .around("insert_project", self.inner.insert_project(project))
            .await
    }

    async fn rename_project(&self, id: Uuid, name: &str) -> StoreResult<Result<bool, NameTaken>> {
        self.layer
            .around("rename_project", self.inner.rename_project(id, name))
            .await
    }

    async fn insert_admin(&self, admin: &Admin) -> StoreResult<()> {
        self.layer
            .around("insert_admin", self.inner.insert_admin(admin))
            .await
    }

    async fn find_admin_by_hash(&self, hash: &str) -> StoreResult<Option<Admin>> {
        self.layer
            .around("find_admin_by_hash", self.inner.find_admin_by_hash(hash))
            .await
    }

    async fn list_admins(&self) -> StoreResult<Vec<Admin>> {
        self.layer
            .around("list_admins", self.inner.list_admins())
            .await
    }

    async fn revoke_admin(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        self.layer
            .around("revoke_admin", self.inner.revoke_admin(id, at))
            .await
    }

    async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        self.layer
            .around("insert_audit", self.inner.insert_audit(entry))
            .await
    }

    async fn list_audit(&self, before: Option<Uuid>, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        self.layer
            .around("list_audit", self.inner.list_audit(before, limit))
            .await
    }
}

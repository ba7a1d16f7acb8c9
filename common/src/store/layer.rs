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
    DeviceRegistration, Event, EventFilter, EventPosition, IdempotencyBegin, IdempotentOutcome,
    Identity, Inserted, NameTaken, NotificationState, Organization, Project, Purged, Scope, Store,
    StoreResult, StoredResponse,
    lease::{ClaimKey, ClaimRequest},
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

/// `Store` for `Layered`: every method one call of the wrapped store's,
/// through the layer, named as the method.
macro_rules! delegate {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {
        #[async_trait]
        impl<L: Layer> Store for Layered<L> {
            $(
                async fn $name(&self, $($arg: $ty),*) -> $ret {
                    self.layer
                        .around(stringify!($name), self.inner.$name($($arg),*))
                        .await
                }
            )*

            fn device_changes(&self) -> u64 {
                self.inner.device_changes()
            }
        }
    };
}

delegate! {
    fn ping() -> StoreResult<()>;
    fn insert_api_key(key: &ApiKey) -> StoreResult<()>;
    fn find_api_key_by_hash(hash: &str) -> StoreResult<Option<ApiKey>>;
    fn list_api_keys() -> StoreResult<Vec<ApiKey>>;
    fn revoke_api_key(id: Uuid, at: DateTime<Utc>) -> StoreResult<bool>;
    fn insert_event(event: &Event) -> StoreResult<Inserted>;
    fn insert_event_with_outcome(event: &Event, outcome: &IdempotentOutcome) -> StoreResult<Inserted>;
    fn get_event(scope: &Scope, id: Uuid) -> StoreResult<Option<Event>>;
    fn get_events(keys: &[(Scope, Uuid)]) -> StoreResult<Vec<Option<Event>>>;
    fn count_events(scope: &Scope) -> StoreResult<u64>;
    fn list_channels(scope: &Scope) -> StoreResult<Vec<String>>;
    fn list_events(
        scope: &Scope,
        filter: &EventFilter,
        before: Option<EventPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Event>>;
    fn events_after(
        scope: Option<&Scope>,
        channel: Option<&str>,
        after: EventPosition,
        limit: u32,
    ) -> StoreResult<Vec<Event>>;
    fn channel_stats(scope: &Scope) -> StoreResult<Vec<ChannelStats>>;
    fn count_events_per_bucket(
        scope: &Scope,
        channel: Option<&str>,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        bucket: Bucket,
    ) -> StoreResult<Vec<(DateTime<Utc>, u64)>>;
    fn purge_events(recorded_before: DateTime<Utc>, limit: u32) -> StoreResult<Purged>;
    fn get_identity(scope: &Scope, user_id: &str) -> StoreResult<Option<Identity>>;
    fn merge_identity(
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity>;
    fn begin_idempotent(
        scope: &Scope,
        key: &str,
        fingerprint: &str,
        resource: Uuid,
        now: DateTime<Utc>,
        ttl: Duration,
        lock_timeout: Duration,
    ) -> StoreResult<IdempotencyBegin>;
    fn complete_idempotent(scope: &Scope, key: &str, response: &StoredResponse) -> StoreResult<()>;
    fn release_idempotent(scope: &Scope, key: &str) -> StoreResult<()>;
    fn abandon_idempotent(scope: &Scope, key: &str) -> StoreResult<()>;
    fn set_notification_state(
        scope: &Scope,
        event_id: Uuid,
        from: &[NotificationState],
        to: NotificationState,
        due: Option<DateTime<Utc>>,
    ) -> StoreResult<bool>;
    fn events_due(
        states: &[NotificationState],
        due_before: DateTime<Utc>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Event>>;
    fn count_in_notification_state(state: NotificationState) -> StoreResult<u64>;
    fn upsert_device(
        scope: &Scope,
        registration: &DeviceRegistration,
        now: DateTime<Utc>,
    ) -> StoreResult<(Device, bool)>;
    fn list_devices(scope: &Scope) -> StoreResult<Vec<Device>>;
    fn delete_device(scope: &Scope, id: Uuid) -> StoreResult<bool>;
    fn deactivate_device(
        scope: &Scope,
        id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    fn claim_delivery(
        scope: &Scope,
        event_id: Uuid,
        device_id: Uuid,
        request: &ClaimRequest,
    ) -> StoreResult<DeliveryClaim>;
    fn finish_delivery(scope: &Scope, delivery: &Delivery) -> StoreResult<bool>;
    fn claim_deliveries(keys: &[ClaimKey], request: &ClaimRequest) -> StoreResult<Vec<DeliveryClaim>>;
    fn finish_deliveries(deliveries: &[(Scope, Delivery)]) -> StoreResult<Vec<bool>>;
    fn list_deliveries(scope: &Scope, event_id: Uuid) -> StoreResult<Vec<Delivery>>;
    fn settle_notification(
        scope: &Scope,
        event_id: Uuid,
        eligible: &[Uuid],
    ) -> StoreResult<Option<NotificationState>>;
    fn get_api_key(id: Uuid) -> StoreResult<Option<ApiKey>>;
    fn rotate_api_key(
        id: Uuid,
        hash: &str,
        prefix: &str,
        previous_expires_at: DateTime<Utc>,
    ) -> StoreResult<bool>;
    fn set_keys_last_used(uses: &[(Uuid, DateTime<Utc>)]) -> StoreResult<()>;
    fn list_organizations() -> StoreResult<Vec<Organization>>;
    fn insert_organization(organization: &Organization) -> StoreResult<Result<(), NameTaken>>;
    fn rename_organization(id: Uuid, name: &str) -> StoreResult<Result<bool, NameTaken>>;
    fn list_projects() -> StoreResult<Vec<Project>>;
    fn insert_project(project: &Project) -> StoreResult<Result<(), NameTaken>>;
    fn rename_project(id: Uuid, name: &str) -> StoreResult<Result<bool, NameTaken>>;
    fn insert_admin(admin: &Admin) -> StoreResult<()>;
    fn find_admin_by_hash(hash: &str) -> StoreResult<Option<Admin>>;
    fn list_admins() -> StoreResult<Vec<Admin>>;
    fn revoke_admin(id: Uuid, at: DateTime<Utc>) -> StoreResult<bool>;
    fn insert_audit(entry: &AuditEntry) -> StoreResult<()>;
    fn list_audit(before: Option<Uuid>, limit: u32) -> StoreResult<Vec<AuditEntry>>;
}

//! The table of contents of a store split by aggregate: which module answers
//! each [`Store`](super::Store) method. Both the MongoDB and the SQLite
//! store are laid out the same way (`keys`, `events`, `history`, `identities`,
//! `idempotency`, `devices`, `deliveries`, and a `round_trip` beside the
//! connection), so one table serves both instead of two trait impls that
//! differ only in the type's name. A backend that lacks a function fails to
//! compile, naming it.

/// Implements `Store` for `$store`, every method one call into the module
/// of its aggregate, resolved where the macro is invoked (the store's
/// `mod.rs`). Each function takes the store first, then the method's
/// arguments unchanged.
macro_rules! impl_store_by_aggregate {
    ($store:ty) => {
        // A block of its own, so these imports do not leak into the module.
        const _: () = {
            use std::time::Duration;

            use chrono::{DateTime, Utc};
            use serde_json::{Map, Value};
            use uuid::Uuid;

            use $crate::store::{
                Admin, ApiKey, AuditEntry, Bucket, ChannelStats, Delivery, DeliveryClaim, Device,
                DeviceRegistration, Event, EventFilter, EventPosition, IdempotencyBegin,
                IdempotentOutcome, Identity, Inserted, NameTaken, NotificationState, Organization,
                Project, Purged, Scope, Store, StoreResult, StoredResponse,
                lease::{ClaimKey, ClaimRequest},
            };

            #[async_trait::async_trait]
            impl Store for $store {
                async fn ping(&self) -> StoreResult<()> {
                    round_trip(self).await
                }

                async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
                    keys::insert(self, key).await
                }
                async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
                    keys::find_by_hash(self, hash).await
                }
                async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>> {
                    keys::list(self).await
                }
                async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
                    keys::revoke(self, id, at).await
                }
                async fn get_api_key(&self, id: Uuid) -> StoreResult<Option<ApiKey>> {
                    keys::get(self, id).await
                }
                async fn rotate_api_key(
                    &self,
                    id: Uuid,
                    hash: &str,
                    prefix: &str,
                    previous_expires_at: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    keys::rotate(self, id, hash, prefix, previous_expires_at).await
                }
                async fn set_keys_last_used(
                    &self,
                    uses: &[(Uuid, DateTime<Utc>)],
                ) -> StoreResult<()> {
                    keys::set_last_used(self, uses).await
                }

                async fn list_organizations(&self) -> StoreResult<Vec<Organization>> {
                    tenancy::list_organizations(self).await
                }
                async fn insert_organization(
                    &self,
                    organization: &Organization,
                ) -> StoreResult<Result<(), NameTaken>> {
                    tenancy::insert_organization(self, organization).await
                }
                async fn rename_organization(
                    &self,
                    id: Uuid,
                    name: &str,
                ) -> StoreResult<Result<bool, NameTaken>> {
                    tenancy::rename_organization(self, id, name).await
                }
                async fn list_projects(&self) -> StoreResult<Vec<Project>> {
                    tenancy::list_projects(self).await
                }
                async fn insert_project(
                    &self,
                    project: &Project,
                ) -> StoreResult<Result<(), NameTaken>> {
                    tenancy::insert_project(self, project).await
                }
                async fn rename_project(
                    &self,
                    id: Uuid,
                    name: &str,
                ) -> StoreResult<Result<bool, NameTaken>> {
                    tenancy::rename_project(self, id, name).await
                }

                async fn insert_admin(&self, admin: &Admin) -> StoreResult<()> {
                    admins::insert(self, admin).await
                }
                async fn find_admin_by_hash(&self, hash: &str) -> StoreResult<Option<Admin>> {
                    admins::find_by_hash(self, hash).await
                }
                async fn list_admins(&self) -> StoreResult<Vec<Admin>> {
                    admins::list(self).await
                }
                async fn revoke_admin(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
                    admins::revoke(self, id, at).await
                }
                async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
                    admins::insert_audit(self, entry).await
                }
                async fn list_audit(
                    &self,
                    before: Option<Uuid>,
                    limit: u32,
                ) -> StoreResult<Vec<AuditEntry>> {
                    admins::list_audit(self, before, limit).await
                }

                async fn insert_event(&self, event: &Event) -> StoreResult<Inserted> {
                    events::insert(self, event).await
                }
                async fn insert_event_with_outcome(
                    &self,
                    event: &Event,
                    outcome: &IdempotentOutcome,
                ) -> StoreResult<Inserted> {
                    events::insert_with_outcome(self, event, outcome).await
                }
                async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>> {
                    events::get(self, scope, id).await
                }
                async fn get_events(
                    &self,
                    keys: &[(Scope, Uuid)],
                ) -> StoreResult<Vec<Option<Event>>> {
                    events::get_many(self, keys).await
                }
                async fn count_events(&self, scope: &Scope) -> StoreResult<u64> {
                    events::count(self, scope).await
                }
                async fn list_channels(&self, scope: &Scope) -> StoreResult<Vec<String>> {
                    events::list_channels(self, scope).await
                }
                async fn set_notification_state(
                    &self,
                    scope: &Scope,
                    event_id: Uuid,
                    from: &[NotificationState],
                    to: NotificationState,
                    due: Option<DateTime<Utc>>,
                ) -> StoreResult<bool> {
                    events::set_notification_state(self, scope, event_id, from, to, due).await
                }
                async fn settle_notification(
                    &self,
                    scope: &Scope,
                    event_id: Uuid,
                    eligible: &[Uuid],
                ) -> StoreResult<Option<NotificationState>> {
                    events::settle(self, scope, event_id, eligible).await
                }
                async fn events_due(
                    &self,
                    states: &[NotificationState],
                    due_before: DateTime<Utc>,
                    after: Option<Uuid>,
                    limit: u32,
                ) -> StoreResult<Vec<Event>> {
                    events::due(self, states, due_before, after, limit).await
                }
                async fn count_in_notification_state(
                    &self,
                    state: NotificationState,
                ) -> StoreResult<u64> {
                    events::count_in_notification_state(self, state).await
                }

                async fn list_events(
                    &self,
                    scope: &Scope,
                    filter: &EventFilter,
                    before: Option<EventPosition>,
                    limit: u32,
                ) -> StoreResult<Vec<Event>> {
                    history::list(self, scope, filter, before, limit).await
                }
                async fn events_after(
                    &self,
                    scope: Option<&Scope>,
                    channel: Option<&str>,
                    after: EventPosition,
                    limit: u32,
                ) -> StoreResult<Vec<Event>> {
                    history::after(self, scope, channel, after, limit).await
                }
                async fn channel_stats(&self, scope: &Scope) -> StoreResult<Vec<ChannelStats>> {
                    history::channel_stats(self, scope).await
                }
                async fn count_events_per_bucket(
                    &self,
                    scope: &Scope,
                    channel: Option<&str>,
                    since: DateTime<Utc>,
                    until: DateTime<Utc>,
                    bucket: Bucket,
                ) -> StoreResult<Vec<(DateTime<Utc>, u64)>> {
                    history::count_per_bucket(self, scope, channel, since, until, bucket).await
                }
                async fn purge_events(
                    &self,
                    recorded_before: DateTime<Utc>,
                    limit: u32,
                ) -> StoreResult<Purged> {
                    history::purge(self, recorded_before, limit).await
                }

                async fn get_identity(
                    &self,
                    scope: &Scope,
                    user_id: &str,
                ) -> StoreResult<Option<Identity>> {
                    identities::get(self, scope, user_id).await
                }
                async fn merge_identity(
                    &self,
                    scope: &Scope,
                    user_id: &str,
                    properties: Map<String, Value>,
                    aliases: Vec<String>,
                    now: DateTime<Utc>,
                ) -> StoreResult<Identity> {
                    identities::merge(self, scope, user_id, properties, aliases, now).await
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
                    idempotency::begin(
                        self,
                        scope,
                        key,
                        fingerprint,
                        resource,
                        now,
                        ttl,
                        lock_timeout,
                    )
                    .await
                }
                async fn complete_idempotent(
                    &self,
                    scope: &Scope,
                    key: &str,
                    response: &StoredResponse,
                ) -> StoreResult<()> {
                    idempotency::complete(self, scope, key, response).await
                }
                async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
                    idempotency::release(self, scope, key).await
                }
                async fn abandon_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
                    idempotency::abandon(self, scope, key).await
                }

                async fn upsert_device(
                    &self,
                    scope: &Scope,
                    registration: &DeviceRegistration,
                    now: DateTime<Utc>,
                ) -> StoreResult<(Device, bool)> {
                    devices::upsert(self, scope, registration, now).await
                }
                async fn list_devices(&self, scope: &Scope) -> StoreResult<Vec<Device>> {
                    devices::list(self, scope).await
                }
                async fn delete_device(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
                    devices::delete(self, scope, id).await
                }
                async fn deactivate_device(
                    &self,
                    scope: &Scope,
                    id: Uuid,
                    reason: &str,
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    devices::deactivate(self, scope, id, reason, now).await
                }

                async fn claim_delivery(
                    &self,
                    scope: &Scope,
                    event_id: Uuid,
                    device_id: Uuid,
                    request: &ClaimRequest,
                ) -> StoreResult<DeliveryClaim> {
                    deliveries::claim(self, scope, event_id, device_id, request).await
                }
                async fn finish_delivery(
                    &self,
                    scope: &Scope,
                    delivery: &Delivery,
                ) -> StoreResult<bool> {
                    deliveries::finish(self, scope, delivery).await
                }
                async fn list_deliveries(
                    &self,
                    scope: &Scope,
                    event_id: Uuid,
                ) -> StoreResult<Vec<Delivery>> {
                    deliveries::list(self, scope, event_id).await
                }
                async fn claim_deliveries(
                    &self,
                    keys: &[ClaimKey],
                    request: &ClaimRequest,
                ) -> StoreResult<Vec<DeliveryClaim>> {
                    deliveries::claim_many(self, keys, request).await
                }
                async fn finish_deliveries(
                    &self,
                    deliveries: &[(Scope, Delivery)],
                ) -> StoreResult<Vec<bool>> {
                    deliveries::finish_many(self, deliveries).await
                }
                fn device_changes(&self) -> u64 {
                    devices::changes(self)
                }
            }
        };
    };
}

pub(super) use impl_store_by_aggregate;

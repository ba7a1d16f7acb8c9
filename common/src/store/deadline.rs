//! A store decorator that puts a deadline on every call, so a store that
//! stops answering turns into a prompt `Unavailable` error (503) instead of
//! requests that hang.

use std::{future::Future, sync::Arc, time::Duration};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{
    ApiKey, Bucket, ChannelStats, Delivery, DeliveryClaim, Device, DeviceRegistration, Event,
    EventFilter, EventPosition, IdempotencyBegin, Identity, Inserted, NotificationState, Purged,
    Scope, Store, StoreError, StoreResult, StoredResponse, lease::ClaimRequest,
};

/// Wraps a store; every call fails with [`StoreError::Unavailable`] once
/// `limit` has passed.
pub(super) struct Deadline {
    inner: Arc<dyn Store>,
    limit: Duration,
}

impl Deadline {
    pub(super) fn new(inner: Arc<dyn Store>, limit: Duration) -> Self {
        Self { inner, limit }
    }

    async fn within<T>(&self, call: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        match tokio::time::timeout(self.limit, call).await {
            Ok(result) => result,
            Err(elapsed) => Err(StoreError::Unavailable(
                anyhow::Error::new(elapsed)
                    .context(format!("no answer within {} ms", self.limit.as_millis())),
            )),
        }
    }
}

#[async_trait]
impl Store for Deadline {
    async fn ping(&self) -> StoreResult<()> {
        self.within(self.inner.ping()).await
    }

    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        self.within(self.inner.insert_api_key(key)).await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        self.within(self.inner.find_api_key_by_hash(hash)).await
    }

    async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>> {
        self.within(self.inner.list_api_keys()).await
    }

    async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        self.within(self.inner.revoke_api_key(id, at)).await
    }

    async fn insert_event(&self, event: &Event) -> StoreResult<Inserted> {
        self.within(self.inner.insert_event(event)).await
    }

    async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>> {
        self.within(self.inner.get_event(scope, id)).await
    }

    async fn count_events(&self, scope: &Scope) -> StoreResult<u64> {
        self.within(self.inner.count_events(scope)).await
    }

    async fn list_channels(&self, scope: &Scope) -> StoreResult<Vec<String>> {
        self.within(self.inner.list_channels(scope)).await
    }

    async fn list_events(
        &self,
        scope: &Scope,
        filter: &EventFilter,
        before: Option<EventPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.within(self.inner.list_events(scope, filter, before, limit))
            .await
    }

    async fn events_after(
        &self,
        scope: Option<&Scope>,
        channel: Option<&str>,
        after: EventPosition,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.within(self.inner.events_after(scope, channel, after, limit))
            .await
    }

    async fn channel_stats(&self, scope: &Scope) -> StoreResult<Vec<ChannelStats>> {
        self.within(self.inner.channel_stats(scope)).await
    }

    async fn count_events_per_bucket(
        &self,
        scope: &Scope,
        channel: Option<&str>,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        bucket: Bucket,
    ) -> StoreResult<Vec<(DateTime<Utc>, u64)>> {
        self.within(
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
        self.within(self.inner.purge_events(recorded_before, limit))
            .await
    }

    async fn get_identity(&self, scope: &Scope, user_id: &str) -> StoreResult<Option<Identity>> {
        self.within(self.inner.get_identity(scope, user_id)).await
    }

    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity> {
        self.within(
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
        self.within(self.inner.begin_idempotent(
            scope,
            key,
            fingerprint,
            resource,
            now,
            ttl,
            lock_timeout,
        ))
        .await
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()> {
        self.within(self.inner.complete_idempotent(scope, key, response))
            .await
    }

    async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        self.within(self.inner.release_idempotent(scope, key)).await
    }

    async fn abandon_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        self.within(self.inner.abandon_idempotent(scope, key)).await
    }

    async fn set_notification_state(
        &self,
        scope: &Scope,
        event_id: Uuid,
        from: &[NotificationState],
        to: NotificationState,
        due: Option<DateTime<Utc>>,
    ) -> StoreResult<bool> {
        self.within(
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
        self.within(self.inner.events_due(states, due_before, after, limit))
            .await
    }

    async fn count_in_notification_state(&self, state: NotificationState) -> StoreResult<u64> {
        self.within(self.inner.count_in_notification_state(state))
            .await
    }

    async fn upsert_device(
        &self,
        scope: &Scope,
        registration: &DeviceRegistration,
        now: DateTime<Utc>,
    ) -> StoreResult<(Device, bool)> {
        self.within(self.inner.upsert_device(scope, registration, now))
            .await
    }

    async fn list_devices(&self, scope: &Scope) -> StoreResult<Vec<Device>> {
        self.within(self.inner.list_devices(scope)).await
    }

    async fn delete_device(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
        self.within(self.inner.delete_device(scope, id)).await
    }

    async fn deactivate_device(
        &self,
        scope: &Scope,
        id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.within(self.inner.deactivate_device(scope, id, reason, now))
            .await
    }

    async fn claim_delivery(
        &self,
        scope: &Scope,
        event_id: Uuid,
        device_id: Uuid,
        request: &ClaimRequest,
    ) -> StoreResult<DeliveryClaim> {
        self.within(
            self.inner
                .claim_delivery(scope, event_id, device_id, request),
        )
        .await
    }

    async fn finish_delivery(&self, scope: &Scope, delivery: &Delivery) -> StoreResult<bool> {
        self.within(self.inner.finish_delivery(scope, delivery))
            .await
    }

    async fn list_deliveries(&self, scope: &Scope, event_id: Uuid) -> StoreResult<Vec<Delivery>> {
        self.within(self.inner.list_deliveries(scope, event_id))
            .await
    }
}

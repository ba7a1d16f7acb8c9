//! The storage interface both services code against, its record types, and
//! the two implementations behind it: MongoDB for production and an embedded
//! SQLite file for single-binary use. One contract test suite
//! (`tests/in_process/store_contract.rs`) runs against both.
//!
//! The interface is split by record kind: one trait per kind ([`EventStore`],
//! [`HistoryStore`], [`DeliveryStore`], [`IdempotencyStore`], [`KeyStore`],
//! [`AdminStore`], [`TenancyStore`], [`DeviceStore`], [`IdentityStore`],
//! [`InsightStore`]), and
//! [`Store`], the union of them all, which the services hold as
//! `Arc<dyn Store>`. Each backend implements each kind's trait in the module
//! of that kind (`sqlite/events.rs` implements [`EventStore`] for
//! [`sqlite::SqliteStore`], `mongo/events.rs` for [`mongo::MongoStore`], and
//! so on), so a store method is written once in its trait and once per
//! backend. Callers bring the traits into scope with [`prelude`].
//!
//! Every call goes through the backend's [`guard`]: the deadline that turns a
//! store that stops answering into a prompt [`StoreError::Unavailable`], and
//! an optional [`StoreObserver`] told the name of each method called.

mod admin;
mod api_key;
mod describe;
mod destination;
mod device;
pub mod guard;
pub mod insight;
pub mod lease;
mod model;
pub mod mongo;
mod settle;
pub mod sqlite;
mod summary;
pub mod tenancy;
pub mod user;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

pub use self::admin::{Actor, Admin, AuditEntry, AuditTarget};
pub use self::api_key::{ApiKey, KeyScope};
pub use self::destination::{Attempt, Destination, DestinationPatch, Health};
pub use self::device::{
    Device, DeviceKind, DevicePatch, DeviceRegistration, PushTarget, RulesPatch,
    WebPushSubscription,
};
pub use self::guard::StoreObserver;
pub use self::insight::{Insight, InsightChange, InsightNumber, InsightRefusal, InsightValue};
pub use self::model::{
    ApnsEnvironment, Bucket, ChannelStats, Delivery, DeliveryClaim, DeliveryState, Event,
    EventFilter, EventPosition, IdempotencyBegin, IdempotentOutcome, Identity, Inserted,
    NotificationState, Parser, Priority, Purged, Scope, StoredResponse, web_link,
};
pub use self::settle::settled_state;
pub use self::summary::{Admission, Holding, Summary, SummaryState};
pub use self::tenancy::{NameTaken, Organization, Project};
pub use self::user::{PropertyMatch, UserFilter, UserPosition};

/// Why a store call failed. Callers map `Unavailable` to 503 and everything
/// else to an opaque 500; the cause is kept for the log.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached, did not answer before the deadline,
    /// or is too contended to answer now: worth retrying. The error says
    /// what failed and keeps the driver's error as its source.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] anyhow::Error),
    /// The store answered with an error that is not the caller's fault.
    #[error("store error: {0}")]
    Backend(#[from] anyhow::Error),
}

impl StoreError {
    /// `Unavailable` with no underlying error to keep (contention, a test).
    pub fn unavailable(
        message: impl std::fmt::Display + std::fmt::Debug + Send + Sync + 'static,
    ) -> Self {
        Self::Unavailable(anyhow::Error::msg(message))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Everything ingest and notifier persist: the union of the store's kinds.
/// Every method is scoped: records written with one [`Scope`] are never
/// visible through another.
#[async_trait]
pub trait Store:
    EventStore
    + HistoryStore
    + DeliveryStore
    + IdempotencyStore
    + KeyStore
    + AdminStore
    + TenancyStore
    + DeviceStore
    + DestinationStore
    + IdentityStore
    + InsightStore
    + SummaryStore
    + Send
    + Sync
    + 'static
{
    /// Cheap round trip used by readiness checks.
    async fn ping(&self) -> StoreResult<()>;
    /// Tells `observer` the name of every store method called from now on
    /// (a test counts the calls it cares about). A store has one observer:
    /// false, and nothing changes, when it already has one.
    fn observe(&self, observer: Arc<dyn StoreObserver>) -> bool;
}

/// The store's traits, to bring their methods into scope:
/// `use common::store::prelude::*;`.
pub mod prelude {
    pub use super::{
        AdminStore, DeliveryStore, DestinationStore, DeviceStore, EventStore, HistoryStore,
        IdempotencyStore, IdentityStore, InsightStore, KeyStore, Store, SummaryStore, TenancyStore,
    };
}

/// Events and their notification state (the outbox): recording an event (with
/// its idempotent answer), reading it back by id, and the moves of its
/// notification the relay and the notifier make.
///
/// Each backend implements it in its `events` module.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Stores an event and creates its channel if this is the channel's
    /// first event. An event with this id already stored (a retry of a
    /// request whose first try timed out after writing it) is left as it
    /// is and returned.
    async fn insert_event(&self, event: &Event) -> StoreResult<Inserted>;
    /// Like [`EventStore::insert_event`], and records `outcome` as the answer of
    /// the idempotent request that creates the event (a claim begun with
    /// the event's id as its resource) in the same write: either both are
    /// stored or neither. An event already stored is returned as it is,
    /// and the outcome is then not recorded (its answer is another).
    async fn insert_event_with_outcome(
        &self,
        event: &Event,
        outcome: &IdempotentOutcome,
    ) -> StoreResult<Inserted>;
    /// One event of the scope, if it exists.
    async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>>;
    /// Many events at once, each by its scope and id: for each, in order,
    /// what [`EventStore::get_event`] would answer (one trip to the connection's
    /// thread, or one query).
    async fn get_events(&self, keys: &[(Scope, Uuid)]) -> StoreResult<Vec<Option<Event>>>;
    /// Moves an event's notification to `to` if it is in one of `from`, and
    /// sets when the relay should look at it next (`due`). Returns whether
    /// it moved (a conditional update: a notifier that already finished is
    /// never overwritten by a late "queued").
    async fn set_notification_state(
        &self,
        scope: &Scope,
        event_id: Uuid,
        from: &[NotificationState],
        to: NotificationState,
        due: Option<DateTime<Utc>>,
    ) -> StoreResult<bool>;
    /// Settles an event's notification from its deliveries: reads them
    /// and, once [`settled_state`] finds every one that can still happen
    /// final (`eligible`: the devices that may still get one), moves the
    /// notification there if it is still pending or queued (conditional,
    /// as [`EventStore::set_notification_state`]). Returns that state, or `None`
    /// while a delivery is still open. The embedded store reads and moves
    /// in one write; MongoDB reads, then updates conditionally.
    async fn settle_notification(
        &self,
        scope: &Scope,
        event_id: Uuid,
        eligible: &[Uuid],
    ) -> StoreResult<Option<NotificationState>>;
    /// Events of every scope whose notification is in one of `states` and
    /// due at or before `due_before`, with ids after `after`, in id (so
    /// creation) order: the outbox relay's work list, read page by page.
    /// Only unsettled states have one: a settled state in `states` matches
    /// nothing (the embedded store indexes unsettled events alone).
    async fn events_due(
        &self,
        states: &[NotificationState],
        due_before: DateTime<Utc>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Event>>;
    /// How many events, across every scope, are in `state` (the outbox
    /// backlog is the `pending` count).
    async fn count_in_notification_state(&self, state: NotificationState) -> StoreResult<u64>;
}

/// The read side: listing, following and counting recorded events (served by
/// indexes and roll-ups kept as events are written), and retention.
///
/// Each backend implements it in its `history` module.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// The scope's events that match `filter`, newest first, only those
    /// before `before` (the last one of the previous page), at most `limit`.
    async fn list_events(
        &self,
        scope: &Scope,
        filter: &EventFilter,
        before: Option<EventPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Event>>;
    /// Events recorded after `after`, oldest first, at most `limit`: of one
    /// scope (and channel) to replay a stream, or of every scope to follow
    /// what every replica records.
    async fn events_after(
        &self,
        scope: Option<&Scope>,
        channel: Option<&str>,
        after: EventPosition,
        limit: u32,
    ) -> StoreResult<Vec<Event>>;
    /// The scope's channels with their event counts, most recently active
    /// first (channels without events last, by name).
    async fn channel_stats(&self, scope: &Scope) -> StoreResult<Vec<ChannelStats>>;
    /// How many of the scope's events (of `channel`, if given) were recorded
    /// in each `bucket` from `since` to before `until`: the start of each
    /// bucket that has any, in order.
    async fn count_events_per_bucket(
        &self,
        scope: &Scope,
        channel: Option<&str>,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        bucket: Bucket,
    ) -> StoreResult<Vec<(DateTime<Utc>, u64)>>;
    /// Removes up to `limit` events of every scope recorded before
    /// `recorded_before` whose notification is settled, with their
    /// deliveries, oldest first: one bounded step of retention.
    async fn purge_events(&self, recorded_before: DateTime<Utc>, limit: u32)
    -> StoreResult<Purged>;
}

/// Deliveries: the lease a worker claims before it pushes an event to a device,
/// and the outcome it records while the claim is still its own.
///
/// Each backend implements it in its `deliveries` module.
#[async_trait]
pub trait DeliveryStore: Send + Sync {
    /// Claims the delivery of each event to each device before sending it,
    /// as a lease (the rule of [`lease`], applied atomically per key): for
    /// each key, in order, its claim. One transaction (SQLite), or one bulk
    /// insert and a look at the records that already existed (MongoDB).
    async fn claim_deliveries(
        &self,
        keys: &[lease::ClaimKey],
        request: &lease::ClaimRequest,
    ) -> StoreResult<Vec<DeliveryClaim>>;
    /// Records how each claimed delivery went, if the claim numbered
    /// `delivery.attempts` is still the latest: for each, in order, whether
    /// it was written (false: the lease ran out and another worker took the
    /// delivery over; nothing is written). One transaction or one bulk
    /// write.
    async fn finish_deliveries(&self, deliveries: &[(Scope, Delivery)]) -> StoreResult<Vec<bool>>;
    /// Records deliveries that are not sent (filtered or held by the
    /// device's rules) where the (event, device) has no record yet: for
    /// each, in order, whether it was written (false: a record was there,
    /// and stands; the first decision about a delivery is the one kept).
    /// One transaction, or one bulk insert.
    async fn record_withheld(&self, deliveries: &[(Scope, Delivery)]) -> StoreResult<Vec<bool>>;
    /// Every delivery of an event, by device.
    async fn list_deliveries(&self, scope: &Scope, event_id: Uuid) -> StoreResult<Vec<Delivery>>;
}

/// Idempotency keys: the claim a request makes on its key, and the answer later
/// retries replay.
///
/// Each backend implements it in its `idempotency` module.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims an idempotency key for a request with this fingerprint, or says
    /// why it cannot be claimed. Records older than `ttl` count as absent;
    /// an in-flight claim older than `lock_timeout`, or abandoned, is taken
    /// over, because the process that made it is presumed dead. A new claim
    /// reserves `resource` as the id of what the request creates; a claim
    /// taken over keeps the id reserved first, so a retry can never create
    /// a second resource.
    #[allow(clippy::too_many_arguments)]
    async fn begin_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        fingerprint: &str,
        resource: Uuid,
        now: DateTime<Utc>,
        ttl: Duration,
        lock_timeout: Duration,
    ) -> StoreResult<IdempotencyBegin>;
    /// Records the response of a claimed request so later retries replay it.
    async fn complete_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()>;
    /// Forgets a claim whose request wrote nothing (a validation failure),
    /// so the key can be used again, for another body too.
    async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()>;
    /// Unlocks a claim whose request failed without a known outcome (a
    /// server error, a store timeout: it may have written): the next retry
    /// of the same request takes it over at once and reuses the reserved
    /// resource id; another body with the key is still a mismatch.
    async fn abandon_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()>;
}

/// API keys: stored by the hash of their secret, found by it, listed, revoked,
/// rotated, and when each was last used.
///
/// Each backend implements it in its `keys` module.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores a new API key (only its hash).
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()>;
    /// Finds a key by the hash of its secret, or of the secret its last
    /// rotation replaced (expired or not: [`ApiKey::accepts`] decides),
    /// revoked or not.
    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>>;
    /// One key by id, revoked or not.
    async fn get_api_key(&self, id: Uuid) -> StoreResult<Option<ApiKey>>;
    /// All keys, oldest first.
    async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>>;
    /// Marks a key revoked. Returns false when no active key has that id.
    async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool>;
    /// Gives an active key a new secret (`hash`, `prefix`); the secret it
    /// had keeps working until `previous_expires_at`. Returns false when no
    /// active key has that id.
    async fn rotate_api_key(
        &self,
        id: Uuid,
        hash: &str,
        prefix: &str,
        previous_expires_at: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Records when each key was last used (one batch of what ingest kept
    /// in memory).
    async fn set_keys_last_used(&self, uses: &[(Uuid, DateTime<Utc>)]) -> StoreResult<()>;
}

/// Admin tokens (the credential of the admin API) and the audit log of what
/// admins did.
///
/// Each backend implements it in its `admins` module.
#[async_trait]
pub trait AdminStore: Send + Sync {
    /// Stores a new admin token (only its hash).
    async fn insert_admin(&self, admin: &Admin) -> StoreResult<()>;
    /// Finds an admin by the hash of its token, revoked or not.
    async fn find_admin_by_hash(&self, hash: &str) -> StoreResult<Option<Admin>>;
    /// Every admin, oldest first.
    async fn list_admins(&self) -> StoreResult<Vec<Admin>>;
    /// Marks an admin revoked. Returns false when no active admin has that id.
    async fn revoke_admin(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool>;
    /// Appends an entry to the audit log.
    async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()>;
    /// The audit log newest first, only entries before `before` (the last
    /// of the previous page), at most `limit`.
    async fn list_audit(&self, before: Option<Uuid>, limit: u32) -> StoreResult<Vec<AuditEntry>>;
}

/// Organizations and the projects they own: the tenancy a scope names.
///
/// Each backend implements it in its `tenancy` module.
#[async_trait]
pub trait TenancyStore: Send + Sync {
    /// Every organization, by name.
    async fn list_organizations(&self) -> StoreResult<Vec<Organization>>;
    /// Stores a new organization, unless its name is another's name or slug.
    async fn insert_organization(
        &self,
        organization: &Organization,
    ) -> StoreResult<Result<(), NameTaken>>;
    /// Renames an organization (its slug stays); `Ok(false)` when unknown.
    async fn rename_organization(
        &self,
        id: Uuid,
        name: &str,
    ) -> StoreResult<Result<bool, NameTaken>>;
    /// Every project of every organization, by name.
    async fn list_projects(&self) -> StoreResult<Vec<Project>>;
    /// Stores a new project, unless its name is a sibling's name or slug.
    async fn insert_project(&self, project: &Project) -> StoreResult<Result<(), NameTaken>>;
    /// Renames a project (its slug stays); `Ok(false)` when unknown.
    async fn rename_project(&self, id: Uuid, name: &str) -> StoreResult<Result<bool, NameTaken>>;
}

/// The devices connected to a project, which its alerts are pushed to.
///
/// Each backend implements it in its `devices` module.
#[async_trait]
pub trait DeviceStore: Send + Sync {
    /// Registers a device, or updates (and reactivates) the scope's device
    /// with the same token. Returns it and whether it is new.
    async fn upsert_device(
        &self,
        scope: &Scope,
        registration: &DeviceRegistration,
        now: DateTime<Utc>,
    ) -> StoreResult<(Device, bool)>;
    /// The scope's devices, oldest first.
    async fn list_devices(&self, scope: &Scope) -> StoreResult<Vec<Device>>;
    /// Changes a device's name and rules as `patch` says, and returns it
    /// as it stands afterwards (its `updated_at` moved to `now` when
    /// something changed); `None` when the scope has no such device.
    async fn update_device(
        &self,
        scope: &Scope,
        id: Uuid,
        patch: &DevicePatch,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Device>>;
    /// Removes a device; false when the scope has no such device.
    async fn delete_device(&self, scope: &Scope, id: Uuid) -> StoreResult<bool>;
    /// Marks a device dead (APNs said so); it gets nothing until re-registered.
    async fn deactivate_device(
        &self,
        scope: &Scope,
        id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// How many device changes (registered, updated, deleted, deactivated)
    /// went through this store handle since it was opened. A device list
    /// read while this number stays the same is current as far as this
    /// process goes; changes made by other processes are not counted.
    fn device_changes(&self) -> u64;
}

/// Destinations: a project's recipients outside Tocsin (webhook, Slack,
/// Discord, Telegram, ntfy, email). Every write counts as a device change
/// ([`DeviceStore::device_changes`]): the notifier's cache of a project's
/// recipients holds both lists and is refreshed on either.
///
/// Each backend implements it in its `destinations` module.
#[async_trait]
pub trait DestinationStore: Send + Sync {
    async fn create_destination(&self, destination: &Destination) -> StoreResult<()>;
    /// The scope's destinations, oldest first.
    async fn list_destinations(&self, scope: &Scope) -> StoreResult<Vec<Destination>>;
    async fn get_destination(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Destination>>;
    /// Changes a destination as `patch` says, and returns it as it stands
    /// afterwards (`updated_at` moved to `now` when something changed);
    /// `None` when the scope has no such destination.
    async fn update_destination(
        &self,
        scope: &Scope,
        id: Uuid,
        patch: &DestinationPatch,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Destination>>;
    /// Removes a destination; false when the scope has no such one.
    async fn delete_destination(&self, scope: &Scope, id: Uuid) -> StoreResult<bool>;
    /// Records how an attempt to deliver to it went, in its health (a gone
    /// one is disabled); false when the scope has no such destination.
    async fn record_attempt(
        &self,
        scope: &Scope,
        id: Uuid,
        attempt: &Attempt,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;
}

/// Users: the ones a project's events and identify calls made, with their
/// properties, aliases and counters (the rules are [`user`]'s).
///
/// Each backend implements it in its `identities` module; the counters are
/// written by its event inserts (`events`, `group_commit`).
#[async_trait]
pub trait IdentityStore: Send + Sync {
    /// The user of the scope whose id, or one of whose aliases, is
    /// `user_id`, if an event or an identify call ever named it.
    async fn get_identity(&self, scope: &Scope, user_id: &str) -> StoreResult<Option<Identity>>;
    /// Creates or updates a user (the one `user_id` names, alias or not):
    /// `properties` are merged into the stored ones (new keys overwrite),
    /// `aliases` are added as a set union, and whoever an alias already
    /// named is merged into it. Counts as seen at `now`.
    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity>;
    /// The scope's users that match `filter`, most recently seen first,
    /// only those after `after` (the last one of the previous page), at
    /// most `limit`: read from their stored counters.
    async fn list_users(
        &self,
        scope: &Scope,
        filter: &UserFilter,
        after: Option<UserPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Identity>>;
}

/// Insights: a project's named live values, set whole or incremented, and
/// their changes across every project, which live streams follow. The rules
/// (how many, how large, how an increment adds) are [`insight`]'s.
///
/// Each backend implements it in its `insights` module.
#[async_trait]
pub trait InsightStore: Send + Sync {
    /// The scope's insights in the order they were created (then by title).
    async fn list_insights(&self, scope: &Scope) -> StoreResult<Vec<Insight>>;
    /// Sets an insight's value, and its icon when one is given (otherwise
    /// the stored icon stays), creating it unless the scope has
    /// [`insight::MAX_INSIGHTS`] already. Returns it as stored and whether
    /// it was created.
    async fn set_insight(
        &self,
        scope: &Scope,
        title: &str,
        value: &InsightValue,
        icon: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(Insight, bool), InsightRefusal>>;
    /// Adds `by` to an insight's number ([`InsightNumber::plus`]) in one
    /// atomic step, whoever else increments it at the same time, through
    /// whichever process; creates it holding `by` if it does not exist (as
    /// [`InsightStore::set_insight`] creates). Refused, writing nothing,
    /// when its value is not a number or the sum would be out of range.
    async fn increment_insight(
        &self,
        scope: &Scope,
        title: &str,
        by: InsightNumber,
        icon: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(Insight, bool), InsightRefusal>>;
    /// Deletes an insight; false when the scope has none by that title. The
    /// deletion is kept as a change for [`insight::DELETION_KEPT`].
    async fn delete_insight(
        &self,
        scope: &Scope,
        title: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The insights of every scope changed (set, incremented or deleted) at
    /// or after `since`, as each stands now, oldest change first, at most
    /// `limit` (served by an index on the time of the last change).
    async fn insights_changed(
        &self,
        since: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<InsightChange>>;
}

/// What devices' rules held back: burst windows, and the summaries held
/// alerts go out in (the rule is [`summary`]'s).
///
/// Each backend implements it in its `summaries` module.
#[async_trait]
pub trait SummaryStore: Send + Sync {
    /// Counts an alert to `device_id` against its burst limit: admitted
    /// while fewer than `max` alerts reached it in the window, which opens
    /// with the first alert after the last one closed and lasts
    /// `per_minutes`; past that, [`Admission::Over`] with when the window
    /// ends. Atomic per device.
    async fn admit_alert(
        &self,
        scope: &Scope,
        device_id: Uuid,
        burst: &crate::rules::Burst,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission>;
    /// Holds `event_id` for the summary of `device_id`'s window of
    /// `reason` ending at `due_at`, making the summary if it is the first:
    /// [`Holding::Held`] if the summary is open, or already holds the
    /// event; [`Holding::Closed`] if it is going out without it.
    async fn hold_alert(
        &self,
        scope: &Scope,
        device_id: Uuid,
        reason: crate::rules::HoldReason,
        due_at: DateTime<Utc>,
        event_id: Uuid,
    ) -> StoreResult<Holding>;
    /// Summaries of every scope not yet done whose window ended by
    /// `ended_by` and whose job is due by `due_before` (their job was not
    /// published, or was published before `set_summary_recheck`'s time),
    /// with ids after `after`, in id order: the relay's work list, read
    /// page by page.
    async fn summaries_due(
        &self,
        ended_by: DateTime<Utc>,
        due_before: DateTime<Utc>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Summary>>;
    /// When the relay should publish the summary's job again if it is not
    /// done by then.
    async fn set_summary_recheck(
        &self,
        scope: &Scope,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Closes an open summary (no alert joins it after this) and returns
    /// it as it stands: closed, or already done; `None` if there is none.
    async fn close_summary(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Summary>>;
    /// Marks a summary done; when it was `sent`, with its id on the held
    /// deliveries of its events to its device (the push they went out in).
    async fn finish_summary(&self, summary: &Summary, sent: bool) -> StoreResult<()>;
    /// Removes up to `limit` done summaries whose window ended before
    /// `ended_before`, with their pushes' deliveries, and the burst windows
    /// that ended by then: one bounded step of retention.
    async fn purge_summaries(&self, ended_before: DateTime<Utc>, limit: u32)
    -> StoreResult<Purged>;
}

/// Where the data lives, chosen from configuration.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    Mongo {
        uri: String,
        database: String,
        write_concern: MongoWriteConcern,
    },
    Sqlite {
        path: std::path::PathBuf,
        synchronous: SqliteSync,
    },
}

/// How hard SQLite works to keep a commit through a power loss (its
/// `synchronous` setting, in WAL mode). Either survives any crash of the
/// process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSync {
    /// The WAL is synced at checkpoints only: the database stays
    /// consistent, but a power loss or kernel crash can roll back the last
    /// commits before it. The faster choice.
    Normal,
    /// The WAL is synced at every commit: once a request is answered, its
    /// write survives a power loss too. The default: with group commit it
    /// is one sync per batch, not per request.
    #[default]
    Full,
}

impl SqliteSync {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

/// How many MongoDB servers must have a write, and how durably, before the
/// store takes it as done: the write concern of every write the store
/// makes (events with their idempotency outcome, deliveries, and the rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MongoWriteConcern {
    /// `w: "majority", j: true`: in the journal of a majority of the
    /// replica set, so it survives the primary's loss and a power loss.
    /// The default: an accepted alert is never lost.
    #[default]
    Majority,
    /// `w: 1, j: true`: in the primary's journal. Survives a power loss of
    /// the primary, not its replacement by a secondary that lacked it.
    Journaled,
    /// `w: 1`: acknowledged by the primary, in its memory. The fastest; a
    /// crash of the primary can lose the last writes.
    Acknowledged,
}

impl MongoWriteConcern {
    /// The driver's write concern for this choice.
    pub fn driver(self) -> mongodb::options::WriteConcern {
        use mongodb::options::{Acknowledgment, WriteConcern};
        let (w, journal) = match self {
            Self::Majority => (Acknowledgment::Majority, Some(true)),
            Self::Journaled => (Acknowledgment::Nodes(1), Some(true)),
            Self::Acknowledged => (Acknowledgment::Nodes(1), None),
        };
        let mut concern = WriteConcern::default();
        concern.w = Some(w);
        concern.journal = journal;
        concern
    }
}

/// Opens the configured store and prepares it (indexes, tables); every call
/// of it fails as unavailable once `deadline` has passed.
pub async fn open(config: &StoreConfig, deadline: Duration) -> StoreResult<Arc<dyn Store>> {
    Ok(match config {
        StoreConfig::Mongo {
            uri,
            database,
            write_concern,
        } => Arc::new(mongo::MongoStore::connect(uri, database, *write_concern, deadline).await?),
        StoreConfig::Sqlite { path, synchronous } => {
            Arc::new(sqlite::SqliteStore::open_with(path, *synchronous, deadline).await?)
        }
    })
}

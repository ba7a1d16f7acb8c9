//! The storage interface both services code against, its record types, and
//! the two implementations behind it: MongoDB for production and an embedded
//! SQLite file for single-binary use. One contract test suite
//! (`tests/e2e/store_contract.rs`) runs against both.

mod deadline;
mod model;
pub mod mongo;
pub mod sqlite;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

pub use self::{
    deadline::Deadline,
    model::{ApiKey, Event, IdempotencyBegin, Identity, Scope, StoredResponse},
};

/// Why a store call failed. Callers map `Unavailable` to 503 and everything
/// else to an opaque 500; the cause is kept for the log.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or did not answer before the deadline.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store answered with an error that is not the caller's fault.
    #[error("store error: {0}")]
    Backend(#[from] anyhow::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Everything ingest and notifier persist. Every method is scoped: records
/// written with one [`Scope`] are never visible through another.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Cheap round trip used by readiness checks.
    async fn ping(&self) -> StoreResult<()>;

    /// Stores a new API key (only its hash).
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()>;
    /// Finds a key by the hash of its secret, revoked or not.
    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>>;
    /// All keys, oldest first.
    async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>>;
    /// Marks a key revoked. Returns false when no active key has that id.
    async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool>;

    /// Stores an event and creates its channel if this is the channel's first event.
    async fn insert_event(&self, event: &Event) -> StoreResult<()>;
    /// One event of the scope, if it exists.
    async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>>;
    /// How many events the scope has.
    async fn count_events(&self, scope: &Scope) -> StoreResult<u64>;
    /// Names of the scope's channels, in order of creation.
    async fn list_channels(&self, scope: &Scope) -> StoreResult<Vec<String>>;

    /// Creates or updates an identity: `properties` are merged into the stored
    /// ones (new keys overwrite) and `aliases` are added as a set union.
    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity>;

    /// Claims an idempotency key for a request with this fingerprint, or says
    /// why it cannot be claimed. Records older than `ttl` count as absent;
    /// an in-flight claim older than `lock_timeout` is taken over, because the
    /// process that made it is presumed dead.
    async fn begin_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        fingerprint: &str,
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
    /// Gives up a claim whose request must not be replayed (validation
    /// failures, internal errors), so the key can be used again.
    async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()>;
}

/// Where the data lives, chosen from configuration.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    Mongo { uri: String, database: String },
    Sqlite { path: std::path::PathBuf },
}

/// Opens the configured store, prepares it (indexes, tables), and wraps it so
/// every call has `deadline`.
pub async fn open(config: &StoreConfig, deadline: Duration) -> StoreResult<Arc<dyn Store>> {
    let inner: Arc<dyn Store> = match config {
        StoreConfig::Mongo { uri, database } => {
            Arc::new(mongo::MongoStore::connect(uri, database, deadline).await?)
        }
        StoreConfig::Sqlite { path } => Arc::new(sqlite::SqliteStore::open(path).await?),
    };
    Ok(Arc::new(Deadline::new(inner, deadline)))
}

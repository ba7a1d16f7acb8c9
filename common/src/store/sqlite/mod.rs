//! The embedded store: one SQLite file, driven on its own thread by
//! tokio-rusqlite so no query ever blocks the async runtime. WAL mode and a
//! busy timeout let the admin CLI write keys while the server runs.
//!
//! This module owns opening the file (pragmas, `migrations`), the trips to
//! the connection's thread (`SqliteStore::run`, and the group-commit
//! `write`: every call of the store goes through one of them, and through the
//! store's deadline and observer there, `super::guard`), the sorting of
//! SQLite errors, and `Store` itself (`ping`). `codec` turns records into
//! parameters and rows back. Each record kind implements its trait in its
//! own module:
//!
//! | trait | module |
//! |---|---|
//! | `EventStore` | `events` |
//! | `HistoryStore` | `history` |
//! | `DeliveryStore` | `deliveries` |
//! | `IdempotencyStore` | `idempotency` |
//! | `KeyStore` | `keys` |
//! | `AdminStore` | `admins` |
//! | `TenancyStore` | `tenancy` |
//! | `DeviceStore` | `devices` |
//! | `IdentityStore` | `identities` |
//! | `InsightStore` | `insights` |
//!
//! The writes of the hot write path go through `group_commit`, which commits
//! the writes of concurrent requests together.

mod admins;
mod codec;
mod deliveries;
mod destinations;
mod devices;
mod events;
mod group_commit;
mod history;
mod idempotency;
mod identities;
mod insights;
mod keys;
mod migrations;
mod summaries;
mod tenancy;

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicI64, AtomicU64},
    },
    time::Duration,
};

use async_trait::async_trait;

use super::{SqliteSync, Store, StoreError, StoreObserver, StoreResult, guard::Guard};

/// Prepared statements kept on the connection: more than the store has
/// (about 40, with the listing's variants by filter).
const STATEMENT_CACHE: usize = 128;

pub struct SqliteStore {
    conn: tokio_rusqlite::Connection,
    /// The group-commit writer, on the same connection.
    writer: group_commit::Writer,
    /// When expired idempotency rows were last swept (SQLite has no TTL
    /// index), in Unix milliseconds.
    last_sweep_ms: AtomicI64,
    /// Device changes made through this handle (`DeviceStore::device_changes`),
    /// counted on the connection's thread once committed, so a caller
    /// that stopped waiting does not leave one uncounted.
    device_changes: Arc<AtomicU64>,
    /// The deadline of every trip to the connection, and its observer.
    guard: Guard,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and brings its schema
    /// up to date, with the default durability and no deadline (for tests,
    /// whose clock may be paused, and tools).
    pub async fn open(path: &Path) -> StoreResult<Self> {
        Self::start(path, SqliteSync::default(), None).await
    }

    /// Like [`SqliteStore::open`], syncing as `synchronous` says, and every
    /// call failing as unavailable once `deadline` has passed.
    pub async fn open_with(
        path: &Path,
        synchronous: SqliteSync,
        deadline: Duration,
    ) -> StoreResult<Self> {
        Self::start(path, synchronous, Some(deadline)).await
    }

    async fn start(
        path: &Path,
        synchronous: SqliteSync,
        deadline: Option<Duration>,
    ) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Unavailable(
                    anyhow::Error::new(e).context(format!("cannot create {}", dir.display())),
                )
            })?;
        }
        let conn = tokio_rusqlite::Connection::open(path).await.map_err(|e| {
            StoreError::Unavailable(
                anyhow::Error::new(e).context(format!("cannot open {}", path.display())),
            )
        })?;
        conn.call(move |c| {
            // Room for every statement the store caches (rusqlite keeps 16),
            // so that none is evicted and parsed again while the notifier's
            // and the API's statements take turns.
            c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
            c.busy_timeout(Duration::from_secs(5))?;
            c.pragma_update(None, "journal_mode", "WAL")?;
            c.pragma_update(None, "synchronous", synchronous.as_str())?;
            history::register_functions(c)?;
            migrations::migrate(c)
        })
        .await
        .map_err(classify)?;
        Ok(Self {
            writer: group_commit::Writer::start(conn.clone(), synchronous),
            conn,
            last_sweep_ms: AtomicI64::new(0),
            device_changes: Arc::default(),
            guard: Guard::new(deadline),
        })
    }

    /// Runs `f` on the connection's thread, for the store method `method`
    /// (within the deadline, told to the observer).
    async fn run<R: Send + 'static>(
        &self,
        method: &'static str,
        f: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<R> + Send + 'static,
    ) -> StoreResult<R> {
        let trip = async { self.conn.call(f).await.map_err(classify) };
        self.guard.call(method, trip).await
    }

    /// Runs `f` in the writer's next batch, for the store method `method`:
    /// one transaction with the writes of concurrent calls, answered once it
    /// is committed and synced.
    async fn write<R: Send + 'static>(
        &self,
        method: &'static str,
        f: impl Fn(&rusqlite::Connection) -> rusqlite::Result<R> + Send + 'static,
    ) -> StoreResult<R> {
        let trip = self.writer.write(group_commit::Wait::Sync, f);
        self.guard.call(method, trip).await
    }

    /// Like [`SqliteStore::write`], answered once committed, before any
    /// sync: for a write whose caller answers nothing lasting until a
    /// synced write of its own follows.
    async fn write_unsynced<R: Send + 'static>(
        &self,
        method: &'static str,
        f: impl Fn(&rusqlite::Connection) -> rusqlite::Result<R> + Send + 'static,
    ) -> StoreResult<R> {
        let trip = self.writer.write(group_commit::Wait::Commit, f);
        self.guard.call(method, trip).await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        self.run("ping", |c| c.query_row("SELECT 1", [], |_| Ok(())))
            .await
    }

    fn observe(&self, observer: std::sync::Arc<dyn StoreObserver>) -> bool {
        self.guard.observe(observer)
    }
}

/// Sorts SQLite errors into "busy, try again" and everything else.
fn classify(e: tokio_rusqlite::Error<rusqlite::Error>) -> StoreError {
    match e {
        tokio_rusqlite::Error::Error(e) => classify_sqlite(e),
        other => StoreError::Backend(anyhow::Error::new(other)),
    }
}

/// [`classify`] for an error of the connection itself.
fn classify_sqlite(e: rusqlite::Error) -> StoreError {
    match e {
        e @ rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            StoreError::Unavailable(anyhow::Error::new(e).context("database busy"))
        }
        other => StoreError::Backend(anyhow::Error::new(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_synchronous_setting_reaches_the_connection() {
        let dir = tempfile::tempdir().expect("temp dir");
        for (setting, pragma) in [(SqliteSync::Normal, 1), (SqliteSync::Full, 2)] {
            let store = SqliteStore::open_with(
                &dir.path().join("t.sqlite3"),
                setting,
                Duration::from_secs(30),
            )
            .await
            .expect("opens");
            let level: i64 = store
                .run("test", |c| {
                    c.pragma_query_value(None, "synchronous", |r| r.get(0))
                })
                .await
                .expect("read");
            assert_eq!(level, pragma, "{setting:?}");
        }
    }

    #[tokio::test]
    async fn a_file_that_cannot_be_created_is_unavailable_and_keeps_the_os_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let not_a_dir = dir.path().join("file");
        std::fs::write(&not_a_dir, "").expect("write");
        let Err(error) = SqliteStore::open(&not_a_dir.join("t.sqlite3")).await else {
            panic!("a database under a plain file opened");
        };
        assert!(
            error
                .to_string()
                .starts_with("store unavailable: cannot create"),
            "{error}"
        );
        let StoreError::Unavailable(cause) = &error else {
            panic!("not unavailable: {error:?}");
        };
        assert!(
            cause.downcast_ref::<std::io::Error>().is_some(),
            "{cause:?}"
        );
        assert!(std::error::Error::source(&error).is_some());
    }
}

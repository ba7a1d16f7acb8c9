//! Group commit for the embedded store. The writes of the hot write path
//! (claiming and settling idempotency keys, recording an event with its
//! idempotency outcome, moving its notification state) are queued to one
//! writer per store, which runs every write queued meanwhile in one
//! transaction and commits (and syncs) once for all of them. Each caller is
//! answered only after its batch committed.
//!
//! A write that fails is rolled back alone and its caller gets its own
//! error, while its batch-mates are committed: the batch is run again with
//! each write in a savepoint of its own. Only then: a savepoint per write
//! costs a statement to open it, one to release it and a copy of every
//! page it touches (about a tenth of the server's time under load,
//! measured with `perf`), and writes almost never fail. So the first run
//! takes none, and a write must be safe to run twice (`Fn`, changing
//! nothing outside the connection). When the batch itself cannot begin or
//! commit, nothing of it is stored and every caller gets `Unavailable` (a
//! 503). A write whose caller stopped waiting (its deadline fired) before
//! the batch started is skipped, so the 503 that caller got is the truth.
//! Writes run in the order they were queued, so a claim and the unlock
//! queued behind it never swap, and two claims of one key in one batch see
//! each other.
//!
//! The writer is a task that takes the first write off the queue, then runs
//! on the connection's thread, where it also drains whatever was queued
//! while it waited for that thread.
//!
//! With `synchronous=FULL`, a write may ask to wait for its commit only,
//! not for the sync ([`Wait::Commit`]): claiming an idempotency key, whose
//! request answers nothing lasting until its own synced write, the event.
//! Those writes of a batch run first, in a transaction committed without a
//! sync, and are answered at once; the rest follow in one that is synced,
//! and the sync takes the earlier frames of the WAL to disk with it. The
//! order changes only across the two kinds, and no write of one kind
//! depends on one of the other in the same batch: a claim's request queues
//! its own writes only once the claim is answered, and a retry claims only
//! once the answer of the try before it, written and synced, went out.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};

use super::classify_sqlite;
use crate::store::{SqliteSync, StoreError, StoreResult};

/// The most writes one transaction takes; the rest wait for the next one.
const MAX_BATCH: usize = 512;
/// Writes that may wait in the queue before callers wait to queue theirs.
const QUEUE: usize = 4096;

/// What a write's caller waits for before its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// The commit, synced as the connection's `synchronous` setting says:
    /// with FULL, the write survives a power loss once answered.
    Sync,
    /// The commit only: the write survives a crash of the process once
    /// answered, and a power loss once a later commit is synced.
    Commit,
}

/// A queued write, type-erased so one queue carries them all.
trait Write: Send {
    /// Whether its caller still waits for the answer.
    fn wanted(&self) -> bool;
    /// What its caller waits for.
    fn wait(&self) -> Wait;
    /// Runs the write, keeping its result (a second run replaces the first);
    /// false when it failed.
    fn run(&mut self, c: &Connection) -> bool;
    /// Answers the caller: its own result once the batch committed, or
    /// `batch_failed` when it did not.
    fn answer(self: Box<Self>, batch_failed: Option<&str>);
}

struct Pending<F, R> {
    work: F,
    wait: Wait,
    result: Option<rusqlite::Result<R>>,
    reply: oneshot::Sender<StoreResult<R>>,
}

impl<F, R> Write for Pending<F, R>
where
    F: Fn(&Connection) -> rusqlite::Result<R> + Send,
    R: Send,
{
    fn wanted(&self) -> bool {
        !self.reply.is_closed()
    }

    fn wait(&self) -> Wait {
        self.wait
    }

    fn run(&mut self, c: &Connection) -> bool {
        let result = (self.work)(c);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn answer(self: Box<Self>, batch_failed: Option<&str>) {
        let answer = match (batch_failed, self.result) {
            (None, Some(result)) => result.map_err(classify_sqlite),
            (failed, _) => Err(StoreError::unavailable(format!(
                "the write's batch was not committed: {}",
                failed.unwrap_or("the write never ran")
            ))),
        };
        // The caller may have stopped waiting since; nothing to do then.
        let _ = self.reply.send(answer);
    }
}

/// The handle callers queue their writes with.
#[derive(Clone)]
pub(super) struct Writer {
    queue: mpsc::Sender<Box<dyn Write>>,
    // Read by the tests, to see how writes were batched.
    #[cfg_attr(not(test), allow(dead_code))]
    counts: Arc<Counts>,
}

/// What the writer has done, for tests and logs.
#[derive(Default)]
pub(super) struct Counts {
    /// Transactions committed.
    pub(super) batches: AtomicU64,
    /// Of those, the ones committed without a sync.
    pub(super) unsynced: AtomicU64,
    /// Writes answered from committed transactions.
    pub(super) writes: AtomicU64,
}

impl Writer {
    /// Starts the writer of `conn`, whose `synchronous` setting is
    /// `synchronous`, on the current runtime. It stops once every handle is
    /// dropped and the queue is empty.
    pub(super) fn start(conn: tokio_rusqlite::Connection, synchronous: SqliteSync) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let counts = Arc::new(Counts::default());
        tokio::spawn(run(conn, rx, synchronous, Arc::clone(&counts)));
        Self { queue, counts }
    }

    /// Runs `work` in the next batch and returns its result once that batch
    /// is committed (and synced, as `wait` says). `work` may run twice (its
    /// first run rolled back): it must change nothing but the connection's
    /// data.
    pub(super) async fn write<R, F>(&self, wait: Wait, work: F) -> StoreResult<R>
    where
        F: Fn(&Connection) -> rusqlite::Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            work,
            wait,
            result: None,
            reply,
        };
        self.queue
            .send(Box::new(pending))
            .await
            .map_err(|_| StoreError::unavailable("the store's writer has stopped"))?;
        answer
            .await
            .map_err(|_| StoreError::unavailable("the store's writer has stopped"))?
    }

    #[cfg(test)]
    pub(super) fn counts(&self) -> &Counts {
        &self.counts
    }
}

async fn run(
    conn: tokio_rusqlite::Connection,
    mut rx: mpsc::Receiver<Box<dyn Write>>,
    synchronous: SqliteSync,
    counts: Arc<Counts>,
) {
    while let Some(first) = rx.recv().await {
        let counts = Arc::clone(&counts);
        let ran = conn
            .call(move |c| {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(write) => batch.push(write),
                        Err(_) => break,
                    }
                }
                if synchronous == SqliteSync::Full {
                    let (commit_only, synced) =
                        batch.into_iter().partition(|w| w.wait() == Wait::Commit);
                    unsynced(c, commit_only, &counts)?;
                    commit(c, synced, &counts);
                } else {
                    commit(c, batch, &counts);
                }
                Ok::<_, rusqlite::Error>(rx)
            })
            .await;
        match ran {
            Ok(back) => rx = back,
            Err(e) => {
                // The connection is gone: the queue goes with it, and every
                // caller still waiting is told the writer stopped.
                tracing::error!(error = %e, "the store's writer stopped");
                return;
            }
        }
    }
}

/// Commits `batch` as [`commit`] does but without syncing, on a connection
/// that syncs every commit otherwise: `synchronous` is NORMAL for this one
/// transaction (if it cannot be set, the commit is synced like the rest).
/// Fails only when FULL cannot be put back: the writer stops then, rather
/// than leave every later commit unsynced.
fn unsynced(
    c: &mut Connection,
    batch: Vec<Box<dyn Write>>,
    counts: &Counts,
) -> rusqlite::Result<()> {
    if !batch.iter().any(|w| w.wanted()) {
        return Ok(());
    }
    let unsynced = run_cached(c, "PRAGMA synchronous = NORMAL").is_ok();
    if commit(c, batch, counts) && unsynced {
        counts.unsynced.fetch_add(1, Ordering::Relaxed);
    }
    run_cached(c, "PRAGMA synchronous = FULL")
}

/// Runs the writes still wanted in one transaction and answers each.
/// Returns whether a transaction was committed.
fn commit(c: &mut Connection, batch: Vec<Box<dyn Write>>, counts: &Counts) -> bool {
    let mut batch: Vec<_> = batch.into_iter().filter(|w| w.wanted()).collect();
    if batch.is_empty() {
        return false;
    }
    let outcome = run_all(c, &mut batch);
    let failed = outcome.as_ref().err().map(|e| e.to_string());
    if failed.is_none() {
        counts.batches.fetch_add(1, Ordering::Relaxed);
        counts
            .writes
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
    } else {
        tracing::warn!(writes = batch.len(), error = ?failed, "a batch of writes was not committed");
    }
    let committed = failed.is_none();
    for write in batch {
        write.answer(failed.as_deref());
    }
    committed
}

fn run_all(c: &mut Connection, batch: &mut [Box<dyn Write>]) -> rusqlite::Result<()> {
    run_cached(c, "BEGIN IMMEDIATE")?;
    if batch.iter_mut().all(|write| write.run(c)) {
        match run_cached(c, "COMMIT") {
            Ok(()) => return Ok(()),
            Err(e) => {
                rollback(c);
                return Err(e);
            }
        }
    }
    // A write failed: nothing of this run is kept, and the batch runs
    // again, each write alone.
    rollback(c);
    isolated(c, batch)
}

/// Runs one of the statements every batch runs (BEGIN, COMMIT, the
/// `synchronous` switch) from the connection's statement cache: parsed anew
/// each time, as `execute_batch` and rusqlite's `Transaction` do, they took
/// a sixth of the writer's time under a load of keyed requests (two
/// transactions a batch).
fn run_cached(c: &Connection, sql: &str) -> rusqlite::Result<()> {
    c.prepare_cached(sql)?.execute([]).map(drop)
}

/// Ends the open transaction, keeping nothing of it. A failed COMMIT may
/// have rolled it back already (SQLite then has none open), so a ROLLBACK
/// that finds none is no error.
fn rollback(c: &Connection) {
    if !c.is_autocommit()
        && let Err(e) = run_cached(c, "ROLLBACK")
    {
        tracing::warn!(error = %e, "could not roll back a batch of writes");
    }
}

/// Runs the batch with each write in a savepoint of its own, so that a
/// write that fails is rolled back alone.
fn isolated(c: &mut Connection, batch: &mut [Box<dyn Write>]) -> rusqlite::Result<()> {
    let mut tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for write in batch.iter_mut() {
        let savepoint = tx.savepoint()?;
        if write.run(&savepoint) {
            savepoint.commit()?;
        }
        // A failed write's savepoint rolls back as it is dropped.
    }
    tx.commit()
}

#[cfg(test)]
pub(super) mod tests {
    // The group-commit writer's tests: batches, a failed write among
    // batch-mates, a batch that cannot begin or commit, one key claimed twice
    // in one batch, and writes whose callers gave up.

    use std::{sync::Arc, time::Duration};

    use super::*;
    use crate::store::{
        Event, IdempotencyBegin, Inserted, NotificationState, Scope, SqliteSync, prelude::*,
        sqlite::SqliteStore,
    };

    async fn open() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(&dir.path().join("t.sqlite3"))
            .await
            .expect("opens");
        (dir, Arc::new(store))
    }

    /// How many events `scope` holds, counted in the table.
    async fn stored(store: &SqliteStore, scope: &Scope) -> u64 {
        let (org, project) = (scope.org.clone(), scope.project.clone());
        store
            .run("test", move |c| {
                c.query_row(
                    "SELECT COUNT(*) FROM events WHERE org = ?1 AND project = ?2",
                    [org, project],
                    |r| r.get::<_, i64>(0),
                )
            })
            .await
            .expect("counted") as u64
    }

    /// The names of `scope`'s channels, as stored, by name.
    async fn channels(store: &SqliteStore, scope: &Scope) -> Vec<String> {
        let (org, project) = (scope.org.clone(), scope.project.clone());
        store
            .run("test", move |c| {
                c.prepare(
                    "SELECT name FROM channels WHERE org = ?1 AND project = ?2 ORDER BY name",
                )?
                .query_map([org, project], |r| r.get(0))?
                .collect()
            })
            .await
            .expect("listed")
    }

    /// A `notify: false` event on `channel` (the events tests use it too).
    pub(in crate::store::sqlite) fn event(channel: &str) -> Event {
        Event {
            id: uuid::Uuid::now_v7(),
            scope: Scope::new("acme", "batch"),
            channel_name: channel.into(),
            title: "t".into(),
            description: None,
            icon: None,
            tags: vec![],
            metadata: serde_json::Map::new(),
            user_id: None,
            notify: false,
            source: None,
            created_at: crate::time::now(),
            notification: NotificationState::Skipped,
            request_id: None,
            notification_due_at: None,
            priority: Default::default(),
            alert_key: None,
            parser: crate::store::Parser::Text,
            url: None,
        }
    }

    /// Keeps the connection's thread busy until released, so the writes
    /// queued meanwhile all go into the writer's next batch.
    struct Held(std::sync::mpsc::Sender<()>);

    impl Held {
        /// `busy_timeout` is set on the connection while it is held.
        async fn hold(store: &SqliteStore, busy_timeout: Duration) -> Self {
            let (release, released) = std::sync::mpsc::channel::<()>();
            let (started, running) = oneshot::channel();
            let conn = store.conn.clone();
            tokio::spawn(async move {
                conn.call(move |c| {
                    c.busy_timeout(busy_timeout)?;
                    let _ = started.send(());
                    let _ = released.recv();
                    Ok::<_, rusqlite::Error>(())
                })
                .await
                .expect("held");
            });
            running.await.expect("the connection is held");
            Self(release)
        }

        fn release(self) {
            self.0.send(()).expect("released");
        }
    }

    /// Waits until `n` writes wait in the queue (the writer has taken the
    /// first one and waits for the connection).
    async fn queued(store: &SqliteStore, n: usize) {
        let queue = &store.writer.queue;
        for _ in 0..1000 {
            if queue.max_capacity() - queue.capacity() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{n} writes never queued");
    }

    fn counts(store: &SqliteStore) -> (u64, u64) {
        let counts = store.writer.counts();
        (
            counts.batches.load(Ordering::Relaxed),
            counts.writes.load(Ordering::Relaxed),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_share_one_transaction_and_a_failed_write_fails_alone() {
        let (_dir, store) = open().await;
        store
            .run("test", |c| {
                c.execute_batch(
                    "CREATE TRIGGER explode BEFORE INSERT ON events \
                     WHEN NEW.channel_name = 'explode' \
                     BEGIN SELECT RAISE(ABORT, 'this channel explodes'); END",
                )
            })
            .await
            .expect("trigger");
        let held = Held::hold(&store, Duration::from_secs(5)).await;
        let events: Vec<Event> = (0..20)
            .map(|i| event(if i == 7 { "explode" } else { "fine" }))
            .collect();
        let tasks: Vec<_> = events
            .iter()
            .cloned()
            .map(|e| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.insert_event(&e).await })
            })
            .collect();
        queued(&store, 19).await;
        held.release();
        for (i, task) in tasks.into_iter().enumerate() {
            let result = task.await.expect("task");
            if i == 7 {
                let Err(StoreError::Backend(e)) = result else {
                    panic!("the exploding write was not failed: {result:?}");
                };
                assert!(format!("{e:#}").contains("explodes"), "{e:#}");
            } else {
                assert_eq!(result.expect("stored"), Inserted::New);
            }
        }
        assert_eq!(counts(&store), (1, 20), "one transaction for the twenty");
        let scope = Scope::new("acme", "batch");
        assert_eq!(stored(&store, &scope).await, 19);
        assert_eq!(
            store.get_event(&scope, events[7].id).await.expect("get"),
            None
        );
        assert_eq!(
            channels(&store, &scope).await,
            vec!["fine".to_owned()],
            "nothing of the failed write is kept"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_that_cannot_commit_fails_every_write_as_unavailable_and_stores_nothing() {
        let (dir, store) = open().await;
        let held = Held::hold(&store, Duration::from_millis(50)).await;
        // Another connection holds the write lock: the batch cannot begin.
        let other = rusqlite::Connection::open(dir.path().join("t.sqlite3")).expect("opens");
        other.execute_batch("BEGIN IMMEDIATE").expect("locked");
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.insert_event(&event("c")).await })
            })
            .collect();
        queued(&store, 4).await;
        held.release();
        for task in tasks {
            let result = task.await.expect("task");
            assert!(
                matches!(result, Err(StoreError::Unavailable(_))),
                "{result:?}"
            );
        }
        other.execute_batch("ROLLBACK").expect("unlocked");
        let scope = Scope::new("acme", "batch");
        assert_eq!(stored(&store, &scope).await, 0);
        assert_eq!(counts(&store), (0, 0));
        // The writer carries on with the next batch.
        store.insert_event(&event("c")).await.expect("stored");
        assert_eq!(stored(&store, &scope).await, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_whose_commit_fails_stores_nothing_and_the_writer_carries_on() {
        let (_dir, store) = open().await;
        // A deferred foreign key is checked at COMMIT, which then fails and
        // leaves the transaction open: the writer must end it itself.
        store
            .run("test", |c| {
                c.execute_batch(
                    "PRAGMA foreign_keys = ON; \
                     CREATE TABLE parent (id INTEGER PRIMARY KEY); \
                     CREATE TABLE child (parent INTEGER REFERENCES parent (id) \
                         DEFERRABLE INITIALLY DEFERRED);",
                )
            })
            .await
            .expect("tables");
        let held = Held::hold(&store, Duration::from_secs(5)).await;
        let orphan = {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .write("test", |c| c.execute("INSERT INTO child VALUES (42)", []))
                    .await
            })
        };
        let mate = {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.insert_event(&event("c")).await })
        };
        queued(&store, 1).await;
        held.release();
        let orphan = orphan.await.expect("task");
        assert!(
            matches!(orphan, Err(StoreError::Unavailable(_))),
            "{orphan:?}"
        );
        let mate = mate.await.expect("task");
        assert!(matches!(mate, Err(StoreError::Unavailable(_))), "{mate:?}");
        let scope = Scope::new("acme", "batch");
        assert_eq!(stored(&store, &scope).await, 0);
        let open = store
            .run("test", |c| Ok(!c.is_autocommit()))
            .await
            .expect("asked");
        assert!(!open, "a transaction was left open");
        store.insert_event(&event("c")).await.expect("stored");
        assert_eq!(stored(&store, &scope).await, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_claims_of_one_key_in_one_batch_see_each_other() {
        let (_dir, store) = open().await;
        let held = Held::hold(&store, Duration::from_secs(5)).await;
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { claim(&store, "same-key").await })
            })
            .collect();
        queued(&store, 1).await;
        held.release();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.expect("task"));
        }
        assert_eq!(counts(&store), (1, 2), "both claims in one transaction");
        let started = outcomes
            .iter()
            .filter(|o| matches!(o, IdempotencyBegin::Started { .. }))
            .count();
        let in_flight = outcomes
            .iter()
            .filter(|o| **o == IdempotencyBegin::InFlight)
            .count();
        assert_eq!((started, in_flight), (1, 1), "{outcomes:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_whose_caller_gave_up_before_its_batch_is_not_stored() {
        let (_dir, store) = open().await;
        let held = Held::hold(&store, Duration::from_secs(5)).await;
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.insert_event(&event("c")).await })
            })
            .collect();
        queued(&store, 2).await;
        // As a deadline does: the callers stop waiting.
        for task in tasks {
            task.abort();
            assert!(task.await.expect_err("aborted").is_cancelled());
        }
        held.release();
        store.insert_event(&event("c")).await.expect("stored");
        let scope = Scope::new("acme", "batch");
        assert_eq!(stored(&store, &scope).await, 1);
        assert_eq!(counts(&store), (1, 1));
    }

    /// Claims an idempotency key of the test's scope.
    async fn claim(store: &SqliteStore, key: &str) -> IdempotencyBegin {
        store
            .begin_idempotent(
                &Scope::new("acme", "batch"),
                key,
                "print",
                uuid::Uuid::now_v7(),
                crate::time::now(),
                Duration::from_secs(3600),
                Duration::from_secs(60),
            )
            .await
            .expect("answered")
    }

    /// The connection's `synchronous` setting: 1 NORMAL, 2 FULL.
    async fn synchronous(store: &SqliteStore) -> i64 {
        store
            .run("test", |c| {
                c.pragma_query_value(None, "synchronous", |r| r.get(0))
            })
            .await
            .expect("pragma")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_is_answered_at_its_commit_without_waiting_for_the_synced_writes_of_its_batch()
    {
        let (_dir, store) = open().await;
        let held = Held::hold(&store, Duration::from_secs(5)).await;
        // A synced write queued first, that runs until the test lets it go.
        let (go, gate) = std::sync::mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);
        let slow = {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .writer
                    .write(Wait::Sync, move |_| {
                        let _ = gate.lock().expect("gate").recv();
                        Ok(())
                    })
                    .await
            })
        };
        let claimed = {
            let store = Arc::clone(&store);
            tokio::spawn(async move { claim(&store, "k").await })
        };
        queued(&store, 1).await;
        held.release();
        let claimed = tokio::time::timeout(Duration::from_secs(10), claimed)
            .await
            .expect("the claim is answered while the synced write still runs")
            .expect("task");
        assert!(
            matches!(claimed, IdempotencyBegin::Started { .. }),
            "{claimed:?}"
        );
        assert!(!slow.is_finished());
        go.send(()).expect("let go");
        slow.await.expect("task").expect("committed");
        let counts = store.writer.counts();
        assert_eq!(counts.batches.load(Ordering::Relaxed), 2);
        assert_eq!(
            counts.unsynced.load(Ordering::Relaxed),
            1,
            "the claim's transaction, not synced"
        );
        assert_eq!(synchronous(&store).await, 2, "every other commit syncs");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_that_never_syncs_commits_a_claim_with_its_batch_mates() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(
            SqliteStore::open_with(
                &dir.path().join("t.sqlite3"),
                SqliteSync::Normal,
                Duration::from_secs(30),
            )
            .await
            .expect("opens"),
        );
        let held = Held::hold(&store, Duration::from_secs(5)).await;
        let inserted = {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.insert_event(&event("c")).await })
        };
        let claimed = {
            let store = Arc::clone(&store);
            tokio::spawn(async move { claim(&store, "k").await })
        };
        queued(&store, 1).await;
        held.release();
        assert_eq!(
            inserted.await.expect("task").expect("stored"),
            Inserted::New
        );
        assert!(matches!(
            claimed.await.expect("task"),
            IdempotencyBegin::Started { .. }
        ));
        assert_eq!(counts(&store), (1, 2), "one transaction for both");
        assert_eq!(synchronous(&store).await, 1, "still NORMAL");
    }
}

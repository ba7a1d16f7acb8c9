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
#[path = "group_commit_tests.rs"]
pub(super) mod tests;

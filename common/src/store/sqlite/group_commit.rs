//! Group commit for the embedded store. The writes of the hot write path
//! (claiming and settling idempotency keys, recording an event with its
//! idempotency outcome, moving its notification state) are queued to one
//! writer per store, which runs every write queued meanwhile in one
//! transaction and commits (and syncs) once for all of them. Each caller is
//! answered only after its batch committed.
//!
//! Each write runs in a savepoint of its own: a write that fails is rolled
//! back alone and its caller gets its own error, while its batch-mates are
//! committed. When the batch itself cannot begin or commit, nothing of it is
//! stored and every caller gets `Unavailable` (a 503). A write whose caller
//! stopped waiting (its deadline fired) before the batch started is
//! skipped, so the 503 that caller got is the truth. Writes run in the order
//! they were queued, so a claim and the unlock queued behind it never swap,
//! and two claims of one key in one batch see each other.
//!
//! The writer is a task that takes the first write off the queue, then runs
//! on the connection's thread, where it also drains whatever was queued
//! while it waited for that thread.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};

use super::classify_sqlite;
use crate::store::{StoreError, StoreResult};

/// The most writes one transaction takes; the rest wait for the next one.
const MAX_BATCH: usize = 512;
/// Writes that may wait in the queue before callers wait to queue theirs.
const QUEUE: usize = 4096;

/// A queued write, type-erased so one queue carries them all.
trait Write: Send {
    /// Whether its caller still waits for the answer.
    fn wanted(&self) -> bool;
    /// Runs the write; false when it failed (its savepoint is rolled back).
    fn run(&mut self, c: &Connection) -> bool;
    /// Answers the caller: its own result once the batch committed, or
    /// `batch_failed` when it did not.
    fn answer(self: Box<Self>, batch_failed: Option<&str>);
}

struct Pending<F, R> {
    work: Option<F>,
    result: Option<rusqlite::Result<R>>,
    reply: oneshot::Sender<StoreResult<R>>,
}

impl<F, R> Write for Pending<F, R>
where
    F: FnOnce(&Connection) -> rusqlite::Result<R> + Send,
    R: Send,
{
    fn wanted(&self) -> bool {
        !self.reply.is_closed()
    }

    fn run(&mut self, c: &Connection) -> bool {
        let Some(work) = self.work.take() else {
            return false;
        };
        let result = work(c);
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
    /// Writes answered from committed transactions.
    pub(super) writes: AtomicU64,
}

impl Writer {
    /// Starts the writer of `conn` on the current runtime. It stops once
    /// every handle is dropped and the queue is empty.
    pub(super) fn start(conn: tokio_rusqlite::Connection) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let counts = Arc::new(Counts::default());
        tokio::spawn(run(conn, rx, Arc::clone(&counts)));
        Self { queue, counts }
    }

    /// Runs `work` in the next batch and returns its result once that batch
    /// is committed.
    pub(super) async fn write<R, F>(&self, work: F) -> StoreResult<R>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            work: Some(work),
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
                commit(c, batch, &counts);
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

/// Runs the writes still wanted in one transaction and answers each.
fn commit(c: &mut Connection, batch: Vec<Box<dyn Write>>, counts: &Counts) {
    let mut batch: Vec<_> = batch.into_iter().filter(|w| w.wanted()).collect();
    if batch.is_empty() {
        return;
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
    for write in batch {
        write.answer(failed.as_deref());
    }
}

fn run_all(c: &mut Connection, batch: &mut [Box<dyn Write>]) -> rusqlite::Result<()> {
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
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::*;
    use crate::store::{
        Event, IdempotencyBegin, Inserted, NotificationState, Scope, Store, sqlite::SqliteStore,
    };

    async fn open() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(&dir.path().join("t.sqlite3"))
            .await
            .expect("opens");
        (dir, Arc::new(store))
    }

    fn event(channel: &str) -> Event {
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
            .run(|c| {
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
        assert_eq!(store.count_events(&scope).await.expect("count"), 19);
        assert_eq!(
            store.get_event(&scope, events[7].id).await.expect("get"),
            None
        );
        assert_eq!(
            store.list_channels(&scope).await.expect("channels"),
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
        assert_eq!(store.count_events(&scope).await.expect("count"), 0);
        assert_eq!(counts(&store), (0, 0));
        // The writer carries on with the next batch.
        store.insert_event(&event("c")).await.expect("stored");
        assert_eq!(store.count_events(&scope).await.expect("count"), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_claims_of_one_key_in_one_batch_see_each_other() {
        let (_dir, store) = open().await;
        let held = Held::hold(&store, Duration::from_secs(5)).await;
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    store
                        .begin_idempotent(
                            &Scope::new("acme", "batch"),
                            "same-key",
                            "print",
                            uuid::Uuid::now_v7(),
                            crate::time::now(),
                            Duration::from_secs(3600),
                            Duration::from_secs(60),
                        )
                        .await
                        .expect("answered")
                })
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
        assert_eq!(store.count_events(&scope).await.expect("count"), 1);
        assert_eq!(counts(&store), (1, 1));
    }
}

//! The group-commit writer's tests: batches, a failed write among
//! batch-mates, a batch that cannot begin or commit, one key claimed twice
//! in one batch, and writes whose callers gave up.

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
            c.prepare("SELECT name FROM channels WHERE org = ?1 AND project = ?2 ORDER BY name")?
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
async fn a_claim_is_answered_at_its_commit_without_waiting_for_the_synced_writes_of_its_batch() {
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

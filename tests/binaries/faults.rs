//! The crash-and-fault suite, on the real binaries: kill -9 of the embedded
//! ingest mid-burst and a restart, kill -9 of one of two notifiers
//! mid-stream, the broker cut mid-burst, the store paused mid-burst, and a
//! backlog larger than any relay page left by a crash during a broker
//! outage. After each, every event answered 201 settles, and each device
//! got it exactly once, counted where the push leaves Tocsin: the push
//! provider's own log line (without APNs credentials the binaries log each
//! push instead of sending it, naming the event and the device).
//!
//! "Exactly once" has one honest exception, and the tests pin it down: a
//! push whose worker was killed after handing it to the provider but before
//! recording it is sent again when the worker's lease runs out (nobody can
//! know it went out). Such a repeat is allowed only for a delivery the
//! killed process was sending at the moment it died, at most once, and it
//! carries the same collapse id so the device still shows one alert. Where
//! no process dies, no repeat at all is allowed.

use std::{collections::HashSet, time::Duration};

use tocsin_tests::{
    amqp_url,
    drill::{
        Burst, START, assert_exactly_once, base_env, broker_env, claimed, device_ids,
        key_and_devices, open_store, pushes, remove_queues, start_ingest, start_notifier,
        wait_delivered, with,
    },
    eventually,
    proxy::Proxy,
};
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_embedded_ingest_mid_burst_then_a_restart_delivers_every_event_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = base_env(dir.path());
    let (mut first, base) = start_ingest(&env).await;
    let (key, scope) = key_and_devices(&env, &base).await;
    let burst = Burst::start(&base, &key, 8);
    burst.reach(150).await;
    first.kill();
    let accepted = burst.stop().await;

    // Nothing runs now: what the dead process left `sending` is exactly
    // what it may have handed to the provider without recording it.
    let store = open_store(dir.path()).await;
    let in_doubt = claimed(store.as_ref(), &scope, &accepted).await;
    drop(store);

    let (second, _) = start_ingest(&env).await;
    let store = open_store(dir.path()).await;
    wait_delivered(store.as_ref(), &scope, &accepted).await;
    let devices = device_ids(store.as_ref(), &scope).await;
    let mut sent = pushes(&first);
    sent.extend(pushes(&second));
    assert_exactly_once(&accepted, &devices, &sent, &in_doubt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_one_of_two_notifiers_mid_stream_delivers_every_event_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = format!("t{}", Uuid::new_v4().simple());
    let env = with(base_env(dir.path()), &broker_env(amqp_url(), &prefix));
    let (_ingest, base) = start_ingest(&env).await;
    let (key, scope) = key_and_devices(&env, &base).await;
    let mut doomed = start_notifier(&env).await;
    let survivor = start_notifier(&env).await;

    let burst = Burst::start(&base, &key, 8);
    // Mid-stream: the doomed notifier is pushing when it dies.
    eventually(START, "the doomed notifier's 60th push", async || {
        let pushed = pushes(&doomed).len();
        if pushed >= 60 {
            Ok(())
        } else {
            Err(format!("{pushed} pushes"))
        }
    })
    .await;
    doomed.kill();
    burst.reach(burst.count() + 100).await;
    let accepted = burst.stop().await;

    let store = open_store(dir.path()).await;
    wait_delivered(store.as_ref(), &scope, &accepted).await;
    let devices = device_ids(store.as_ref(), &scope).await;
    // The killed notifier may have sent any push it logged without
    // recording it; the survivor's own pushes never repeat.
    let by_doomed: HashSet<(Uuid, Uuid)> = pushes(&doomed).into_iter().collect();
    let mut sent = pushes(&doomed);
    sent.extend(pushes(&survivor));
    assert_exactly_once(&accepted, &devices, &sent, &by_doomed);
    remove_queues(prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_cut_mid_burst_delivers_every_event_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = format!("t{}", Uuid::new_v4().simple());
    let (broker, through) = Proxy::to_broker().await;
    let env = with(base_env(dir.path()), &broker_env(through, &prefix));
    let (_ingest, base) = start_ingest(&env).await;
    let (key, scope) = key_and_devices(&env, &base).await;
    let notifier = start_notifier(&env).await;

    let burst = Burst::start(&base, &key, 4);
    burst.reach(50).await;
    broker.cut();
    let during = burst.count();
    burst.reach(during + 50).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    broker.restore();
    burst.reach(burst.count() + 50).await;
    let accepted = burst.stop().await;

    let store = open_store(dir.path()).await;
    wait_delivered(store.as_ref(), &scope, &accepted).await;
    let devices = device_ids(store.as_ref(), &scope).await;
    // Nobody died: not a single repeat.
    assert_exactly_once(&accepted, &devices, &pushes(&notifier), &HashSet::new());
    remove_queues(prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_paused_mid_burst_delivers_every_event_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = with(
        base_env(dir.path()),
        &[
            ("INGEST_STORE_TIMEOUT_MS", "500".into()),
            ("NOTIFIER_STORE_TIMEOUT_MS", "500".into()),
        ],
    );
    let (ingest, base) = start_ingest(&env).await;
    let (key, scope) = key_and_devices(&env, &base).await;

    let burst = Burst::start(&base, &key, 4);
    burst.reach(50).await;
    // Another process takes SQLite's write lock and sits on it: every write
    // waits, requests answer 503 at their deadline, the notifier's store
    // calls fail and are retried.
    let path = dir.path().join("tocsin.sqlite3");
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let locker = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(path).expect("sqlite opens");
        conn.execute_batch("BEGIN EXCLUSIVE").expect("write lock");
        locked_tx.send(()).expect("signal");
        std::thread::sleep(Duration::from_secs(3));
        conn.execute_batch("COMMIT").expect("released");
    });
    locked_rx.recv().expect("locked");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = tokio::task::spawn_blocking(move || locker.join()).await;
    let resumed = burst.count();
    burst.reach(resumed + 50).await;
    let accepted = burst.stop().await;

    let store = open_store(dir.path()).await;
    wait_delivered(store.as_ref(), &scope, &accepted).await;
    let devices = device_ids(store.as_ref(), &scope).await;
    assert_exactly_once(&accepted, &devices, &pushes(&ingest), &HashSet::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_larger_than_any_relay_page_left_by_a_crash_is_delivered_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = format!("t{}", Uuid::new_v4().simple());
    let (broker, through) = Proxy::to_broker().await;
    let env = with(base_env(dir.path()), &broker_env(through, &prefix));
    let (mut first, base) = start_ingest(&env).await;
    let (key, scope) = key_and_devices(&env, &base).await;
    let notifier = start_notifier(&env).await;

    // The broker is away: every event is stored `pending`, then the ingest
    // that holds them dies without its shutdown flush.
    broker.cut();
    let burst = Burst::start(&base, &key, 8);
    burst.reach(450).await;
    first.kill();
    let accepted = burst.stop().await;
    broker.restore();

    let (_second, _) = start_ingest(&env).await;
    let store = open_store(dir.path()).await;
    wait_delivered(store.as_ref(), &scope, &accepted).await;
    let devices = device_ids(store.as_ref(), &scope).await;
    // Only ingest died, and it sends no push: not a single repeat.
    assert_exactly_once(&accepted, &devices, &pushes(&notifier), &HashSet::new());
    remove_queues(prefix).await;
}

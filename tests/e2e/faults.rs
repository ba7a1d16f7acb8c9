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

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use common::store::{DeliveryState, NotificationState, Scope, Store, StoreConfig};
use serde_json::{Value, json};
use tocsin_tests::{
    amqp_url,
    pipeline::delete_topology,
    process::{self, Service},
    proxy::Proxy,
};
use uuid::Uuid;

const START: Duration = Duration::from_secs(60);
/// How long every 201 event has to settle after the fault is over: the
/// lease (2 s here) plus the relay and retry delays, with room to spare.
const SETTLE: Duration = Duration::from_secs(60);
const DEVICES: u8 = 3;
const PUSH_LOGGED: &str = "no APNs credentials configured: push logged, not sent";

/// Settings shared by every process of a test: short leases, retries and
/// relay delays, JSON logs, and no APNs credentials (pushes are logged).
fn base_env(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("INGEST_DATA_DIR", dir.display().to_string()),
        ("INGEST_LISTEN", "127.0.0.1:0".into()),
        ("INGEST_LOG_FORMAT", "json".into()),
        ("INGEST_RELAY_INTERVAL_MS", "200".into()),
        ("INGEST_RELAY_GRACE_MS", "500".into()),
        ("INGEST_REQUEUE_AFTER_SECONDS", "5".into()),
        ("INGEST_SHUTDOWN_GRACE_SECONDS", "1".into()),
        ("INGEST_BROKER_TIMEOUT_MS", "1000".into()),
        ("NOTIFIER_DATA_DIR", dir.display().to_string()),
        ("NOTIFIER_LISTEN", "127.0.0.1:0".into()),
        ("NOTIFIER_LOG_FORMAT", "json".into()),
        ("NOTIFIER_STALE_CLAIM_SECONDS", "2".into()),
        ("NOTIFIER_RETRY_BASE_MS", "200".into()),
        ("NOTIFIER_RETRY_MAX_MS", "1000".into()),
        ("NOTIFIER_BROKER_TIMEOUT_MS", "1000".into()),
    ]
}

fn with(
    mut env: Vec<(&'static str, String)>,
    extra: &[(&'static str, String)],
) -> Vec<(&'static str, String)> {
    for (k, v) in extra {
        env.retain(|(name, _)| name != k);
        env.push((k, v.clone()));
    }
    env
}

/// The queue settings of a production-mode test: the test's own prefix.
fn broker_env(url: String, prefix: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AMQP_URL", url),
        ("INGEST_QUEUE_PREFIX", prefix.to_owned()),
        ("NOTIFIER_QUEUE_PREFIX", prefix.to_owned()),
    ]
}

async fn start_ingest(env: &[(&'static str, String)]) -> (Service, String) {
    let mut ingest = Service::start("ingest", &[], env);
    let addr = ingest.wait_for_log("ingest listening", START).await["addr"]
        .as_str()
        .expect("addr")
        .to_owned();
    (ingest, format!("http://{addr}"))
}

async fn start_notifier(env: &[(&'static str, String)]) -> Service {
    let mut notifier = Service::start("notifier", &[], env);
    notifier.wait_for_log("consuming notify jobs", START).await;
    notifier
}

/// A key with a quota no burst reaches, and the project's devices.
async fn key_and_devices(env: &[(&'static str, String)], base: &str) -> (String, Scope) {
    let project = format!("p{}", Uuid::new_v4().simple());
    let key = process::run(
        "ingest",
        &[
            "keys",
            "create",
            "--org",
            "acme",
            "--project",
            &project,
            "--rate-limit",
            "1000000",
        ],
        env,
    )
    .trim()
    .to_owned();
    for n in 1..=DEVICES {
        let body = json!({ "token": format!("{n:02x}").repeat(32), "environment": "sandbox" });
        let (status, answer) = process::post(base, "/v1/devices", &key, &body).await;
        assert_eq!(status, 201, "{answer}");
    }
    (key, Scope::new("acme", project))
}

/// Clients posting events as fast as they are answered, until stopped.
struct Burst {
    accepted: Arc<Mutex<Vec<Uuid>>>,
    stop: Arc<AtomicBool>,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

impl Burst {
    fn start(base: &str, key: &str, clients: usize) -> Self {
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let clients = (0..clients)
            .map(|c| {
                let (accepted, stop) = (Arc::clone(&accepted), Arc::clone(&stop));
                let (base, key) = (base.to_owned(), key.to_owned());
                tokio::spawn(async move {
                    let client = reqwest::Client::builder()
                        .timeout(Duration::from_secs(10))
                        .build()
                        .expect("client");
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        n += 1;
                        let body = json!({ "channelName": "ops", "title": format!("c{c} n{n}") });
                        let sent = client
                            .post(format!("{base}/v1/events"))
                            .bearer_auth(&key)
                            .json(&body)
                            .send()
                            .await;
                        // Refused connections and 503s are part of the fault:
                        // only what was answered 201 was promised.
                        let Ok(response) = sent else {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        };
                        if response.status() != 201 {
                            continue;
                        }
                        let Ok(answer) = response.json::<Value>().await else {
                            continue;
                        };
                        let id: Option<Uuid> =
                            answer["data"]["id"].as_str().and_then(|s| s.parse().ok());
                        accepted.lock().expect("lock").extend(id);
                    }
                })
            })
            .collect();
        Self {
            accepted,
            stop,
            clients,
        }
    }

    fn count(&self) -> usize {
        self.accepted.lock().expect("lock").len()
    }

    async fn reach(&self, count: usize) {
        let deadline = Instant::now() + START;
        while self.count() < count {
            assert!(
                Instant::now() < deadline,
                "only {} events accepted",
                self.count()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(self) -> Vec<Uuid> {
        self.stop.store(true, Ordering::SeqCst);
        for client in self.clients {
            let _ = client.await;
        }
        self.accepted.lock().expect("lock").clone()
    }
}

async fn open_store(dir: &Path) -> Arc<dyn Store> {
    common::store::open(
        &StoreConfig::Sqlite {
            path: dir.join("tocsin.sqlite3"),
            synchronous: Default::default(),
        },
        Duration::from_secs(10),
    )
    .await
    .expect("store opens")
}

/// Waits until every event is settled; all must be `delivered`.
async fn wait_delivered(store: &dyn Store, scope: &Scope, ids: &[Uuid]) {
    let deadline = Instant::now() + SETTLE;
    let mut open: Vec<Uuid> = ids.to_vec();
    while !open.is_empty() {
        let mut still = Vec::new();
        for id in &open {
            let event = store
                .get_event(scope, *id)
                .await
                .expect("read")
                .expect("stored");
            match event.notification {
                NotificationState::Pending | NotificationState::Queued => still.push(*id),
                NotificationState::Delivered => {}
                other => panic!("event {id} settled {}", other.as_str()),
            }
        }
        open = still;
        assert!(
            open.is_empty() || Instant::now() < deadline,
            "{} of {} events never settled",
            open.len(),
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// (event, device) of every push a process handed to the provider.
fn pushes(service: &Service) -> Vec<(Uuid, Uuid)> {
    service
        .lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == PUSH_LOGGED)
        .map(|l| {
            let id = |key: &str| -> Uuid {
                l[key]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("push line without {key}: {l}"))
            };
            (id("eventId"), id("deviceId"))
        })
        .collect()
}

/// Asserts each accepted event reached each device, once, except that a
/// push in `in_doubt` (its sender died around it) may have gone out twice.
fn assert_exactly_once(
    accepted: &[Uuid],
    devices: &[Uuid],
    sent: &[(Uuid, Uuid)],
    in_doubt: &HashSet<(Uuid, Uuid)>,
) {
    let mut counts: HashMap<(Uuid, Uuid), usize> = HashMap::new();
    for push in sent {
        *counts.entry(*push).or_default() += 1;
    }
    let mut repeated = 0;
    for event in accepted {
        for device in devices {
            let n = counts.get(&(*event, *device)).copied().unwrap_or(0);
            assert!(n >= 1, "event {event} never reached device {device}");
            if n > 1 {
                assert!(
                    n == 2 && in_doubt.contains(&(*event, *device)),
                    "event {event} reached device {device} {n} times, and its sender did not die mid-send"
                );
                repeated += 1;
            }
        }
    }
    // Nothing was pushed that was not asked for.
    let expected: HashSet<(Uuid, Uuid)> = accepted
        .iter()
        .flat_map(|e| devices.iter().map(move |d| (*e, *d)))
        .collect();
    for push in counts.keys() {
        assert!(
            expected.contains(push) || !accepted.contains(&push.0),
            "unexpected push {push:?}"
        );
    }
    eprintln!(
        "{} events x {} devices: {} pushes, {} repeated after a crash (in doubt: {})",
        accepted.len(),
        devices.len(),
        sent.len(),
        repeated,
        in_doubt.len()
    );
}

/// Removes a test's queues and exchanges from the shared broker.
async fn remove_queues(prefix: String) {
    let mut config = notifier::Config::defaults();
    config.amqp_url = Some(common::config::Secret::new(amqp_url()));
    config.queue_prefix = prefix;
    delete_topology(&config).await;
}

async fn device_ids(store: &dyn Store, scope: &Scope) -> Vec<Uuid> {
    let devices = store.list_devices(scope).await.expect("devices");
    assert_eq!(devices.len(), usize::from(DEVICES));
    devices.into_iter().map(|d| d.id).collect()
}

/// Deliveries a dead process left claimed: the only pushes that may repeat.
async fn claimed(store: &dyn Store, scope: &Scope, events: &[Uuid]) -> HashSet<(Uuid, Uuid)> {
    let mut sending = HashSet::new();
    for event in events {
        for d in store
            .list_deliveries(scope, *event)
            .await
            .expect("deliveries")
        {
            if d.state == DeliveryState::Sending {
                sending.insert((d.event_id, d.device_id));
            }
        }
    }
    sending
}

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
    let deadline = Instant::now() + START;
    while pushes(&doomed).len() < 60 {
        assert!(Instant::now() < deadline, "the notifier never got going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
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

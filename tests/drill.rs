//! The harness of the crash-and-fault suite (tests/binaries/faults.rs): the
//! real binaries with short leases and delays, a burst of clients that keeps
//! what was answered 201, and the count of pushes where they leave Tocsin
//! (the push provider's own log line, which names the event and the device).

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

pub use crate::process::{START, start_ingest};
use crate::{
    amqp_url, eventually,
    pipeline::delete_topology,
    process::{self, Service},
};
use common::store::{DeliveryState, NotificationState, Scope, Store, StoreConfig};
use serde_json::{Value, json};
use uuid::Uuid;

/// How long every 201 event has to settle after the fault is over: the
/// lease (2 s here) plus the relay and retry delays, with room to spare.
pub const SETTLE: Duration = Duration::from_secs(60);
pub const DEVICES: u8 = 3;
pub const PUSH_LOGGED: &str =
    "no credentials configured for this kind of device: push logged, not sent";

/// Settings shared by every process of a test: short leases, retries and
/// relay delays, JSON logs, and no APNs credentials (pushes are logged).
pub fn base_env(dir: &Path) -> Vec<(&'static str, String)> {
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

pub fn with(
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
pub fn broker_env(url: String, prefix: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AMQP_URL", url),
        ("INGEST_QUEUE_PREFIX", prefix.to_owned()),
        ("NOTIFIER_QUEUE_PREFIX", prefix.to_owned()),
    ]
}

pub async fn start_notifier(env: &[(&'static str, String)]) -> Service {
    let mut notifier = Service::start("notifier", &[], env);
    notifier.wait_for_log("consuming notify jobs", START).await;
    notifier
}

/// A key with a quota no burst reaches, and the project's devices.
pub async fn key_and_devices(env: &[(&'static str, String)], base: &str) -> (String, Scope) {
    let (key, scope) = key(env);
    for n in 1..=DEVICES {
        let body = json!({ "token": format!("{n:02x}").repeat(32), "environment": "sandbox" });
        let (status, answer) = process::post(base, "/v1/devices", &key, &body).await;
        assert_eq!(status, 201, "{answer}");
    }
    (key, scope)
}

/// A key of a new project, with a quota no burst (or poll) reaches, made
/// with `ingest keys create`.
pub fn key(env: &[(&'static str, String)]) -> (String, Scope) {
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
    (key, Scope::new("acme", project))
}

/// Clients posting events as fast as they are answered, until stopped.
pub struct Burst {
    accepted: Arc<Mutex<Vec<Uuid>>>,
    stop: Arc<AtomicBool>,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

impl Burst {
    pub fn start(base: &str, key: &str, clients: usize) -> Self {
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

    pub fn count(&self) -> usize {
        self.accepted.lock().expect("lock").len()
    }

    pub async fn reach(&self, count: usize) {
        let what = format!("{count} events accepted");
        eventually(START, &what, async || {
            let accepted = self.count();
            if accepted >= count {
                Ok(())
            } else {
                Err(format!("only {accepted}"))
            }
        })
        .await;
    }

    pub async fn stop(self) -> Vec<Uuid> {
        self.stop.store(true, Ordering::SeqCst);
        for client in self.clients {
            let _ = client.await;
        }
        self.accepted.lock().expect("lock").clone()
    }
}

pub async fn open_store(dir: &Path) -> Arc<dyn Store> {
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
pub async fn wait_delivered(store: &dyn Store, scope: &Scope, ids: &[Uuid]) {
    let mut open: Vec<Uuid> = ids.to_vec();
    eventually(SETTLE, "every event to settle", async || {
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
        if open.is_empty() {
            Ok(())
        } else {
            Err(format!("{} of {} events unsettled", open.len(), ids.len()))
        }
    })
    .await;
}

/// (event, device) of every push a process handed to the provider.
pub fn pushes(service: &Service) -> Vec<(Uuid, Uuid)> {
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
            // A summary's push is of no event: its id stands in.
            let subject = if l["summaryId"].is_string() {
                "summaryId"
            } else {
                "eventId"
            };
            (id(subject), id("deviceId"))
        })
        .collect()
}

/// Asserts each accepted event reached each device, once, except that a
/// push in `in_doubt` (its sender died around it) may have gone out twice.
pub fn assert_exactly_once(
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
pub async fn remove_queues(prefix: String) {
    let mut config = notifier::Config::defaults();
    config.backend.amqp_url = Some(common::config::Secret::new(amqp_url()));
    config.backend.queue_prefix = prefix;
    delete_topology(&config).await;
}

pub async fn device_ids(store: &dyn Store, scope: &Scope) -> Vec<Uuid> {
    let devices = store.list_devices(scope).await.expect("devices");
    assert_eq!(devices.len(), usize::from(DEVICES));
    devices.into_iter().map(|d| d.id).collect()
}

/// Deliveries a dead process left claimed: the only pushes that may repeat.
pub async fn claimed(store: &dyn Store, scope: &Scope, events: &[Uuid]) -> HashSet<(Uuid, Uuid)> {
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

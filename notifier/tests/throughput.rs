//! A quick measurement of the embedded notifier's push rate, not a test:
//! `#[ignore]`d, run by hand on a release build (the official benchmark is
//! in `tests/bench/`):
//!
//! ```text
//! cargo test --release -p notifier --test throughput -- --ignored --nocapture
//! ```
//!
//! A real SQLite file, the in-process queue and the real worker, as ingest
//! runs them in embedded mode; the push service answers after 5 ms (what
//! APNs takes). `DEVICES` and `EVENTS` set the load.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use common::{
    jobs::Job,
    queue,
    store::{
        ApnsEnvironment, DeviceRegistration, Event, NotificationState, PushTarget, Scope, Store,
    },
};
use notifier::{
    Worker,
    metrics::NotifierMetrics,
    push::{Push, PushOutcome, PushProvider},
};
use serde_json::Map;
use uuid::Uuid;

/// A push service that answers every push after a fixed latency.
struct Slow(Duration);

#[async_trait]
impl PushProvider for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }

    async fn send(&self, _: &Push) -> PushOutcome {
        tokio::time::sleep(self.0).await;
        PushOutcome::Delivered { apns_id: None }
    }
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement, run by hand on a release build"]
async fn pushes_per_second_to_a_5_ms_push_service() {
    let devices = setting("DEVICES", 4);
    let events = setting("EVENTS", 10_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> = common::store::open(
        &common::store::StoreConfig::Sqlite {
            path: dir.path().join("tocsin.sqlite3"),
            synchronous: Default::default(),
        },
        Duration::from_secs(30),
    )
    .await
    .expect("sqlite");
    let scope = Scope::new("acme", "bench");
    let now = common::time::now();
    for n in 0..devices {
        let registration = DeviceRegistration {
            target: PushTarget::Apns {
                token: format!("{n:064x}"),
                environment: ApnsEnvironment::Sandbox,
            },
            name: None,
            channels: None,
        };
        store
            .upsert_device(&scope, &registration, now)
            .await
            .expect("device");
    }
    let mut ids = Vec::with_capacity(events);
    for n in 0..events {
        let event = Event {
            id: Uuid::now_v7(),
            scope: scope.clone(),
            channel_name: "bench".into(),
            title: format!("Event {n}"),
            description: None,
            icon: None,
            tags: vec![],
            metadata: Map::new(),
            user_id: None,
            notify: true,
            source: None,
            created_at: now,
            notification: NotificationState::Queued,
            request_id: None,
            notification_due_at: None,
            priority: Default::default(),
        };
        store.insert_event(&event).await.expect("event");
        ids.push(event.id);
    }
    let config = notifier::Config::defaults();
    let (producer, consumer) = queue::open(&queue::QueueConfig::InProcess);
    let mut registry = common::metrics::registry();
    let worker = Worker::start(
        &config,
        Arc::clone(&store),
        Arc::new(Slow(Duration::from_millis(5))),
        (Arc::clone(&producer), consumer),
        NotifierMetrics::register(&mut registry),
    );
    let started = std::time::Instant::now();
    for id in &ids {
        producer
            .publish(&Job::notify(*id, scope.clone(), None))
            .await
            .expect("published");
    }
    loop {
        let queued = store
            .count_in_notification_state(NotificationState::Queued)
            .await
            .expect("count");
        if queued == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    let pushes = devices * events;
    println!(
        "{devices} devices x {events} events = {pushes} pushes in {:.2} s: {:.0} pushes/s",
        elapsed.as_secs_f64(),
        pushes as f64 / elapsed.as_secs_f64()
    );
    let delivered = store
        .count_in_notification_state(NotificationState::Delivered)
        .await
        .expect("count");
    assert_eq!(delivered as usize, events, "every event delivered");
    worker.stop().await;
}

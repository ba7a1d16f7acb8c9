//! The batched notifier end to end, on every store: each device is pushed
//! once across redelivered jobs and two competing notifiers, the in-flight
//! limit holds, and a cached device list follows the devices deleted and
//! added through the API (at once in the same process, within the cache's
//! bound from another), and a job with no device to send to settles its
//! event without reading it.

use std::{
    num::NonZeroUsize,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use async_trait::async_trait;
use common::{
    jobs::Job,
    queue::{self, QueueConfig},
    store::NotificationState,
};
use notifier::push::{Push, PushOutcome, PushProvider};
use serde_json::Value;
use tocsin_tests::{
    CountCalls, Embedded, Reply, StoreKind, TestApp, TestConfig, for_each_store,
    pipeline::{Pipeline, token},
    test_notifier_config,
};

fn id(value: &Value) -> String {
    value["id"].as_str().expect("id").to_owned()
}

/// Every event of `ids` delivered, and the number of pushes each
/// (event, device token) pair got.
async fn pushes(pipeline: &Pipeline, ids: &[String], tokens: &[String]) -> Vec<usize> {
    for id in ids {
        pipeline.settled(id, "delivered").await;
    }
    let sent = pipeline.provider.sent();
    ids.iter()
        .flat_map(|id| tokens.iter().map(move |t| (id, t)))
        .map(|(id, t)| {
            sent.iter()
                .filter(|(p, _)| p.address() == t && &p.alert.event_id.to_string() == id)
                .count()
        })
        .collect()
}

async fn each_device_is_pushed_once_across_redelivered_jobs_and_two_notifiers(kind: StoreKind) {
    let pipeline = Pipeline::with_broker(kind, None).await;
    // A second notifier, with a store handle of its own as another
    // process has, competes for the same queue.
    let store = common::store::open(
        &pipeline.app.config.backend.store(),
        Duration::from_secs(10),
    )
    .await
    .expect("store opens");
    let second = notifier::start(&pipeline.notifier_config, store, pipeline.provider.clone())
        .await
        .expect("second notifier starts");
    let tokens: Vec<String> = (1..=4).map(token).collect();
    for t in &tokens {
        pipeline.register(t, None).await;
    }
    let mut ids = Vec::new();
    for i in 0..8 {
        ids.push(id(&pipeline
            .event("batch", &format!("Event {i}"), true)
            .await));
    }
    // Every job once more, as the broker redelivers the jobs of a notifier
    // that died before acknowledging them.
    let amqp = pipeline.notifier_config.backend.amqp().expect("a broker");
    let (producer, _) = queue::open(&QueueConfig::Amqp(amqp));
    for id in &ids {
        let job = Job::notify(id.parse().expect("uuid"), pipeline.scope.clone(), None);
        producer.publish(&job).await.expect("published again");
    }
    let counts = pushes(&pipeline, &ids, &tokens).await;
    assert!(
        counts.iter().all(|&n| n == 1),
        "pushes per delivery: {counts:?}"
    );
    second.shutdown().await;
    pipeline.finish().await;
}

/// A push service that counts the pushes it is answering at once. Each
/// push waits (a short while at most) until `limit` are in hand, so the
/// sends overlap as far as the notifier lets them.
struct Gauge {
    limit: usize,
    now: AtomicUsize,
    most: AtomicUsize,
    sent: AtomicUsize,
}

#[async_trait]
impl PushProvider for Gauge {
    fn name(&self) -> &'static str {
        "gauge"
    }

    async fn send(&self, _: &Push) -> PushOutcome {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let started = Instant::now();
        while self.now.load(Ordering::SeqCst) < self.limit
            && started.elapsed() < Duration::from_millis(200)
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // Room for a notifier that ignores the limit to start more.
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        self.sent.fetch_add(1, Ordering::SeqCst);
        PushOutcome::Delivered { apns_id: None }
    }
}

async fn the_in_flight_limit_holds_across_jobs(kind: StoreKind) {
    const LIMIT: usize = 3;
    let gauge = Arc::new(Gauge {
        limit: LIMIT,
        now: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
        sent: AtomicUsize::new(0),
    });
    let mut settings = test_notifier_config();
    settings.max_in_flight = NonZeroUsize::new(LIMIT).expect("non-zero");
    // Pushes wait for a permit before they claim, so the lease need not
    // cover the wait; a roomy one keeps a slow machine from cutting sends.
    settings.stale_claim_seconds = 30;
    let app = TestApp::spawn_with_options(
        TestConfig::new(kind),
        Embedded {
            provider: Some(gauge.clone()),
            notifier: settings,
        },
    )
    .await;
    let (key, _) = app.new_key().await;
    for n in 1..=5 {
        let body = serde_json::json!({ "token": token(n), "environment": "sandbox" });
        let reply = Reply::of(app.post("/v1/devices", &key, &body).await).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
    }
    let mut ids = Vec::new();
    for i in 0..4 {
        let body = serde_json::json!({ "channelName": "load", "title": format!("Event {i}"), "notify": true });
        let reply = Reply::of(app.post_event(&key, &body).await).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        ids.push(id(&reply.body["data"]));
    }
    tocsin_tests::eventually(
        tocsin_tests::pipeline::WAIT,
        "every push sent",
        async || {
            let sent = gauge.sent.load(Ordering::SeqCst);
            (sent >= 20).then_some(()).ok_or(sent)
        },
    )
    .await;
    assert_eq!(
        gauge.sent.load(Ordering::SeqCst),
        20,
        "one push per delivery"
    );
    assert_eq!(
        gauge.most.load(Ordering::SeqCst),
        LIMIT,
        "at most the limit at once, and that many when there is work for them"
    );
    app.stop().await;
}

async fn delete(pipeline: &Pipeline, device: &Value) {
    let path = format!("/v1/devices/{}", id(device));
    let reply = Reply::of(pipeline.app.delete_as(&path, &pipeline.key).await).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

async fn a_device_changed_through_this_process_counts_from_the_next_job(kind: StoreKind) {
    let pipeline = Pipeline::embedded(kind).await;
    let (a, b, c) = (token(1), token(2), token(3));
    pipeline.register(&a, None).await;
    let gone = pipeline.register(&b, None).await;
    let first = id(&pipeline.event("cache", "Both", true).await);
    assert_eq!(
        pushes(&pipeline, &[first], &[a.clone(), b.clone()]).await,
        [1, 1]
    );
    // The list was just read (and cached); the API changes it right away.
    delete(&pipeline, &gone).await;
    pipeline.register(&c, None).await;
    let second = id(&pipeline.event("cache", "After the change", true).await);
    assert_eq!(pushes(&pipeline, &[second], &[a, b, c]).await, [1, 0, 1]);
    pipeline.finish().await;
}

async fn a_device_changed_by_another_process_counts_within_the_cache_bound(kind: StoreKind) {
    const BOUND: Duration = Duration::from_millis(500);
    let mut pipeline = Pipeline::with_broker(kind, None).await;
    // The notifier of another process: a store handle of its own, which
    // does not see the API's changes happen.
    pipeline.stop_notifier().await;
    pipeline.notifier_config.device_cache_ms = BOUND.as_millis() as u64;
    let store = common::store::open(
        &pipeline.app.config.backend.store(),
        Duration::from_secs(10),
    )
    .await
    .expect("store opens");
    let running = notifier::start(&pipeline.notifier_config, store, pipeline.provider.clone())
        .await
        .expect("notifier starts");
    pipeline.notifier = Some(running);
    let (a, b, c) = (token(1), token(2), token(3));
    pipeline.register(&a, None).await;
    let gone = pipeline.register(&b, None).await;
    let first = id(&pipeline.event("cache", "Both", true).await);
    assert_eq!(
        pushes(&pipeline, &[first], &[a.clone(), b.clone()]).await,
        [1, 1]
    );
    delete(&pipeline, &gone).await;
    pipeline.register(&c, None).await;
    // Past the bound (with room for the clocks of a busy machine).
    tokio::time::sleep(BOUND + Duration::from_millis(300)).await;
    let later = id(&pipeline.event("cache", "After the bound", true).await);
    assert_eq!(pushes(&pipeline, &[later], &[a, b, c]).await, [1, 0, 1]);
    pipeline.finish().await;
}

async fn a_job_with_no_device_to_send_to_settles_its_event_without_reading_it(kind: StoreKind) {
    let (counting, reads) = CountCalls::of(&["get_event", "list_deliveries"]);
    let app = TestApp::spawn_wrapped(TestConfig::new(kind), Embedded::default(), move |store| {
        counting.on(store)
    })
    .await;
    let (key, _) = app.new_key().await;
    const EVENTS: u64 = 5;
    for i in 0..EVENTS {
        let body = serde_json::json!({ "channelName": "quiet", "title": format!("n{i}") });
        app.record_event(&key, &body).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let skipped = app
            .store
            .count_in_notification_state(NotificationState::Skipped)
            .await
            .expect("counted");
        if skipped == EVENTS {
            break;
        }
        assert!(Instant::now() < deadline, "{skipped} of {EVENTS} settled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        reads.load(Ordering::SeqCst),
        0,
        "the jobs read their events"
    );
    app.stop().await;
}

for_each_store!(
    each_device_is_pushed_once_across_redelivered_jobs_and_two_notifiers,
    the_in_flight_limit_holds_across_jobs,
    a_device_changed_through_this_process_counts_from_the_next_job,
    a_device_changed_by_another_process_counts_within_the_cache_bound,
    a_job_with_no_device_to_send_to_settles_its_event_without_reading_it,
);

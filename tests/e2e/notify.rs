//! The notify pipeline end to end: devices, jobs through RabbitMQ or the
//! in-process queue, the notifier with a recording push provider, retries,
//! dead tokens, a broker outage and a notifier replaced mid-stream.

use std::{sync::Arc, time::Duration};

use common::queue::amqp::AmqpConfig;
use notifier::push::PushOutcome;
use serde_json::{Value, json};
use tocsin_tests::{
    Reply, StoreKind, TestApp, TestConfig, amqp_url, proxy::Proxy, recording::RecordingProvider,
    test_notifier_config,
};

const WAIT: Duration = Duration::from_secs(30);

struct Pipeline {
    app: TestApp,
    key: String,
    provider: Arc<RecordingProvider>,
    notifier_config: notifier::Config,
    notifier: Option<notifier::Running>,
}

impl Pipeline {
    /// Embedded mode: the notifier runs inside ingest.
    async fn embedded(kind: StoreKind) -> Self {
        let provider = Arc::new(RecordingProvider::default());
        let options = ingest::Options {
            push_provider: Some(provider.clone()),
            notifier: Some(test_notifier_config()),
        };
        let app = TestApp::spawn_with_options(TestConfig::new(kind), options).await;
        let (key, _) = app.new_key().await;
        Self {
            app,
            key,
            provider,
            notifier_config: test_notifier_config(),
            notifier: None,
        }
    }

    /// Production mode: RabbitMQ between ingest and a notifier, with a queue
    /// prefix of the test's own. `ingest_broker` is where ingest reaches the
    /// broker (a proxy when the test wants to cut it).
    async fn with_broker(kind: StoreKind, ingest_broker: Option<String>) -> Self {
        let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
        let mut test = TestConfig::new(kind);
        test.config.amqp_url = Some(common::config::Secret::new(
            ingest_broker.unwrap_or_else(amqp_url),
        ));
        test.config.queue_prefix = prefix.clone();
        test.config.relay_interval_ms = 200;
        test.config.relay_grace_ms = 300;
        test.config.broker_timeout_ms = 1000;
        let mut notifier_config = test_notifier_config();
        notifier_config.amqp_url = Some(common::config::Secret::new(amqp_url()));
        notifier_config.queue_prefix = prefix;
        let options = ingest::Options {
            push_provider: None,
            notifier: Some(notifier_config.clone()),
        };
        let app = TestApp::spawn_with_options(test, options).await;
        let (key, _) = app.new_key().await;
        let provider = Arc::new(RecordingProvider::default());
        let mut pipeline = Self {
            app,
            key,
            provider,
            notifier_config,
            notifier: None,
        };
        pipeline.start_notifier();
        pipeline
    }

    fn start_notifier(&mut self) {
        let running = notifier::start(
            &self.notifier_config,
            Arc::clone(&self.app.store),
            self.provider.clone(),
        )
        .expect("notifier starts");
        self.notifier = Some(running);
    }

    async fn stop_notifier(&mut self) {
        if let Some(running) = self.notifier.take() {
            running.shutdown().await;
        }
    }

    async fn register(&self, token: &str, channels: Option<Vec<&str>>) -> Value {
        let mut body = json!({ "token": token, "environment": "sandbox", "name": "phone" });
        if let Some(channels) = channels {
            body["channels"] = json!(channels);
        }
        let reply = Reply::of(self.app.post("/v1/devices", &self.key, &body).await).await;
        assert!(reply.status == 201 || reply.status == 200, "{}", reply.body);
        reply.body["data"].clone()
    }

    async fn event(&self, channel: &str, title: &str, notify: bool) -> Value {
        let body = json!({ "channelName": channel, "title": title, "description": "details", "icon": "🔔", "notify": notify });
        let reply = Reply::of(self.app.post_event(&self.key, &body).await).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        reply.body["data"].clone()
    }

    async fn lookup(&self, id: &str) -> Reply {
        Reply::of(
            self.app
                .client
                .get(self.app.url(&format!("/v1/events/{id}")))
                .bearer_auth(&self.key)
                .send()
                .await
                .expect("sent"),
        )
        .await
    }

    /// Waits until the event's notification reaches `state`.
    async fn settled(&self, id: &str, state: &str) -> Value {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let reply = self.lookup(id).await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            if reply.body["data"]["notification"]["state"] == state {
                return reply.body["data"].clone();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "event never became {state}: {}",
                reply.body
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn finish(mut self) {
        self.stop_notifier().await;
        if let Some(url) = self
            .notifier_config
            .amqp_url
            .as_ref()
            .map(|u| u.expose().to_owned())
        {
            delete_topology(&url, &self.notifier_config).await;
        }
        self.app.stop().await;
    }
}

/// Removes a test's queues and exchanges from the shared broker.
async fn delete_topology(url: &str, config: &notifier::Config) {
    let Some(amqp) = config.amqp() else { return };
    let _ = url;
    let Ok(conn) =
        lapin::Connection::connect(&amqp.url, lapin::ConnectionProperties::default()).await
    else {
        return;
    };
    let Ok(channel) = conn.create_channel().await else {
        return;
    };
    let names: AmqpConfig = amqp;
    for queue in names.queues() {
        let _ = channel.queue_delete(queue.into(), Default::default()).await;
    }
    for exchange in [names.exchange(), names.dead_letter_exchange()] {
        let _ = channel
            .exchange_delete(exchange.into(), Default::default())
            .await;
    }
    let _ = conn.close(200, "done".into()).await;
}

fn token(n: u8) -> String {
    format!("{n:02x}").repeat(32)
}

async fn every_active_device_gets_one_push_and_channel_filters_hold(pipeline: Pipeline) {
    let (a, b, filtered) = (token(1), token(2), token(3));
    pipeline.register(&a, None).await;
    pipeline.register(&b, None).await;
    pipeline.register(&filtered, Some(vec!["deploys"])).await;

    let event = pipeline.event("payments", "Payment received", true).await;
    let id = event["id"].as_str().expect("id").to_owned();
    let settled = pipeline.settled(&id, "delivered").await;
    assert_eq!(
        settled["notification"]["deliveries"]
            .as_array()
            .expect("deliveries")
            .len(),
        2
    );
    let sent = pipeline.provider.sent();
    assert_eq!(sent.len(), 2, "exactly two pushes: {sent:?}");
    for (push, _) in &sent {
        assert!(push.device_token == a || push.device_token == b);
        assert_eq!(push.alert.title, "Payment received");
        assert_eq!(push.alert.body.as_deref(), Some("details"));
        assert_eq!(push.alert.icon.as_deref(), Some("🔔"));
        assert_eq!(push.alert.channel, "payments");
        assert_eq!(push.alert.event_id.to_string(), id);
    }

    let quiet = pipeline.event("payments", "No push please", false).await;
    assert_eq!(quiet["notification"]["state"], "skipped");

    let deploy = pipeline.event("deploys", "Deployed", true).await;
    pipeline
        .settled(deploy["id"].as_str().expect("id"), "delivered")
        .await;
    assert_eq!(
        pipeline.provider.delivered_to(&filtered).len(),
        1,
        "the filtered device gets its channel only"
    );
    assert_eq!(pipeline.provider.delivered_to(&a).len(), 2);
    assert_eq!(
        pipeline.provider.sent().len(),
        5,
        "nothing for notify: false"
    );
    pipeline.finish().await;
}

async fn a_dead_token_deactivates_its_device(pipeline: Pipeline) {
    let (dead, alive) = (token(4), token(5));
    let dead_device = pipeline.register(&dead, None).await;
    pipeline.register(&alive, None).await;
    pipeline.provider.script(
        &dead,
        vec![PushOutcome::DeviceGone {
            reason: "410 Unregistered".into(),
        }],
    );

    let first = pipeline.event("alerts", "First", true).await;
    pipeline
        .settled(first["id"].as_str().expect("id"), "delivered")
        .await;
    let devices = Reply::of(
        pipeline
            .app
            .client
            .get(pipeline.app.url("/v1/devices"))
            .bearer_auth(&pipeline.key)
            .send()
            .await
            .expect("sent"),
    )
    .await;
    let listed = devices.body["data"]["devices"]
        .as_array()
        .expect("devices")
        .clone();
    let dead_now = listed
        .iter()
        .find(|d| d["id"] == dead_device["id"])
        .expect("still listed");
    assert_eq!(dead_now["active"], false);
    assert!(
        dead_now["deactivatedReason"]
            .as_str()
            .expect("reason")
            .contains("Unregistered")
    );

    let second = pipeline.event("alerts", "Second", true).await;
    pipeline
        .settled(second["id"].as_str().expect("id"), "delivered")
        .await;
    let to_dead = pipeline
        .provider
        .sent()
        .into_iter()
        .filter(|(p, _)| p.device_token == dead)
        .count();
    assert_eq!(to_dead, 1, "nothing more is sent to a dead token");
    assert_eq!(pipeline.provider.delivered_to(&alive).len(), 2);
    pipeline.finish().await;
}

async fn transient_failures_are_retried_after_backoff_and_delivered_once(pipeline: Pipeline) {
    let flaky = token(6);
    pipeline.register(&flaky, None).await;
    let unavailable = || PushOutcome::Retry {
        reason: "503 ServiceUnavailable".into(),
        after: None,
    };
    pipeline
        .provider
        .script(&flaky, vec![unavailable(), unavailable()]);
    let event = pipeline.event("alerts", "Flaky", true).await;
    let settled = pipeline
        .settled(event["id"].as_str().expect("id"), "delivered")
        .await;
    let delivery = &settled["notification"]["deliveries"][0];
    assert_eq!(delivery["state"], "delivered");
    assert_eq!(delivery["attempts"], 3);
    assert_eq!(
        pipeline.provider.sent().len(),
        3,
        "two failures, then one delivery"
    );
    assert_eq!(pipeline.provider.delivered_to(&flaky).len(), 1);
    pipeline.finish().await;
}

async fn giving_up_after_the_last_retry_marks_the_delivery_failed(pipeline: Pipeline) {
    let broken = token(7);
    pipeline.register(&broken, None).await;
    let unavailable = || PushOutcome::Retry {
        reason: "500 InternalServerError".into(),
        after: None,
    };
    pipeline.provider.script(
        &broken,
        vec![
            unavailable(),
            unavailable(),
            unavailable(),
            unavailable(),
            unavailable(),
        ],
    );
    let event = pipeline.event("alerts", "Never", true).await;
    let settled = pipeline
        .settled(event["id"].as_str().expect("id"), "failed")
        .await;
    let delivery = &settled["notification"]["deliveries"][0];
    assert_eq!(delivery["state"], "failed");
    assert_eq!(
        delivery["attempts"], 4,
        "the first try and max_retries = 3 retries"
    );
    assert!(
        delivery["error"]
            .as_str()
            .expect("error")
            .contains("gave up")
    );
    pipeline.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_sqlite_pushes_to_every_device() {
    every_active_device_gets_one_push_and_channel_filters_hold(
        Pipeline::embedded(StoreKind::Sqlite).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_mongo_pushes_to_every_device() {
    every_active_device_gets_one_push_and_channel_filters_hold(
        Pipeline::embedded(StoreKind::Mongo).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_pushes_to_every_device() {
    every_active_device_gets_one_push_and_channel_filters_hold(
        Pipeline::with_broker(StoreKind::Mongo, None).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_dead_token_deactivates_its_device() {
    a_dead_token_deactivates_its_device(Pipeline::with_broker(StoreKind::Sqlite, None).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_dead_token_deactivates_its_device() {
    a_dead_token_deactivates_its_device(Pipeline::embedded(StoreKind::Mongo).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_retries_transient_failures() {
    transient_failures_are_retried_after_backoff_and_delivered_once(
        Pipeline::with_broker(StoreKind::Sqlite, None).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_retries_transient_failures() {
    transient_failures_are_retried_after_backoff_and_delivered_once(
        Pipeline::embedded(StoreKind::Sqlite).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_gives_up_after_the_last_retry() {
    giving_up_after_the_last_retry_marks_the_delivery_failed(
        Pipeline::with_broker(StoreKind::Sqlite, None).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_posted_while_the_broker_is_unreachable_are_all_pushed_once_it_returns() {
    let upstream = tokio::net::lookup_host("127.0.0.1:5672")
        .await
        .expect("resolves")
        .next()
        .expect("address");
    let proxy = Proxy::start(upstream).await;
    let through_proxy = amqp_url().replace("127.0.0.1:5672", &proxy.addr().to_string());
    let pipeline = Pipeline::with_broker(StoreKind::Sqlite, Some(through_proxy)).await;
    let device = token(8);
    pipeline.register(&device, None).await;
    proxy.cut();
    let mut ids = Vec::new();
    for i in 0..5 {
        let event = pipeline
            .event("outage", &format!("During outage {i}"), true)
            .await;
        assert_eq!(
            event["notification"]["state"], "pending",
            "accepted, job not yet on the queue"
        );
        ids.push(event["id"].as_str().expect("id").to_owned());
    }
    proxy.restore();
    for id in &ids {
        pipeline.settled(id, "delivered").await;
    }
    let pushed: Vec<String> = pipeline
        .provider
        .delivered_to(&device)
        .iter()
        .map(|p| p.alert.event_id.to_string())
        .collect();
    let mut unique = pushed.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 5, "every event pushed: {pushed:?}");
    assert_eq!(pushed.len(), 5, "none twice: {pushed:?}");
    pipeline.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notifier_replaced_mid_stream_sends_every_push_exactly_once() {
    let mut pipeline = Pipeline::with_broker(StoreKind::Sqlite, None).await;
    let device = token(9);
    pipeline.register(&device, None).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let event = pipeline.event("stream", &format!("Event {i}"), true).await;
        ids.push(event["id"].as_str().expect("id").to_owned());
        if i == 5 {
            pipeline.stop_notifier().await;
        }
    }
    pipeline.start_notifier();
    for id in &ids {
        pipeline.settled(id, "delivered").await;
    }
    let mut pushed: Vec<String> = pipeline
        .provider
        .delivered_to(&device)
        .iter()
        .map(|p| p.alert.event_id.to_string())
        .collect();
    pushed.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(pushed, expected, "each event pushed exactly once");
    pipeline.finish().await;
}

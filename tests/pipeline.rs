//! A notify pipeline for end-to-end tests: ingest, a notifier and the
//! recording push provider, embedded or through RabbitMQ.

use std::{num::NonZeroU64, sync::Arc, time::Duration};

use common::queue::amqp::AmqpConfig;
use serde_json::{Value, json};

use crate::{
    Embedded, Reply, StoreKind, TestApp, TestConfig, amqp_url, recording::RecordingProvider,
    test_notifier_config,
};

/// How long a test waits for the pipeline to settle an event.
pub const WAIT: Duration = Duration::from_secs(30);

/// Ingest, a notifier and a recording push provider, wired the way a test
/// asks for (embedded, or through RabbitMQ with a topology of its own).
pub struct Pipeline {
    pub app: TestApp,
    pub key: String,
    /// The organization and project of `key`.
    pub scope: common::store::Scope,
    pub provider: Arc<RecordingProvider>,
    pub notifier_config: notifier::Config,
    pub notifier: Option<notifier::Running>,
}

impl Pipeline {
    /// Embedded mode: the notifier runs inside ingest.
    pub async fn embedded(kind: StoreKind) -> Self {
        let provider = Arc::new(RecordingProvider::default());
        let embedded = Embedded {
            provider: Some(provider.clone()),
            notifier: test_notifier_config(),
        };
        let app = TestApp::spawn_with_options(TestConfig::new(kind), embedded).await;
        let (key, scope) = app.new_key().await;
        Self {
            app,
            key,
            scope,
            provider,
            notifier_config: test_notifier_config(),
            notifier: None,
        }
    }

    /// Production mode: RabbitMQ between ingest and a notifier, with a queue
    /// prefix of the test's own. `ingest_broker` is where ingest reaches the
    /// broker (a proxy when the test wants to cut it).
    pub async fn with_broker(kind: StoreKind, ingest_broker: Option<String>) -> Self {
        let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
        let mut test = TestConfig::new(kind);
        test.config.backend.amqp_url = Some(common::config::Secret::new(
            ingest_broker.unwrap_or_else(amqp_url),
        ));
        test.config.backend.queue_prefix = prefix.clone();
        test.config.relay_interval_ms = NonZeroU64::new(200).expect("non-zero");
        test.config.relay_grace_ms = 300;
        test.config.backend.broker_timeout_ms = NonZeroU64::new(1000).expect("non-zero");
        let mut notifier_config = test_notifier_config();
        notifier_config.backend.amqp_url = Some(common::config::Secret::new(amqp_url()));
        notifier_config.backend.queue_prefix = prefix;
        let app = TestApp::spawn_with(test).await;
        let (key, scope) = app.new_key().await;
        let provider = Arc::new(RecordingProvider::default());
        let mut pipeline = Self {
            app,
            key,
            scope,
            provider,
            notifier_config,
            notifier: None,
        };
        pipeline.start_notifier().await;
        pipeline
    }

    pub async fn start_notifier(&mut self) {
        let running = notifier::start(
            &self.notifier_config,
            Arc::clone(&self.app.store),
            self.provider.clone(),
        )
        .await
        .expect("notifier starts");
        self.notifier = Some(running);
    }

    pub async fn stop_notifier(&mut self) {
        if let Some(running) = self.notifier.take() {
            running.shutdown().await;
        }
    }

    pub async fn register(&self, token: &str, channels: Option<Vec<&str>>) -> Value {
        let mut body = json!({ "token": token, "environment": "sandbox", "name": "phone" });
        if let Some(channels) = channels {
            body["channels"] = json!(channels);
        }
        let reply = Reply::of(self.app.post("/v1/devices", &self.key, &body).await).await;
        assert!(reply.status == 201 || reply.status == 200, "{}", reply.body);
        reply.body["data"].clone()
    }

    pub async fn event(&self, channel: &str, title: &str, notify: bool) -> Value {
        let body = json!({ "channelName": channel, "title": title, "description": "details", "icon": "🔔", "notify": notify });
        let reply = Reply::of(self.app.post_event(&self.key, &body).await).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        reply.body["data"].clone()
    }

    pub async fn lookup(&self, id: &str) -> Reply {
        Reply::of(
            self.app
                .get_as(&format!("/v1/events/{id}"), &self.key)
                .await,
        )
        .await
    }

    /// Waits until the event's notification reaches `state`.
    pub async fn settled(&self, id: &str, state: &str) -> Value {
        self.app.settled(&self.key, id, state).await
    }

    pub async fn finish(mut self) {
        self.stop_notifier().await;
        delete_topology(&self.notifier_config).await;
        self.app.stop().await;
    }
}

/// Removes a test's queues and exchanges (named by its `queue_prefix`) from
/// the shared broker; nothing to do without a broker.
pub async fn delete_topology(config: &notifier::Config) {
    if let Some(amqp) = config.backend.amqp() {
        delete_queues(&amqp, &config.retry().delays()).await;
    }
}

/// Removes the queues and exchanges of `amqp`'s prefix, with the delay
/// queues of `delays`.
pub async fn delete_queues(amqp: &AmqpConfig, delays: &[Duration]) {
    let Ok(conn) =
        lapin::Connection::connect(&amqp.url, lapin::ConnectionProperties::default()).await
    else {
        return;
    };
    let Ok(channel) = conn.create_channel().await else {
        return;
    };
    for queue in amqp.queues(delays) {
        let _ = channel.queue_delete(queue.into(), Default::default()).await;
    }
    for exchange in [amqp.exchange(), amqp.dead_letter_exchange()] {
        let _ = channel
            .exchange_delete(exchange.into(), Default::default())
            .await;
    }
    let _ = conn.close(200, "done".into()).await;
}

/// A distinct, valid hex device token.
pub fn token(n: u8) -> String {
    format!("{n:02x}").repeat(32)
}

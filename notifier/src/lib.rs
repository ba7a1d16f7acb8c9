//! Tocsin notifier: consumes notify jobs, sends one push per connected
//! device, records each delivery, retries what can be retried.
//!
//! A job goes: the queue's consumer ([`common::queue::JobConsumer`]) →
//! [`worker`] (the consume loop) → [`deliver`] (what one job does) → a
//! provider in [`push`]. [`retry`] decides, for all of them, what is tried
//! again and when. [`metrics`] is what is counted and [`http`] the port
//! that serves it with the health checks. [`Worker`] runs that chain on any
//! queue pair: the RabbitMQ one of a `notifier` process ([`serve`], which
//! the binary runs, and [`start`], which the tests run on a store of their
//! own), or the in-process one of ingest's embedded mode ([`Embedded`],
//! which ingest's composition starts).

mod batch;
mod config;
pub mod deliver;
pub mod destinations;
pub mod guarded;
mod http;
pub mod metrics;
pub mod push;
mod recipients;
pub mod retry;
pub mod worker;

use std::{net::SocketAddr, sync::Arc};

use async_trait::async_trait;
use common::{
    embedded::{EmbeddedWorker, RunningWorker, WebPushSettings, WorkerParts},
    queue::{self, JobConsumer, JobQueue, QueueConfig, Readiness},
    store::Store,
};
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
};

pub use config::Config;
pub use config::destinations::{
    sender_settings as destination_sender_settings, senders as destination_senders,
    tester as destination_tester,
};
use deliver::Deliverer;
use metrics::NotifierMetrics;
use push::PushProvider;

/// Builds the delivery logic from settings and shared parts. Destinations'
/// settings are opened with `secrets_key`; their senders are the ones the
/// settings make.
fn deliverer(
    config: &Config,
    store: Arc<dyn Store>,
    provider: Arc<dyn PushProvider>,
    secrets_key: Option<common::sealed::SecretsKey>,
    queue: Arc<dyn JobQueue>,
    metrics: NotifierMetrics,
) -> anyhow::Result<Arc<Deliverer>> {
    Ok(Arc::new(Deliverer::new(deliver::Parts {
        store,
        provider,
        destinations: Arc::new(destination_senders(&config.backend)?),
        secrets_key,
        queue,
        retry: config.retry(),
        lease: config.lease(),
        clock: common::time::Clock::System,
        metrics,
        max_in_flight: config.max_in_flight,
        device_cache: std::time::Duration::from_millis(config.device_cache_ms),
    })))
}

/// A worker consuming one end of a queue pair and publishing its retries
/// through the other.
pub struct Worker {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    readiness: Readiness,
}

impl Worker {
    /// Starts `consumer` with the configured prefetch and retry delays and
    /// runs jobs from it, pushing through `provider` and opening
    /// destinations' settings with `secrets_key`; retries are published
    /// through `queue`, the producer of the consumer's pair.
    pub fn start(
        config: &Config,
        store: Arc<dyn Store>,
        provider: Arc<dyn PushProvider>,
        secrets_key: Option<common::sealed::SecretsKey>,
        (queue, mut consumer): (Arc<dyn JobQueue>, Box<dyn JobConsumer>),
        metrics: NotifierMetrics,
    ) -> anyhow::Result<Self> {
        let deliverer = deliverer(config, store, provider, secrets_key, queue, metrics)?;
        consumer.start(config.consume());
        let readiness = consumer.readiness();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(worker::run(
            deliverer,
            consumer,
            config.concurrency,
            stopped,
        ));
        Ok(Self {
            stop,
            task,
            readiness,
        })
    }

    /// Whether the consumer is taking jobs now.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// Stops consuming, gives back jobs not started, finishes the ones in
    /// hand, and closes the consumer.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

#[async_trait]
impl RunningWorker for Worker {
    async fn stop(self: Box<Self>) {
        Worker::stop(*self).await;
    }
}

/// The notifier as ingest's embedded mode runs it: a [`Worker`] in ingest's
/// process, on the in-process queue, with the notifier's own settings.
pub struct Embedded {
    config: Config,
    /// The provider pushes go through; the one the settings select when
    /// `None`.
    provider: Option<Arc<dyn PushProvider>>,
}

impl Embedded {
    /// With the settings of the environment (`NOTIFIER_*`, `APNS_*`, ...).
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self::new(Config::load(None)?, None))
    }

    /// With these settings, pushing through `provider` (tests pass a
    /// recording one) or, when `None`, the one the settings select.
    pub fn new(config: Config, provider: Option<Arc<dyn PushProvider>>) -> Self {
        Self { config, provider }
    }
}

impl EmbeddedWorker for Embedded {
    fn web_push(&self) -> anyhow::Result<WebPushSettings> {
        Ok(WebPushSettings {
            public_key: self.config.vapid_public_key()?,
            allowed_endpoints: self.config.webpush_allowed_endpoints.clone(),
        })
    }

    fn start(self: Box<Self>, parts: WorkerParts<'_>) -> anyhow::Result<Box<dyn RunningWorker>> {
        let provider = match self.provider {
            Some(provider) => provider,
            None => self.config.push_provider()?,
        };
        Ok(Box::new(Worker::start(
            &self.config,
            parts.store,
            provider,
            // Ingest's key: its data directory's, when it makes one.
            parts.secrets_key,
            (parts.producer, parts.consumer),
            NotifierMetrics::register(parts.registry),
        )?))
    }
}

/// A notifier consuming from RabbitMQ: the worker, and the metrics and
/// health port.
pub struct Running {
    worker: Worker,
    http: JoinHandle<()>,
    http_stop: oneshot::Sender<()>,
    http_addr: SocketAddr,
}

impl Running {
    /// The address of `/metrics`, `/healthz` and `/readyz`.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// Stops the worker and closes the connection. The metrics port closes
    /// last, so the final counts can be scraped until then.
    pub async fn shutdown(self) {
        self.worker.stop().await;
        let _ = self.http_stop.send(());
        let _ = self.http.await;
    }
}

/// Starts consuming from the broker with `provider` (tests pass a recording
/// provider; the binary passes the configured one), and serves the metrics
/// and health endpoints on the configured `listen` address.
pub async fn start(
    config: &Config,
    store: Arc<dyn Store>,
    provider: Arc<dyn PushProvider>,
) -> anyhow::Result<Running> {
    let amqp = config
        .backend
        .amqp()
        .ok_or_else(|| anyhow::anyhow!("AMQP_URL is required to run the notifier"))?;
    let bound = http::bind(config.listen_addr()?).await?;
    let http_addr = bound.addr;
    tracing::info!(addr = %http_addr, "metrics and health endpoints listening");
    let mut registry = common::metrics::registry();
    let metrics = NotifierMetrics::register(&mut registry);
    let pair = queue::open(&QueueConfig::Amqp(amqp));
    let secrets_key = config.backend.secrets_key()?;
    let worker = Worker::start(
        config,
        Arc::clone(&store),
        provider,
        secrets_key,
        pair,
        metrics,
    )?;
    let probe = http::Probe {
        registry: Arc::new(registry),
        store,
        consuming: worker.readiness(),
    };
    let (http_stop, http_stopped) = oneshot::channel();
    let http = tokio::spawn(http::serve(bound, probe, async move {
        let _ = http_stopped.await;
    }));
    Ok(Running {
        worker,
        http,
        http_stop,
        http_addr,
    })
}

/// Runs a notifier process until SIGTERM or Ctrl-C: opens the store and
/// the provider the settings select, and consumes from the broker.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let store = config.backend.open_store().await?;
    let provider = config.push_provider()?;
    let running = start(&config, store, provider).await?;
    tracing::info!("notifier started");
    common::shutdown::signal().await;
    tracing::info!("stopping: finishing the jobs in hand");
    running.shutdown().await;
    tracing::info!("notifier stopped");
    Ok(())
}

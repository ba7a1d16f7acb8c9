//! Tocsin notifier: consumes notify jobs, sends one push per connected
//! device, records each delivery, retries what can be retried.
//!
//! A job goes: the queue's consumer ([`common::queue::JobConsumer`]) →
//! [`worker`] (the consume loop) → [`deliver`] (what one job does) → a
//! provider in [`push`]. [`retry`] decides, for all of them, what is tried
//! again and when. [`metrics`] is what is counted and [`http`] the port
//! that serves it with the health checks. [`Worker`] runs that chain on any
//! queue pair: the `notifier` binary's RabbitMQ one ([`start`]), or the
//! in-process one that ingest's binary wires in embedded mode.

mod batch;
mod config;
pub mod deliver;
mod devices;
mod http;
pub mod metrics;
pub mod push;
pub mod retry;
pub mod worker;

use std::{net::SocketAddr, sync::Arc};

use common::{
    queue::{self, JobConsumer, JobQueue, QueueConfig, Readiness},
    store::Store,
};
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
};

pub use config::Config;
use deliver::Deliverer;
use metrics::NotifierMetrics;
use push::PushProvider;

/// Builds the delivery logic from settings and shared parts.
fn deliverer(
    config: &Config,
    store: Arc<dyn Store>,
    provider: Arc<dyn PushProvider>,
    queue: Arc<dyn JobQueue>,
    metrics: NotifierMetrics,
) -> Arc<Deliverer> {
    Arc::new(Deliverer::new(deliver::Parts {
        store,
        provider,
        queue,
        retry: config.retry(),
        lease: config.lease(),
        clock: common::time::Clock::System,
        metrics,
        max_in_flight: config.max_in_flight,
        device_cache: std::time::Duration::from_millis(config.device_cache_ms),
    }))
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
    /// runs jobs from it, pushing through `provider`; retries are published
    /// through `queue`, the producer of the consumer's pair.
    pub fn start(
        config: &Config,
        store: Arc<dyn Store>,
        provider: Arc<dyn PushProvider>,
        (queue, mut consumer): (Arc<dyn JobQueue>, Box<dyn JobConsumer>),
        metrics: NotifierMetrics,
    ) -> Self {
        let deliverer = deliverer(config, store, provider, queue, metrics);
        consumer.start(config.consume());
        let readiness = consumer.readiness();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(worker::run(
            deliverer,
            consumer,
            config.concurrency,
            stopped,
        ));
        Self {
            stop,
            task,
            readiness,
        }
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
    let worker = Worker::start(config, Arc::clone(&store), provider, pair, metrics);
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

//! Tocsin notifier: consumes notify jobs, sends one push per connected
//! device, records each delivery, retries what can be retried.
//!
//! [`worker`] is the consume loop, [`deliver`] what one job does, [`push`]
//! the providers, [`metrics`] what is counted and [`http`] the port that
//! serves it with the health checks. The same code runs as the `notifier` binary (RabbitMQ) and
//! inside ingest in embedded mode (in-process queue), see [`spawn`].

pub mod config;
pub mod deliver;
pub mod http;
pub mod metrics;
pub mod push;
pub mod worker;

use std::{
    net::SocketAddr,
    sync::{Arc, atomic::AtomicBool},
    time::Duration,
};

use common::{
    queue::{JobQueue, amqp::AmqpQueue},
    store::Store,
};
use tokio::{
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
};

pub use config::Config;
use deliver::Deliverer;
use metrics::NotifierMetrics;
use push::PushProvider;
use worker::Inbox;

/// Builds the delivery logic from settings and shared parts.
pub fn deliverer(
    config: &Config,
    store: Arc<dyn Store>,
    provider: Arc<dyn PushProvider>,
    queue: Arc<dyn JobQueue>,
    metrics: NotifierMetrics,
) -> Arc<Deliverer> {
    Arc::new(Deliverer {
        store,
        provider,
        queue,
        retry: config.retry(),
        lease: Duration::from_secs(config.stale_claim_seconds),
        clock: common::time::Clock::System,
        metrics,
    })
}

/// Runs a worker on `inbox` until `stop` turns true.
pub fn spawn(
    config: &Config,
    deliverer: Arc<Deliverer>,
    inbox: Inbox,
    stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(worker::run(deliverer, inbox, config.concurrency, stop))
}

/// A notifier consuming from RabbitMQ: the consumer task, the worker, and
/// the metrics and health port.
pub struct Running {
    stop: watch::Sender<bool>,
    consumer: JoinHandle<()>,
    worker: JoinHandle<()>,
    http: JoinHandle<()>,
    http_stop: oneshot::Sender<()>,
    http_addr: SocketAddr,
}

impl Running {
    /// The address of `/metrics`, `/healthz` and `/readyz`.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// Stops consuming, gives back jobs not started, finishes the ones in
    /// hand, and closes the connection. The metrics port closes last, so
    /// the final counts can be scraped until then.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.worker.await;
        let _ = self.consumer.await;
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
        .amqp()
        .ok_or_else(|| anyhow::anyhow!("AMQP_URL is required to run the notifier"))?;
    let bound = http::bind(config.listen_addr()?).await?;
    let http_addr = bound.addr;
    tracing::info!(addr = %http_addr, "metrics and health endpoints listening");
    let mut registry = common::metrics::registry();
    let metrics = NotifierMetrics::register(&mut registry);
    let consuming = Arc::new(AtomicBool::new(false));
    let probe = http::Probe {
        registry: Arc::new(registry),
        store: Arc::clone(&store),
        consuming: Arc::clone(&consuming),
    };

    let queue: Arc<dyn JobQueue> = Arc::new(AmqpQueue::new(amqp.clone()));
    let deliverer = deliverer(config, store, provider, queue, metrics);
    let (stop, stopped) = watch::channel(false);
    let (tx, rx) = mpsc::channel(usize::from(config.prefetch).max(1));
    let consumer = tokio::spawn(common::queue::amqp::consume(
        amqp,
        config.prefetch,
        tx,
        consuming,
        stopped.clone(),
    ));
    let worker = spawn(config, deliverer, Inbox::Bounded(rx), stopped);
    let (http_stop, http_stopped) = oneshot::channel();
    let http = tokio::spawn(http::serve(bound, probe, async move {
        let _ = http_stopped.await;
    }));
    Ok(Running {
        stop,
        consumer,
        worker,
        http,
        http_stop,
        http_addr,
    })
}

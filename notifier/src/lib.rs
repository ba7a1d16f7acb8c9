//! Tocsin notifier: consumes notify jobs, sends one push per connected
//! device, records each delivery, retries what can be retried.
//!
//! [`worker`] is the consume loop, [`deliver`] what one job does, [`push`]
//! the providers. The same code runs as the `notifier` binary (RabbitMQ) and
//! inside ingest in embedded mode (in-process queue), see [`spawn`].

pub mod config;
pub mod deliver;
pub mod push;
pub mod worker;

use std::{sync::Arc, time::Duration};

use common::{
    queue::{JobQueue, amqp::AmqpQueue},
    store::Store,
};
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};

pub use config::Config;
use deliver::Deliverer;
use push::PushProvider;
use worker::Inbox;

/// Builds the delivery logic from settings and shared parts.
pub fn deliverer(
    config: &Config,
    store: Arc<dyn Store>,
    provider: Arc<dyn PushProvider>,
    queue: Arc<dyn JobQueue>,
) -> Arc<Deliverer> {
    Arc::new(Deliverer {
        store,
        provider,
        queue,
        retry: config.retry(),
        stale_claim: Duration::from_secs(config.stale_claim_seconds),
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

/// A notifier consuming from RabbitMQ: the consumer task and the worker.
pub struct Running {
    stop: watch::Sender<bool>,
    consumer: JoinHandle<()>,
    worker: JoinHandle<()>,
}

impl Running {
    /// Stops consuming, gives back jobs not started, finishes the ones in
    /// hand, and closes the connection.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.worker.await;
        let _ = self.consumer.await;
    }
}

/// Starts consuming from the broker with `provider` (tests pass a recording
/// provider; the binary passes the configured one).
pub fn start(
    config: &Config,
    store: Arc<dyn Store>,
    provider: Arc<dyn PushProvider>,
) -> anyhow::Result<Running> {
    let amqp = config
        .amqp()
        .ok_or_else(|| anyhow::anyhow!("AMQP_URL is required to run the notifier"))?;
    let queue: Arc<dyn JobQueue> = Arc::new(AmqpQueue::new(amqp.clone()));
    let deliverer = deliverer(config, store, provider, queue);
    let (stop, stopped) = watch::channel(false);
    let (tx, rx) = mpsc::channel(usize::from(config.prefetch).max(1));
    let consumer = tokio::spawn(common::queue::amqp::consume(
        amqp,
        config.prefetch,
        tx,
        stopped.clone(),
    ));
    let worker = spawn(config, deliverer, Inbox::Bounded(rx), stopped);
    Ok(Running {
        stop,
        consumer,
        worker,
    })
}

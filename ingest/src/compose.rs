//! The composition root of an ingest process, shared by the `ingest`
//! binary and the tests, so the tests run the service as users do. It
//! opens the store and the queue pair the settings select and gives the
//! API ([`Application`]) the producer end:
//!
//! - with a broker (`AMQP_URL`), jobs go to RabbitMQ and `notifier`
//!   processes elsewhere consume them; the consumer end is not used here;
//! - without one (embedded mode), the [`EmbeddedWorker`] the caller passes
//!   runs in this process on the consumer end of an in-process pair, its
//!   Web Push settings are the API's where the API has none, and its
//!   metrics are served with the API's on one `/metrics`.
//!
//! This library never depends on the notifier (Cargo forbids the cycle with
//! ingest's binary): the binary and the tests pass `notifier::Embedded`.

use std::{future::Future, net::SocketAddr, sync::Arc};

use common::{
    config::Backend,
    embedded::{DestinationTester, EmbeddedWorker, RunningWorker, WorkerParts},
    queue,
    store::Store,
};

use crate::{Application, Config};

/// Runs the service until SIGTERM or Ctrl-C, on the store the settings
/// select; `embedded` makes the worker of the embedded mode (called only in
/// that mode, so its settings are read only when they matter), and
/// `tester` the senders a destination's "send test" goes through.
pub async fn serve<W: EmbeddedWorker + 'static>(
    config: Config,
    embedded: impl FnOnce() -> anyhow::Result<W>,
    tester: impl FnOnce(&Backend) -> anyhow::Result<Arc<dyn DestinationTester>>,
) -> anyhow::Result<()> {
    let store = open_store(&config).await?;
    let tester = tester(&config.backend)?;
    Service::build(config, store, embedded, tester)
        .await?
        .run_until(common::shutdown::signal())
        .await
}

/// Opens the store the settings select and logs which (without the
/// connection string).
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let store = config.backend.open_store().await?;
    tracing::info!(store = %config.backend.store().describe(), "store opened");
    Ok(store)
}

/// The API, bound and ready to serve, and in embedded mode the worker
/// beside it.
pub struct Service {
    app: Application,
    worker: Option<Box<dyn RunningWorker>>,
}

impl Service {
    /// Opens the queue pair, starts the embedded worker when there is no
    /// broker, and builds the API on `store`.
    pub async fn build<W: EmbeddedWorker + 'static>(
        mut config: Config,
        store: Arc<dyn Store>,
        embedded: impl FnOnce() -> anyhow::Result<W>,
        tester: Arc<dyn DestinationTester>,
    ) -> anyhow::Result<Self> {
        let mut registry = common::metrics::registry();
        let (producer, consumer) = queue::open(&config.backend.queue());
        let worker = if config.backend.amqp().is_some() {
            tracing::info!(prefix = %config.backend.queue_prefix, "notify jobs go to RabbitMQ");
            None
        } else {
            let worker = Box::new(embedded()?);
            let web_push = worker.web_push()?;
            config.adopt_webpush(web_push.public_key, &web_push.allowed_endpoints);
            config.webpush_allowed()?;
            tracing::info!("embedded mode: notifications go through an in-process queue");
            Some(worker.start(WorkerParts {
                store: Arc::clone(&store),
                secrets_key: config.backend.secrets_key()?,
                producer: Arc::clone(&producer),
                consumer,
                registry: &mut registry,
            })?)
        };
        let app = Application::build(config, store, producer, registry, tester).await?;
        Ok(Self { app, worker })
    }

    /// The address actually bound (useful after asking for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.app.addr()
    }

    /// The settings the API runs with (the embedded worker's Web Push
    /// settings adopted).
    pub fn config(&self) -> &Config {
        self.app.config()
    }

    /// Serves until `shutdown` resolves; then the worker finishes the jobs
    /// in hand, once the API has stopped publishing.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let served = self.app.run_until(shutdown).await;
        if let Some(worker) = self.worker {
            worker.stop().await;
        }
        served
    }
}

//! The composition root of the `ingest` process, and the only place that
//! knows the notifier. It opens the store and the queue pair the settings
//! select and gives the API ([`ingest::Application`]) the producer end:
//!
//! - with a broker (`AMQP_URL`), jobs go to RabbitMQ and `notifier`
//!   processes elsewhere consume them; the consumer end is not used here;
//! - without one (embedded mode), a notifier worker runs in this process on
//!   the consumer end of an in-process pair, with the notifier's own
//!   settings (`NOTIFIER_*`, `APNS_*`), and its metrics are served with the
//!   API's on one `/metrics`.

use std::sync::Arc;

use anyhow::Context as _;
use common::{queue, store::Store};
use ingest::{Application, Config};
use notifier::metrics::NotifierMetrics;

/// Runs the service until SIGTERM or Ctrl-C.
pub async fn serve(mut config: Config) -> anyhow::Result<()> {
    let store = open_store(&config).await?;
    let mut registry = common::metrics::registry();
    let (producer, consumer) = queue::open(&config.backend.queue());
    let worker = if config.backend.amqp().is_some() {
        tracing::info!(prefix = %config.backend.queue_prefix, "notify jobs go to RabbitMQ");
        None
    } else {
        let settings = notifier::Config::load(None)?;
        config.adopt_webpush(
            settings.vapid_public_key()?,
            &settings.webpush_allowed_endpoints,
        );
        config.webpush_allowed()?;
        let provider = settings.push_provider()?;
        tracing::info!("embedded mode: notifications go through an in-process queue");
        Some(notifier::Worker::start(
            &settings,
            Arc::clone(&store),
            provider,
            (Arc::clone(&producer), consumer),
            NotifierMetrics::register(&mut registry),
        ))
    };
    let app = Application::build(config, store, producer, registry).await?;
    app.run_until(common::shutdown::signal()).await?;
    // The API has stopped publishing: the worker finishes the jobs in hand.
    if let Some(worker) = worker {
        worker.stop().await;
    }
    Ok(())
}

/// Opens the store, saying where it is without the connection string (it
/// may hold credentials).
async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let store_config = config.backend.store();
    let store = common::store::open(&store_config, config.backend.store_timeout())
        .await
        .with_context(|| format!("opening the {}", store_config.describe()))?;
    tracing::info!(store = %store_config.describe(), "store opened");
    Ok(store)
}

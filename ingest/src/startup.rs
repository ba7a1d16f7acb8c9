//! Building and running the service: `Application::build` opens the store and
//! binds the listener (so tests can ask for port 0 and read the real port),
//! `run_until_stopped` serves until a shutdown signal.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use poem::{
    EndpointExt, Route,
    endpoint::make_sync,
    get,
    web::{Html, Json},
};
use serde_json::Value;

use common::{
    metrics::Registry,
    queue::{
        JobQueue,
        amqp::{AmqpConfig, AmqpQueue},
    },
    store::StoreConfig,
};
use notifier::{metrics::NotifierMetrics, push::PushProvider, worker::Inbox};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

use crate::{
    allow::{AllowedMethods, allow},
    api::{devices::DevicesApi, events::EventsApi, health::HealthApi, identify::IdentifyApi},
    body_limit::limit_body,
    config::Config,
    gate::gate,
    header_limit::{HeaderLimits, limit_headers},
    idempotency::idempotency,
    metrics::{self, IngestMetrics, RequestObserver, Routes},
    openapi,
    outbox::Outbox,
    request_id::request_id,
    server,
    state::AppState,
    validation::SchemaValidators,
};

/// Choices made by the embedder rather than by configuration.
#[derive(Default)]
pub struct Options {
    /// The push provider of the embedded notifier; by default the one the
    /// notifier's settings select (APNs, or logging without credentials).
    pub push_provider: Option<Arc<dyn PushProvider>>,
    /// The embedded notifier's settings; by default read from the
    /// environment like the standalone notifier's.
    pub notifier: Option<notifier::Config>,
}

/// A bound, ready-to-serve ingest.
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    state: Arc<AppState>,
    app: poem::endpoint::BoxEndpoint<'static, poem::Response>,
    stop: watch::Sender<bool>,
    background: Vec<JoinHandle<()>>,
}

impl Application {
    /// Opens the store (creating indexes or tables) and binds the listener.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        Self::build_with(config, Options::default()).await
    }

    /// Like [`Application::build`], with the embedder's choices.
    pub async fn build_with(config: Config, options: Options) -> anyhow::Result<Self> {
        let addr = config.listen_addr()?;
        let store_config = config.store();
        let store = common::store::open(&store_config, config.store_timeout())
            .await
            .context("opening the store")?;
        // Where things go, without the connection strings (credentials).
        match &store_config {
            StoreConfig::Mongo { database, .. } => {
                tracing::info!(store = "mongodb", database = %database, "store opened");
            }
            StoreConfig::Sqlite { path, .. } => {
                tracing::info!(store = "sqlite", path = %path.display(), "store opened");
            }
        }
        let (stop, stopped) = watch::channel(false);
        let mut background = Vec::new();
        let mut registry = common::metrics::registry();
        let metrics = IngestMetrics::register(&mut registry);
        let queue: Arc<dyn JobQueue> = match config.amqp_url() {
            Some(url) => {
                tracing::info!(prefix = %config.queue_prefix, "notify jobs go to RabbitMQ");
                Arc::new(AmqpQueue::new(AmqpConfig {
                    url: url.to_owned(),
                    prefix: config.queue_prefix.clone(),
                    timeout: Duration::from_millis(config.broker_timeout_ms),
                    retry: options.notifier.as_ref().map_or_else(
                        || notifier::Config::defaults().retry(),
                        notifier::Config::retry,
                    ),
                }))
            }
            None => {
                let notifier_config = match options.notifier {
                    Some(c) => c,
                    None => notifier::Config::load(None)?,
                };
                let provider = match options.push_provider {
                    Some(p) => p,
                    None => notifier_config.push_provider()?,
                };
                let (local, rx) = common::queue::local::channel();
                let local: Arc<dyn JobQueue> = Arc::new(local);
                let deliverer = notifier::deliverer(
                    &notifier_config,
                    Arc::clone(&store),
                    provider,
                    Arc::clone(&local),
                    // One process, one /metrics: the embedded notifier's
                    // counters are served with ingest's.
                    NotifierMetrics::register(&mut registry),
                );
                background.push(notifier::spawn(
                    &notifier_config,
                    deliverer,
                    Inbox::Unbounded(rx),
                    stopped.clone(),
                ));
                tracing::info!("embedded mode: notifications go through an in-process queue");
                local
            }
        };
        let outbox = Arc::new(Outbox::new(
            Arc::clone(&store),
            Arc::clone(&queue),
            metrics.clone(),
            config.relay_times(),
        ));
        if config.amqp_url().is_none() {
            // Nothing survives in an in-process queue: whatever a previous
            // run left unfinished is queued again, the whole backlog.
            outbox.recover().await;
        }
        background.push(tokio::spawn(
            Arc::clone(&outbox).run_relay(Duration::from_millis(config.relay_interval_ms), stopped),
        ));
        let state = Arc::new(AppState::new(config, store, outbox, metrics));
        let app = routes(Arc::clone(&state), Arc::new(registry))?;
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let addr = listener
            .local_addr()
            .context("the listener has no address")?;
        Ok(Self {
            listener,
            addr,
            state,
            app,
            stop,
            background,
        })
    }

    /// The address actually bound (useful after asking for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn state(&self) -> Arc<AppState> {
        Arc::clone(&self.state)
    }

    /// Serves until `shutdown` resolves, then gives in-flight requests the
    /// configured grace period.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let sweeper = tokio::spawn(sweep_rate_limits(Arc::clone(&self.state)));
        tracing::info!(addr = %self.addr, "ingest listening");
        server::serve(
            self.listener,
            Arc::new(self.app),
            self.state.config.server(),
            self.state.metrics.open_connections.clone(),
            shutdown,
        )
        .await;
        sweeper.abort();
        // Requests are done (or out of time): the relay flushes what they
        // left pending and stops, the embedded notifier finishes the jobs in
        // hand.
        let _ = self.stop.send(true);
        for task in self.background {
            let _ = task.await;
        }
        Ok(())
    }

    /// Serves until SIGTERM or Ctrl-C.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        self.run_until(shutdown_signal()).await
    }
}

/// Every route and the middleware around them, outermost last.
fn routes(
    state: Arc<AppState>,
    registry: Arc<Registry>,
) -> anyhow::Result<poem::endpoint::BoxEndpoint<'static, poem::Response>> {
    let service = openapi::service((
        EventsApi {
            state: Arc::clone(&state),
        },
        IdentifyApi {
            state: Arc::clone(&state),
        },
        DevicesApi {
            state: Arc::clone(&state),
        },
        HealthApi {
            state: Arc::clone(&state),
        },
    ));
    let document = openapi::document(&service);
    let validators = Arc::new(SchemaValidators::from_openapi(&document)?);
    // poem-openapi's Scalar page embeds its own 3.0 document; serve it with
    // the published 3.1 one instead, so the page shows what clients get.
    let docs_html = Html(
        service
            .scalar_html()
            .replacen(&service.spec(), &document.to_string(), 1),
    );
    const EXTRA_ROUTES: [&str; 3] = ["/openapi.json", "/docs", "/metrics"];
    let observer = Arc::new(RequestObserver {
        metrics: state.metrics.clone(),
        routes: Routes::new(
            document["paths"]
                .as_object()
                .into_iter()
                .flat_map(|paths| paths.keys().cloned())
                .chain(EXTRA_ROUTES.map(String::from)),
        ),
    });
    let allowed = Arc::new(AllowedMethods::new(&document, &EXTRA_ROUTES));
    let document = Arc::new(document);
    let max_body = state.config.max_body_bytes;
    let header_limits = HeaderLimits {
        max_headers: state.config.max_headers,
        max_bytes: state.config.max_header_bytes,
    };
    let (s1, s2, s3) = (Arc::clone(&state), Arc::clone(&state), Arc::clone(&state));
    let app = Route::new()
        .at(
            "/openapi.json",
            get(make_sync(move |_| Json(Value::clone(&document)))),
        )
        .at("/docs", get(make_sync(move |_| docs_html.clone())))
        .at(
            "/metrics",
            get(poem::endpoint::make(move |_| {
                metrics::scrape(
                    Arc::clone(&registry),
                    s3.metrics.clone(),
                    Arc::clone(&s3.store),
                )
            })),
        )
        .nest("/", service)
        .data(validators)
        .around(move |ep, req| idempotency(ep, req, Arc::clone(&s1)))
        .around(move |ep, req| allow(ep, req, Arc::clone(&allowed)))
        .around(move |ep, req| limit_body(ep, req, max_body))
        .around(move |ep, req| limit_headers(ep, req, header_limits))
        .around(move |ep, req| gate(ep, req, Arc::clone(&s2)))
        .around(move |ep, req| request_id(ep, req, Arc::clone(&observer)))
        .map_to_response()
        .boxed();
    Ok(app)
}

/// Keeps per-address limiter memory bounded by recent clients.
async fn sweep_rate_limits(state: Arc<AppState>) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tick.tick().await;
        state.rate_limits.forget_idle();
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received");
}

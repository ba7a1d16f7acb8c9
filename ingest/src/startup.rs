//! Building and running the API: `Application::build` takes the store, the
//! queue's producer and the metrics registry it is given (the composition
//! root, `compose.rs`, makes them), starts the outbox relay and
//! binds the listener (so tests can ask for port 0 and read the real port);
//! `run_until` serves until a shutdown signal.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use poem::{
    EndpointExt, Route,
    endpoint::make_sync,
    get,
    web::{Html, Json},
};
use serde_json::Value;

use common::{metrics::Registry, queue::JobQueue, store::Store};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

use crate::{
    allow::{AllowedMethods, allow},
    api::{
        channels::ChannelsApi, devices::DevicesApi, events::EventsApi, health::HealthApi,
        identify::IdentifyApi, insights::InsightsApi, stats::StatsApi, stream::StreamApi,
    },
    auth::authentication,
    body_limit::limit_body,
    config::Config,
    cors::{Cors, cors},
    header_limit::limit_headers,
    idempotency::idempotency,
    metrics::{self, IngestMetrics, RequestObserver, Routes},
    openapi,
    outbox::Outbox,
    pages::{self, Pages},
    query::{QueryRules, check_query},
    rate_limit::rate_limit,
    request_id::request_id,
    scope::scope,
    server,
    state::AppState,
    validation::SchemaValidators,
};

/// A bound, ready-to-serve ingest.
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    state: Arc<AppState>,
    app: poem::endpoint::BoxEndpoint<'static, poem::Response>,
    stop: watch::Sender<bool>,
    /// The outbox relay, then the tail, the last-use writer and retention,
    /// each stopped by `stop`.
    background: Vec<JoinHandle<()>>,
}

impl Application {
    /// Registers ingest's metrics in `registry` (served at `/metrics`, with
    /// whatever else the caller registered there), starts the outbox relay
    /// on `queue`, and binds the listener.
    pub async fn build(
        config: Config,
        store: Arc<dyn Store>,
        queue: Arc<dyn JobQueue>,
        mut registry: Registry,
        tester: Arc<dyn common::embedded::DestinationTester>,
    ) -> anyhow::Result<Self> {
        let addr = config.listen_addr()?;
        let metrics = IngestMetrics::register(&mut registry);
        let (stop, stopped) = watch::channel(false);
        let outbox = Arc::new(Outbox::new(
            Arc::clone(&store),
            Arc::clone(&queue),
            metrics.clone(),
            config.relay_times(),
        ));
        if !queue.is_durable() {
            // Nothing survives in this queue: whatever a previous run left
            // unfinished is queued again, the whole backlog.
            outbox.recover().await;
        }
        let mut background = vec![tokio::spawn(
            Arc::clone(&outbox).run_relay(config.relay_interval(), stopped.clone()),
        )];
        let state = Arc::new(AppState::new(config, store, outbox, metrics, tester)?);
        background.push(tokio::spawn(
            Arc::clone(&state.tail).run(state.config.stream_poll_interval()),
        ));
        background.push(tokio::spawn(Arc::clone(&state.last_used).run(
            Arc::clone(&state.store),
            Duration::from_millis(state.config.last_used_flush_ms.get()),
            stopped.clone(),
        )));
        if let Some(retention) = state.config.retention() {
            background.push(tokio::spawn(retention.run(
                Arc::clone(&state.store),
                state.metrics.clone(),
                stopped,
            )));
        }
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

    /// The settings it runs with.
    pub fn config(&self) -> &Config {
        &self.state.config
    }

    /// Every route and its middleware, as the server calls them: for
    /// driving the API without a socket (`crate::fuzzing`).
    pub(crate) fn endpoint(&self) -> &poem::endpoint::BoxEndpoint<'static, poem::Response> {
        &self.app
    }

    /// Serves until `shutdown` resolves, then gives in-flight requests the
    /// configured grace period.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let sweeper = tokio::spawn(sweep_rate_limits(Arc::clone(&self.state)));
        tracing::info!(addr = %self.addr, "ingest listening");
        let tail = Arc::clone(&self.state.tail);
        let shutdown = async move {
            shutdown.await;
            // Live streams never finish by themselves: end them, so their
            // connections close within the grace period like the rest.
            tail.close();
        };
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
        // left pending and stops, and so do the other background tasks.
        self.state.tail.close();
        let _ = self.stop.send(true);
        for task in self.background {
            let _ = task.await;
        }
        Ok(())
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
        InsightsApi {
            state: Arc::clone(&state),
        },
        DevicesApi {
            state: Arc::clone(&state),
        },
        ChannelsApi {
            state: Arc::clone(&state),
        },
        StatsApi {
            state: Arc::clone(&state),
        },
        StreamApi {
            state: Arc::clone(&state),
        },
        HealthApi {
            state: Arc::clone(&state),
        },
        crate::admin::apis(&state),
    ));
    let document = openapi::document(&service);
    let validators = Arc::new(SchemaValidators::from_openapi(&document)?);
    // The page shows the published 3.1 document, what clients get.
    let docs_html = Html(openapi::docs_page(&service, &document));
    const EXTRA_ROUTES: [&str; 3] = ["/openapi.json", "/docs", "/metrics"];
    let extra_routes: Vec<&str> = EXTRA_ROUTES.into_iter().chain(pages::ROUTES).collect();
    let observer = Arc::new(RequestObserver {
        metrics: state.metrics.clone(),
        routes: Routes::new(
            document["paths"]
                .as_object()
                .into_iter()
                .flat_map(|paths| paths.keys().cloned())
                .chain(extra_routes.iter().map(|r| (*r).to_owned())),
        ),
    });
    let allowed = Arc::new(AllowedMethods::new(&document, &extra_routes));
    let query_rules = Arc::new(QueryRules::new(&document));
    let cors_policy = Arc::new(Cors {
        origins: state.config.cors_origins()?,
        allowed: Arc::clone(&allowed),
    });
    let document = Arc::new(document);
    let max_body = state.config.max_body_bytes;
    let header_limits = state.config.header_limits();
    let (s1, s2, s3, s4) = (
        Arc::clone(&state),
        Arc::clone(&state),
        Arc::clone(&state),
        Arc::clone(&state),
    );
    let pages = Arc::new(Pages::new());
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
        .around(move |ep, req| pages::serve(ep, req, Arc::clone(&pages)))
        .around(move |ep, req| check_query(ep, req, Arc::clone(&query_rules)))
        .around(move |ep, req| idempotency(ep, req, Arc::clone(&s1)))
        .around(move |ep, req| allow(ep, req, Arc::clone(&allowed)))
        .around(move |ep, req| limit_body(ep, req, max_body))
        .around(move |ep, req| limit_headers(ep, req, header_limits))
        .around(scope)
        .around(move |ep, req| rate_limit(ep, req, Arc::clone(&s2)))
        .around(move |ep, req| authentication(ep, req, Arc::clone(&s4)))
        .around(move |ep, req| cors(ep, req, Arc::clone(&cors_policy)))
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

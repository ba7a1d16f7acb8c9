//! Ingest's metrics: requests by route and status with latency, rate-limit
//! rejections, idempotent replays, job publishes, the outbox backlog and
//! open connections, served with the embedded notifier's (when there is
//! one) at `/metrics`.

use std::{collections::HashMap, sync::Arc, time::Duration};

use common::{
    metrics::{Latency, Registry, Unit, latency},
    store::{NotificationState, Store},
};
use poem::{
    IntoResponse, Response,
    http::{StatusCode, header},
};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// A standard method, or `OTHER`.
    pub method: &'static str,
    /// The route's template (`/v1/events/{id}`), never the raw path, so
    /// the number of series stays bounded; `unmatched` for unknown paths.
    pub route: Template,
    pub status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: &'static str,
    pub route: Template,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// `key`, `auth_failures` or `anonymous`.
    pub limit: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PublishLabels {
    /// `confirmed` (the broker took it) or `failed` (the relay retries).
    pub outcome: &'static str,
}

/// Cheap to clone: every field is a handle to the registered metric.
#[derive(Debug, Clone)]
pub struct IngestMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub request_duration: Latency<RouteLabels>,
    pub rate_limited: Family<LimitLabels, Counter>,
    pub idempotent_replays: Counter,
    pub jobs_published: Family<PublishLabels, Counter>,
    pub outbox_backlog: Gauge,
    pub open_connections: Gauge,
    pub open_streams: Gauge,
    pub retention_removed: Family<RetentionLabels, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetentionLabels {
    /// `events`, `deliveries` or `summaries`.
    pub record: &'static str,
}

impl IngestMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            request_duration: latency(),
            rate_limited: Family::default(),
            idempotent_replays: Counter::default(),
            jobs_published: Family::default(),
            outbox_backlog: Gauge::default(),
            open_connections: Gauge::default(),
            open_streams: Gauge::default(),
            retention_removed: Family::default(),
        };
        registry.register(
            "http_requests",
            "HTTP requests by method, route and status",
            metrics.requests.clone(),
        );
        registry.register_with_unit(
            "http_request_duration",
            "Time from receiving a request to having its response",
            Unit::Seconds,
            metrics.request_duration.clone(),
        );
        registry.register(
            "rate_limited",
            "Requests refused with 429, by the limit that refused them",
            metrics.rate_limited.clone(),
        );
        registry.register(
            "idempotent_replays",
            "Responses replayed for a repeated Idempotency-Key",
            metrics.idempotent_replays.clone(),
        );
        registry.register(
            "jobs_published",
            "Notify jobs published to the queue, by whether the broker confirmed them",
            metrics.jobs_published.clone(),
        );
        // Every known series exists from the start, at zero, so a fresh
        // install shows the whole set and rate() has a starting point.
        for limit in ["key", "auth_failures", "anonymous"] {
            metrics
                .rate_limited
                .get_or_create(&LimitLabels { limit })
                .inc_by(0);
        }
        for outcome in ["confirmed", "failed"] {
            metrics
                .jobs_published
                .get_or_create(&PublishLabels { outcome })
                .inc_by(0);
        }
        registry.register(
            "outbox_backlog",
            "Events whose notify job has not been confirmed by the broker yet (all replicas)",
            metrics.outbox_backlog.clone(),
        );
        registry.register(
            "http_open_connections",
            "Client connections open now (at most max_connections)",
            metrics.open_connections.clone(),
        );
        registry.register(
            "open_streams",
            "Live event streams (GET /v1/stream) open now on this replica",
            metrics.open_streams.clone(),
        );
        registry.register(
            "retention_removed",
            "Records removed because they were older than INGEST_RETENTION_DAYS",
            metrics.retention_removed.clone(),
        );
        for record in ["events", "deliveries", "summaries"] {
            metrics
                .retention_removed
                .get_or_create(&RetentionLabels { record })
                .inc_by(0);
        }
        metrics
    }

    pub fn rate_limited(&self, limit: &'static str) {
        self.rate_limited
            .get_or_create(&LimitLabels { limit })
            .inc();
    }

    pub fn published(&self, confirmed: bool) {
        let outcome = if confirmed { "confirmed" } else { "failed" };
        self.jobs_published
            .get_or_create(&PublishLabels { outcome })
            .inc();
    }
}

/// Maps a request path to the route template it matched, from the published
/// document's paths (`{param}` matches one segment). Every request asks it
/// (its metrics, its `Allow` header, its query rules), so a path that is a
/// template itself, as most are, is found by a hash lookup rather than by
/// matching it against each template in turn; a literal template wins over
/// one with a parameter that also matches, as in the router.
#[derive(Debug)]
pub struct Routes {
    literal: HashMap<String, Template>,
    with_params: Vec<Template>,
    unmatched: Template,
}

/// A route template, shared with the metric series that name it (so that
/// recording a request allocates no label).
pub type Template = Arc<String>;

impl Routes {
    pub fn new(templates: impl IntoIterator<Item = String>) -> Self {
        let (mut literal, mut with_params) = (HashMap::new(), Vec::new());
        for template in templates {
            if template.contains('{') {
                with_params.push(Arc::new(template));
            } else {
                literal.insert(template.clone(), Arc::new(template));
            }
        }
        Self {
            literal,
            with_params,
            unmatched: Arc::new("unmatched".to_owned()),
        }
    }

    pub fn template(&self, path: &str) -> &Template {
        self.literal
            .get(path)
            .or_else(|| {
                self.with_params
                    .iter()
                    .find(|template| crate::routes::matches(template, path))
            })
            .unwrap_or(&self.unmatched)
    }
}

/// The methods whose requests are counted under their own name.
const STANDARD_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// What the outermost middleware records about each request.
#[derive(Debug)]
pub struct RequestObserver {
    pub metrics: IngestMetrics,
    pub routes: Routes,
}

impl RequestObserver {
    pub fn observe(&self, method: &str, path: &str, status: StatusCode, elapsed: Duration) {
        let route = self.routes.template(path);
        // Clients can send any token as a method; only the standard ones
        // get a series of their own, so the number of series stays bounded.
        let method = STANDARD_METHODS
            .into_iter()
            .find(|standard| *standard == method)
            .unwrap_or("OTHER");
        self.metrics
            .request_duration
            .get_or_create(&RouteLabels {
                method,
                route: Arc::clone(route),
            })
            .observe(elapsed.as_secs_f64());
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                method,
                route: Arc::clone(route),
                status: status.as_u16(),
            })
            .inc();
    }
}

/// `GET /metrics`: refreshes the backlog gauge from the store, then renders.
pub async fn scrape(
    registry: Arc<Registry>,
    metrics: IngestMetrics,
    store: Arc<dyn Store>,
) -> Response {
    match store
        .count_in_notification_state(NotificationState::Pending)
        .await
    {
        Ok(n) => {
            metrics
                .outbox_backlog
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        // The last known value stays; the store's own errors show elsewhere.
        Err(e) => tracing::warn!(error = %e, "metrics: cannot count the outbox backlog"),
    }
    common::metrics::render(&registry)
        .with_content_type(common::metrics::CONTENT_TYPE)
        .with_status(StatusCode::OK)
        .with_header(header::CACHE_CONTROL, "no-store")
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_their_templates() {
        let routes = Routes::new(
            ["/v1/events", "/v1/events/{id}", "/healthz"]
                .into_iter()
                .map(String::from),
        );
        assert_eq!(routes.template("/v1/events").as_str(), "/v1/events");
        assert_eq!(
            routes.template("/v1/events/0193").as_str(),
            "/v1/events/{id}"
        );
        assert_eq!(routes.template("/v1/events/").as_str(), "unmatched");
        assert_eq!(routes.template("/v1/events/a/b").as_str(), "unmatched");
        assert_eq!(routes.template("/healthz").as_str(), "/healthz");
        assert_eq!(routes.template("/nope").as_str(), "unmatched");
    }

    #[test]
    fn a_literal_template_wins_over_one_with_a_parameter() {
        let routes = Routes::new(
            ["/v1/devices/{id}", "/v1/devices/mine"]
                .into_iter()
                .map(String::from),
        );
        assert_eq!(
            routes.template("/v1/devices/mine").as_str(),
            "/v1/devices/mine"
        );
        assert_eq!(
            routes.template("/v1/devices/d_1").as_str(),
            "/v1/devices/{id}"
        );
    }
}

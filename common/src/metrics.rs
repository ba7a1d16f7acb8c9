//! What both services' `/metrics` share: the registry type, the latency
//! buckets, and rendering in the OpenMetrics text format (the Prometheus
//! exposition format's standardised successor, which Prometheus scrapes
//! natively). Each service owns its metrics in its own `metrics` module;
//! nothing is global, so an embedded ingest and its in-process notifier
//! register into one registry, and every test app has its own.

use prometheus_client::{
    encoding::text,
    metrics::{family::Family, histogram::Histogram},
};

pub use prometheus_client::registry::{Registry, Unit};

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A registry whose metric names all start with `tocsin_`.
pub fn registry() -> Registry {
    Registry::with_prefix("tocsin")
}

/// The registry in the OpenMetrics text format.
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = text::encode(&mut out, registry);
    out
}

/// A latency histogram family: 1 ms to about 16 s, doubling.
pub type Latency<L> = Family<L, Histogram, fn() -> Histogram>;

/// An empty latency family with [`latency_histogram`]'s buckets.
pub fn latency<L: Clone + std::hash::Hash + Eq>() -> Latency<L> {
    Family::new_with_constructor(latency_histogram)
}

fn latency_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.001, 2.0, 15,
    ))
}

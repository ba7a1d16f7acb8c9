//! The notifier's metrics: jobs consumed, pushes by outcome, retries,
//! dead-lettered jobs and push latency. Registered into the standalone
//! notifier's registry, or into ingest's in embedded mode.

use common::metrics::{Latency, Registry, Unit, latency};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PushLabels {
    /// `delivered`, `device_gone`, `rejected`, `retry` or `gave_up`.
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderLabels {
    /// `apns`, or the stand-in that logs or records pushes.
    pub provider: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    /// `push`: some pushes failed transiently; `error`: the store or the
    /// queue failed mid-job.
    pub reason: &'static str,
}

/// Cheap to clone: every field is a handle to the registered metric.
#[derive(Debug, Clone)]
pub struct NotifierMetrics {
    pub jobs_consumed: Counter,
    pub jobs_dead_lettered: Counter,
    pub job_retries: Family<RetryLabels, Counter>,
    pub pushes: Family<PushLabels, Counter>,
    pub push_duration: Latency<ProviderLabels>,
}

impl NotifierMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            jobs_consumed: Counter::default(),
            jobs_dead_lettered: Counter::default(),
            job_retries: Family::default(),
            pushes: Family::default(),
            push_duration: latency(),
        };
        // Every known series exists from the start, at zero, so a fresh
        // install shows the whole set and rate() has a starting point.
        for outcome in ["delivered", "device_gone", "rejected", "retry", "gave_up"] {
            metrics
                .pushes
                .get_or_create(&PushLabels { outcome })
                .inc_by(0);
        }
        for reason in ["push", "error"] {
            metrics
                .job_retries
                .get_or_create(&RetryLabels { reason })
                .inc_by(0);
        }
        registry.register(
            "notifier_jobs_consumed",
            "Notify jobs taken from the queue (redeliveries included)",
            metrics.jobs_consumed.clone(),
        );
        registry.register(
            "notifier_jobs_dead_lettered",
            "Jobs moved to the dead-letter queue (retries exhausted, or unreadable)",
            metrics.jobs_dead_lettered.clone(),
        );
        registry.register(
            "notifier_job_retries",
            "Jobs scheduled again with a backoff delay",
            metrics.job_retries.clone(),
        );
        registry.register(
            "notifier_pushes",
            "Push attempts by outcome",
            metrics.pushes.clone(),
        );
        registry.register_with_unit(
            "notifier_push_duration",
            "Time the push provider (APNs) took to answer one push",
            Unit::Seconds,
            metrics.push_duration.clone(),
        );
        metrics
    }
}

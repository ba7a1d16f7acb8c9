//! The notifier's metrics: jobs consumed, pushes by outcome, retries,
//! dead-lettered jobs and push latency. Registered into the standalone
//! notifier's registry, or into ingest's in embedded mode.

use common::{
    destination::DestinationKind,
    metrics::{Latency, Registry, Unit, latency},
    rules::{FilterReason, HoldReason},
    store::DeliveryState,
};
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
    /// `push`: some pushes failed transiently; `lease`: some deliveries
    /// were held by another worker (or not due yet), looked at again when
    /// that runs out; `error`: the store or the queue failed mid-job.
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WithheldLabels {
    /// `filtered` (never sent) or `held` (sent later in a summary).
    pub state: &'static str,
    /// Filtered: `channel`, `tag` or `priority`; held: `quietHours` or
    /// `burst`.
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SummaryLabels {
    /// `quietHours` (a summary at the end of quiet hours) or `burst` (a
    /// digest at the end of a burst window).
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DestinationLabels {
    /// `webhook`, `slack`, `discord`, `telegram`, `ntfy` or `email`.
    pub kind: &'static str,
    /// `delivered`, `failed` (refused for good), `retried` (failed, to be
    /// tried again), `gone` (its receiver says it is gone: disabled) or
    /// `gave_up` (failed after the last retry).
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The destination's kind.
    pub kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeadLetterLabels {
    /// `gave_up`: deliveries failed after the last retry; `poison`: the job
    /// failed the same way (not an outage) past the retry limit;
    /// `unreadable`: the message is not a job this notifier understands.
    pub reason: &'static str,
}

/// Every outcome of a delivery to a destination.
const DESTINATION_OUTCOMES: [&str; 5] = ["delivered", "failed", "retried", "gone", "gave_up"];

/// Cheap to clone: every field is a handle to the registered metric.
#[derive(Debug, Clone)]
pub struct NotifierMetrics {
    pub jobs_consumed: Counter,
    pub jobs_dead_lettered: Family<DeadLetterLabels, Counter>,
    pub job_retries: Family<RetryLabels, Counter>,
    pub pushes: Family<PushLabels, Counter>,
    /// Pushes sent after taking over a claim that ran out without an
    /// outcome: the earlier push may have gone out too (at-least-once to
    /// the provider; the collapse id keeps it to one alert on the device).
    pub possible_repeats: Counter,
    pub push_duration: Latency<ProviderLabels>,
    /// Alerts the devices' rules kept from a device, by state and reason.
    pub withheld: Family<WithheldLabels, Counter>,
    /// Summaries and digests the push service took, by reason.
    pub summaries: Family<SummaryLabels, Counter>,
    /// Deliveries to destinations, by kind and outcome.
    pub destinations: Family<DestinationLabels, Counter>,
    pub destination_duration: Latency<KindLabels>,
}

impl NotifierMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            jobs_consumed: Counter::default(),
            jobs_dead_lettered: Family::default(),
            job_retries: Family::default(),
            pushes: Family::default(),
            possible_repeats: Counter::default(),
            push_duration: latency(),
            withheld: Family::default(),
            summaries: Family::default(),
            destinations: Family::default(),
            destination_duration: latency(),
        };
        for kind in DestinationKind::ALL {
            for outcome in DESTINATION_OUTCOMES {
                metrics
                    .destinations
                    .get_or_create(&DestinationLabels {
                        kind: kind.as_str(),
                        outcome,
                    })
                    .inc_by(0);
            }
        }
        // Every known series exists from the start, at zero, so a fresh
        // install shows the whole set and rate() has a starting point.
        for outcome in ["delivered", "device_gone", "rejected", "retry", "gave_up"] {
            metrics
                .pushes
                .get_or_create(&PushLabels { outcome })
                .inc_by(0);
        }
        for reason in ["push", "lease", "error"] {
            metrics
                .job_retries
                .get_or_create(&RetryLabels { reason })
                .inc_by(0);
        }
        for reason in FilterReason::ALL {
            metrics.count_withheld_by(DeliveryState::Filtered(reason), 0);
        }
        for reason in HoldReason::ALL {
            metrics.count_withheld_by(DeliveryState::Held(reason), 0);
            metrics
                .summaries
                .get_or_create(&SummaryLabels {
                    reason: reason.as_str(),
                })
                .inc_by(0);
        }
        for reason in ["gave_up", "poison", "unreadable"] {
            metrics
                .jobs_dead_lettered
                .get_or_create(&DeadLetterLabels { reason })
                .inc_by(0);
        }
        registry.register(
            "notifier_jobs_consumed",
            "Notify jobs taken from the queue (redeliveries included)",
            metrics.jobs_consumed.clone(),
        );
        registry.register(
            "notifier_jobs_dead_lettered",
            "Jobs moved to the dead-letter queue, by reason",
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
        registry.register(
            "notifier_possible_repeat_pushes",
            "Pushes sent in place of a claim whose worker died or stalled without recording \
             an outcome: possibly a second push of the same alert (same collapse id)",
            metrics.possible_repeats.clone(),
        );
        registry.register(
            "notifier_alerts_withheld",
            "Alerts a device's rules kept from it: filtered (never sent, by channel, tag or \
             priority) or held (for the summary at the end of quiet hours, or the digest at \
             the end of a burst window)",
            metrics.withheld.clone(),
        );
        registry.register(
            "notifier_summaries_sent",
            "Pushes summarising held alerts that the push service took: a summary at the end \
             of quiet hours (quietHours) or a digest at the end of a burst window (burst)",
            metrics.summaries.clone(),
        );
        registry.register(
            "notifier_destination_deliveries",
            "Deliveries to destinations (webhook, Slack, Discord, Telegram, ntfy, email), by \
             kind and outcome",
            metrics.destinations.clone(),
        );
        registry.register_with_unit(
            "notifier_destination_duration",
            "Time a destination took to answer one delivery, by kind",
            Unit::Seconds,
            metrics.destination_duration.clone(),
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

impl NotifierMetrics {
    /// Counts one summary or digest sent.
    pub fn count_summary(&self, reason: HoldReason) {
        self.summaries
            .get_or_create(&SummaryLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// Counts one delivery to a destination of `kind`.
    pub fn count_destination(&self, kind: DestinationKind, outcome: &'static str) {
        self.destinations
            .get_or_create(&DestinationLabels {
                kind: kind.as_str(),
                outcome,
            })
            .inc();
    }

    /// Counts one alert kept from a device (`state` is filtered or held).
    pub fn count_withheld(&self, state: DeliveryState) {
        self.count_withheld_by(state, 1);
    }

    fn count_withheld_by(&self, state: DeliveryState, n: u64) {
        if let Some(reason) = state.reason() {
            self.withheld
                .get_or_create(&WithheldLabels {
                    state: state.as_str(),
                    reason,
                })
                .inc_by(n);
        }
    }
}

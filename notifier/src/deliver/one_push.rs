//! One push of a job: wait for an in-flight permit, claim the delivery
//! (in the claims' batch), send it within half the lease, and record the
//! outcome (in the outcomes' batch) if the claim is still this worker's.
//! Whether a failed push is sent again, and when, is the retry policy's
//! (`crate::retry`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::store::{Delivery, DeliveryClaim, DeliveryState, Device, Scope, lease::ClaimKey};
use uuid::Uuid;

use super::{DeliverError, Deliverer};
use crate::{
    metrics::{ProviderLabels, PushLabels},
    push::{Alert, Push, PushOutcome},
    retry::classify,
};

/// What a push is of: an event, or a summary of held ones. Its delivery
/// is claimed under `(id, device)`.
pub(super) struct Subject<'a> {
    pub scope: &'a Scope,
    pub id: Uuid,
    pub alert: Alert,
}

/// How one delivery went, for the job.
pub(super) enum Sent {
    /// The push service took it: nothing more to do.
    Delivered,
    /// Nothing more to do for it (refused, gone, or settled already).
    Final,
    /// Failed transiently: try again after this delay (the job's backoff,
    /// or longer when the push service asked for it).
    Retry(uuid::Uuid, Duration),
    /// Not ours to send now (another worker's live lease, or a retry not
    /// due yet): look again at this instant.
    Wait(uuid::Uuid, DateTime<Utc>),
    /// Gave up after the last attempt.
    GaveUp,
}

impl Deliverer {
    /// Claims, sends and records the push of `subject` to `device`.
    pub(super) async fn send_one(
        &self,
        subject: &Subject<'_>,
        device: &Device,
        retry_delay: Duration,
    ) -> Result<Sent, DeliverError> {
        let scope = subject.scope;
        // A push holds its in-flight permit from its claim to its answer,
        // so the lease never runs while it waits for one.
        let permit = self.in_flight.acquire().await;
        let claim = self
            .claims
            .call(ClaimKey {
                scope: scope.clone(),
                event_id: subject.id,
                device_id: device.id,
            })
            .await?;
        let attempt = match claim {
            DeliveryClaim::Acquired {
                attempt, retaken, ..
            } => {
                if retaken {
                    tracing::info!(deviceId = %device.id, attempt, "sending a push whose earlier claim ran out without an outcome: possibly a repeat");
                    self.metrics.possible_repeats.inc();
                }
                attempt
            }
            DeliveryClaim::Settled(_) => return Ok(Sent::Final),
            DeliveryClaim::Busy { until } => return Ok(Sent::Wait(device.id, until)),
            DeliveryClaim::GaveUp { attempts } => {
                tracing::warn!(deviceId = %device.id, attempts, "delivery given up: its workers never finished it");
                self.count_push("gave_up");
                return Ok(Sent::GaveUp);
            }
        };
        let push = Push {
            device_id: device.id,
            target: device.target.clone(),
            alert: subject.alert.clone(),
        };
        let provider = self.provider.provider_for(&push);
        let started = std::time::Instant::now();
        let outcome = self.send_within_lease(&push).await;
        drop(permit);
        self.metrics
            .push_duration
            .get_or_create(&ProviderLabels { provider })
            .observe(started.elapsed().as_secs_f64());
        let now = self.clock.now();
        let mut record = Delivery {
            event_id: subject.id,
            device_id: device.id,
            state: DeliveryState::Failed,
            attempts: attempt,
            error: None,
            apns_id: None,
            provider: Some(provider.to_owned()),
            summary_id: None,
            lease_until: None,
            updated_at: now,
        };
        let can_retry = self.retry.can_retry_push(attempt);
        self.count_push(match &outcome {
            PushOutcome::Delivered { .. } => "delivered",
            PushOutcome::DeviceGone { .. } => "device_gone",
            PushOutcome::Rejected { .. } => "rejected",
            PushOutcome::Retry { .. } if can_retry => "retry",
            PushOutcome::Retry { .. } => "gave_up",
        });
        let sent = match outcome {
            PushOutcome::Delivered { apns_id } => {
                record.state = DeliveryState::Delivered;
                record.apns_id = apns_id;
                Sent::Delivered
            }
            PushOutcome::DeviceGone { reason } => {
                self.store
                    .deactivate_device(scope, device.id, &reason, now)
                    .await?;
                tracing::info!(deviceId = %device.id, %reason, "device deactivated");
                record.error = Some(reason);
                Sent::Final
            }
            PushOutcome::Rejected { reason } => {
                record.error = Some(reason);
                Sent::Final
            }
            PushOutcome::Retry { reason, after } if can_retry => {
                let delay = self.retry.push_delay(retry_delay, after);
                record.state = DeliveryState::Retrying;
                record.error = Some(reason);
                record.lease_until =
                    Some(now + chrono::Duration::from_std(delay).unwrap_or_default());
                Sent::Retry(device.id, delay)
            }
            PushOutcome::Retry { reason, .. } => {
                record.error = Some(format!("gave up after {attempt} attempts: {reason}"));
                Sent::GaveUp
            }
        };
        tracing::info!(
            deviceId = %device.id,
            provider,
            // The job's span already has `attempt` (the job's retry count).
            deliveryAttempt = attempt,
            state = record.state.as_str(),
            error = record.error.as_deref(),
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            "push attempted"
        );
        if !self.finishes.call((scope.clone(), record)).await? {
            // Our lease ran out mid-send and another worker took the
            // delivery over: its outcome is the one that counts.
            tracing::warn!(
                deviceId = %device.id,
                deliveryAttempt = attempt,
                "lease lost before the outcome was recorded"
            );
            return Ok(Sent::Final);
        }
        Ok(sent)
    }

    /// Sends, giving the provider at most half the lease, so a live worker
    /// always records its outcome before anyone may take the claim over.
    async fn send_within_lease(&self, push: &Push) -> PushOutcome {
        let limit = self.lease / 2;
        match tokio::time::timeout(limit, self.provider.send(push)).await {
            Ok(outcome) => outcome,
            Err(_) => classify::unanswered(format!("no answer within {} ms", limit.as_millis())),
        }
    }

    pub(super) fn count_push(&self, outcome: &'static str) {
        self.metrics
            .pushes
            .get_or_create(&PushLabels { outcome })
            .inc();
    }
}

//! One delivery of a job, to a device (a push) or a destination (a
//! webhook, a Slack message, a mail…): wait for an in-flight permit, claim
//! the delivery (in the claims' batch), send it within half the lease, and
//! record the outcome (in the outcomes' batch) if the claim is still this
//! worker's; a destination's health counts it too. Whether a failed
//! delivery is sent again, and when, is the retry policy's
//! (`crate::retry`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::store::{Attempt, Delivery, DeliveryClaim, DeliveryState, Scope, lease::ClaimKey};
use uuid::Uuid;

use super::{DeliverError, Deliverer};
use crate::{
    destinations::Message,
    metrics::{KindLabels, ProviderLabels, PushLabels},
    push::{Alert, Push, PushOutcome},
    recipients::{Recipient, To},
    retry::classify,
};

/// What a delivery is of: an event, or a summary of held ones. It is
/// claimed under `(id, recipient)`.
pub(super) struct Subject<'a> {
    pub scope: &'a Scope,
    pub id: Uuid,
    /// What a device is pushed.
    pub alert: Alert,
    /// What a destination is sent; made only when the job has one.
    pub message: Option<Message>,
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
    /// Claims, sends and records the delivery of `subject` to `recipient`.
    pub(super) async fn send_one(
        &self,
        subject: &Subject<'_>,
        recipient: &Recipient,
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
                device_id: recipient.id,
            })
            .await?;
        let attempt = match claim {
            DeliveryClaim::Acquired {
                attempt, retaken, ..
            } => {
                if retaken {
                    tracing::info!(
                        recipientId = %recipient.id,
                        attempt,
                        "sending an alert whose earlier claim ran out without an outcome: \
                         possibly a repeat"
                    );
                    self.metrics.possible_repeats.inc();
                }
                attempt
            }
            DeliveryClaim::Settled(_) => return Ok(Sent::Final),
            DeliveryClaim::Busy { until } => return Ok(Sent::Wait(recipient.id, until)),
            DeliveryClaim::GaveUp { attempts } => {
                tracing::warn!(
                    recipientId = %recipient.id,
                    attempts,
                    "delivery given up: its workers never finished it"
                );
                match &recipient.to {
                    To::Device(_) => self.count_push("gave_up"),
                    To::Destination { kind, .. } => {
                        self.metrics.count_destination(*kind, "gave_up");
                    }
                }
                return Ok(Sent::GaveUp);
            }
        };
        let started = std::time::Instant::now();
        let (provider, outcome) = self.send_within_lease(subject, recipient).await;
        drop(permit);
        let elapsed = started.elapsed().as_secs_f64();
        match &recipient.to {
            To::Device(_) => self
                .metrics
                .push_duration
                .get_or_create(&ProviderLabels { provider })
                .observe(elapsed),
            To::Destination { kind, .. } => self
                .metrics
                .destination_duration
                .get_or_create(&KindLabels {
                    kind: kind.as_str(),
                })
                .observe(elapsed),
        }
        let now = self.clock.now();
        let mut record = Delivery {
            event_id: subject.id,
            device_id: recipient.id,
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
        self.count(recipient, &outcome, can_retry);
        let gone = matches!(outcome, PushOutcome::DeviceGone { .. });
        let sent = match outcome {
            PushOutcome::Delivered { apns_id } => {
                record.state = DeliveryState::Delivered;
                record.apns_id = apns_id;
                Sent::Delivered
            }
            PushOutcome::DeviceGone { reason } if recipient.is_destination() => {
                let gone = Attempt::Gone {
                    error: reason.clone(),
                };
                self.store
                    .record_attempt(scope, recipient.id, &gone, now)
                    .await?;
                tracing::warn!(
                    destinationId = %recipient.id,
                    %reason,
                    "destination disabled: its receiver says it is gone"
                );
                record.error = Some(reason);
                Sent::Final
            }
            PushOutcome::DeviceGone { reason } => {
                self.store
                    .deactivate_device(scope, recipient.id, &reason, now)
                    .await?;
                tracing::info!(deviceId = %recipient.id, %reason, "device deactivated");
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
                Sent::Retry(recipient.id, delay)
            }
            PushOutcome::Retry { reason, .. } => {
                record.error = Some(format!("gave up after {attempt} attempts: {reason}"));
                Sent::GaveUp
            }
        };
        // A push's line keeps the words and fields operators search
        // by; a destination's names the destination.
        let (state, error) = (record.state.as_str(), record.error.as_deref());
        let latency_ms = elapsed * 1000.0;
        // The job's span already has `attempt` (the job's retry count).
        if recipient.is_destination() {
            tracing::info!(
                destinationId = %recipient.id,
                provider,
                deliveryAttempt = attempt,
                state,
                error,
                latency_ms,
                "delivery attempted"
            );
        } else {
            tracing::info!(
                deviceId = %recipient.id,
                provider,
                deliveryAttempt = attempt,
                state,
                error,
                latency_ms,
                "push attempted"
            );
        }
        // A gone destination's health was recorded as it was disabled.
        if recipient.is_destination() && !gone {
            self.record_health(scope, recipient, &record, now).await?;
        }
        if !self.finishes.call((scope.clone(), record)).await? {
            // Our lease ran out mid-send and another worker took the
            // delivery over: its outcome is the one that counts.
            tracing::warn!(
                recipientId = %recipient.id,
                deliveryAttempt = attempt,
                "lease lost before the outcome was recorded"
            );
            return Ok(Sent::Final);
        }
        Ok(sent)
    }

    /// Sends, giving the provider or destination at most half the lease,
    /// so a live worker always records its outcome before anyone may take
    /// the claim over. Returns who sent it (the provider, or the
    /// destination's kind) and the outcome.
    async fn send_within_lease(
        &self,
        subject: &Subject<'_>,
        recipient: &Recipient,
    ) -> (&'static str, PushOutcome) {
        let limit = self.lease / 2;
        let (provider, sending) = match &recipient.to {
            To::Device(target) => {
                let push = Push {
                    device_id: recipient.id,
                    target: target.clone(),
                    alert: subject.alert.clone(),
                };
                let provider = self.provider.provider_for(&push);
                let provider_ref = &self.provider;
                let sending: futures::future::BoxFuture<'_, PushOutcome> =
                    Box::pin(async move { provider_ref.send(&push).await });
                (provider, sending)
            }
            To::Destination { kind, settings } => {
                let sending: futures::future::BoxFuture<'_, PushOutcome> =
                    match (settings, &subject.message) {
                        (Err(reason), _) => {
                            let reason = reason.clone();
                            Box::pin(async move { PushOutcome::Rejected { reason } })
                        }
                        (Ok(settings), Some(message)) => {
                            Box::pin(self.destinations.send(recipient.id, settings, message))
                        }
                        (Ok(_), None) => Box::pin(async {
                            PushOutcome::Rejected {
                                reason: "nothing to send a destination".into(),
                            }
                        }),
                    };
                (kind.as_str(), sending)
            }
        };
        match tokio::time::timeout(limit, sending).await {
            Ok(outcome) => (provider, outcome),
            Err(_) => (
                provider,
                classify::unanswered(format!("no answer within {} ms", limit.as_millis())),
            ),
        }
    }

    /// A destination's health after this attempt: delivered, or failed
    /// with its error (a gone one was recorded as it was disabled).
    async fn record_health(
        &self,
        scope: &Scope,
        recipient: &Recipient,
        record: &Delivery,
        now: DateTime<Utc>,
    ) -> Result<(), DeliverError> {
        let attempt = match (&record.state, &record.error) {
            (DeliveryState::Delivered, _) => Attempt::Delivered,
            (_, Some(error)) => Attempt::Failed {
                error: error.clone(),
            },
            (_, None) => return Ok(()),
        };
        self.store
            .record_attempt(scope, recipient.id, &attempt, now)
            .await?;
        Ok(())
    }

    /// Counts one delivery's outcome: a push by outcome, a destination's
    /// by kind and outcome.
    fn count(&self, recipient: &Recipient, outcome: &PushOutcome, can_retry: bool) {
        match &recipient.to {
            To::Device(_) => self.count_push(match outcome {
                PushOutcome::Delivered { .. } => "delivered",
                PushOutcome::DeviceGone { .. } => "device_gone",
                PushOutcome::Rejected { .. } => "rejected",
                PushOutcome::Retry { .. } if can_retry => "retry",
                PushOutcome::Retry { .. } => "gave_up",
            }),
            To::Destination { kind, .. } => self.metrics.count_destination(
                *kind,
                match outcome {
                    PushOutcome::Delivered { .. } => "delivered",
                    PushOutcome::DeviceGone { .. } => "gone",
                    PushOutcome::Rejected { .. } => "failed",
                    PushOutcome::Retry { .. } if can_retry => "retried",
                    PushOutcome::Retry { .. } => "gave_up",
                },
            ),
        }
    }

    pub(super) fn count_push(&self, outcome: &'static str) {
        self.metrics
            .pushes
            .get_or_create(&PushLabels { outcome })
            .inc();
    }
}

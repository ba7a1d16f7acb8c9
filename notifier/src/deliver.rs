//! What one notify job does: load the event, pick the devices, claim and
//! send each push once, record the outcome, schedule retries, and settle the
//! event's notification state.

use std::{sync::Arc, time::Duration};

use common::{
    jobs::{Job, NotifyJob},
    queue::{JobQueue, QueueError, RetryPolicy},
    store::{
        Delivery, DeliveryClaim, DeliveryState, Device, Event, NotificationState, Store, StoreError,
    },
};
use futures::{StreamExt as _, stream};

use crate::{
    metrics::{NotifierMetrics, ProviderLabels, PushLabels, RetryLabels},
    push::{Alert, Push, PushOutcome, PushProvider},
};

/// How many pushes of one job are in flight at once.
const PUSHES_PER_JOB: usize = 16;

/// What the worker does with the job message once `deliver` is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// Everything that could be done is done (retries, if any, are queued).
    Done,
    /// Some deliveries gave up after the last retry: keep the job in the
    /// dead-letter queue for inspection.
    DeadLetter,
}

/// Why a job could not be processed now; the worker retries it later.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// Everything `deliver` needs.
pub struct Deliverer {
    pub store: Arc<dyn Store>,
    pub provider: Arc<dyn PushProvider>,
    pub queue: Arc<dyn JobQueue>,
    pub retry: RetryPolicy,
    /// A delivery claimed but not finished for this long belonged to a
    /// worker that died; it is sent again (the collapse id keeps the device
    /// from showing it twice).
    pub stale_claim: Duration,
    pub metrics: NotifierMetrics,
}

enum Sent {
    Final,
    Retry(uuid::Uuid),
    GaveUp,
}

impl Deliverer {
    /// Processes one notify job.
    pub async fn deliver(&self, job: &NotifyJob) -> Result<JobOutcome, DeliverError> {
        let Some(event) = self.store.get_event(&job.scope, job.event_id).await? else {
            tracing::warn!("event not found; nothing to send");
            return Ok(JobOutcome::Done);
        };
        if !event.notify {
            self.settle(&event, NotificationState::Skipped).await?;
            return Ok(JobOutcome::Done);
        }
        let devices: Vec<Device> = self
            .store
            .list_devices(&job.scope)
            .await?
            .into_iter()
            .filter(|d| d.wants(&event.channel_name))
            .filter(|d| job.devices.as_ref().is_none_or(|only| only.contains(&d.id)))
            .collect();
        tracing::info!(devices = devices.len(), "sending pushes");

        // Collected first: a lazily mapped stream of borrowing futures trips
        // the compiler's Send inference for spawned tasks.
        let sends: Vec<_> = devices
            .iter()
            .map(|device| self.send_one(&event, device, job.attempt))
            .collect();
        let results: Vec<Result<Sent, DeliverError>> = stream::iter(sends)
            .buffer_unordered(PUSHES_PER_JOB)
            .collect()
            .await;
        let mut retry = Vec::new();
        let mut gave_up = false;
        for result in results {
            match result? {
                Sent::Final => {}
                Sent::Retry(device) => retry.push(device),
                Sent::GaveUp => gave_up = true,
            }
        }
        if !retry.is_empty() {
            let next = job.attempt + 1;
            let delay = self.retry.delay_with_jitter(next);
            let again = Job::NotifyV1(NotifyJob {
                attempt: next,
                devices: Some(retry),
                ..job.clone()
            });
            self.queue.publish_delayed(&again, delay).await?;
            self.metrics
                .job_retries
                .get_or_create(&RetryLabels { reason: "push" })
                .inc();
            tracing::info!(
                retry = next,
                delay_ms = delay.as_millis() as u64,
                "retry scheduled"
            );
        } else {
            self.settle_from_deliveries(&event).await?;
        }
        Ok(if gave_up {
            JobOutcome::DeadLetter
        } else {
            JobOutcome::Done
        })
    }

    /// Claims, sends and records the push of `event` to `device`.
    async fn send_one(
        &self,
        event: &Event,
        device: &Device,
        job_attempt: u32,
    ) -> Result<Sent, DeliverError> {
        let now = common::time::now();
        let claim = self
            .store
            .claim_delivery(&event.scope, event.id, device.id, now, self.stale_claim)
            .await?;
        let attempts = match claim {
            DeliveryClaim::Acquired { attempt } => attempt,
            DeliveryClaim::Settled(_) | DeliveryClaim::Busy => return Ok(Sent::Final),
        };
        let push = Push {
            device_token: device.token.clone(),
            environment: device.environment,
            alert: Alert {
                title: event.title.clone(),
                body: event.description.clone(),
                icon: event.icon.clone(),
                channel: event.channel_name.clone(),
                event_id: event.id,
            },
        };
        let started = std::time::Instant::now();
        let outcome = self.provider.send(&push).await;
        self.metrics
            .push_duration
            .get_or_create(&ProviderLabels {
                provider: self.provider.name(),
            })
            .observe(started.elapsed().as_secs_f64());
        let mut record = Delivery {
            event_id: event.id,
            device_id: device.id,
            state: DeliveryState::Failed,
            attempts,
            error: None,
            apns_id: None,
            updated_at: common::time::now(),
        };
        let outcome_label = match &outcome {
            PushOutcome::Delivered { .. } => "delivered",
            PushOutcome::DeviceGone { .. } => "device_gone",
            PushOutcome::Rejected { .. } => "rejected",
            PushOutcome::Retry { .. } if job_attempt < self.retry.max_retries => "retry",
            PushOutcome::Retry { .. } => "gave_up",
        };
        self.metrics
            .pushes
            .get_or_create(&PushLabels {
                outcome: outcome_label,
            })
            .inc();
        let sent = match outcome {
            PushOutcome::Delivered { apns_id } => {
                record.state = DeliveryState::Delivered;
                record.apns_id = apns_id;
                Sent::Final
            }
            PushOutcome::DeviceGone { reason } => {
                self.store
                    .deactivate_device(&event.scope, device.id, &reason, record.updated_at)
                    .await?;
                tracing::info!(deviceId = %device.id, %reason, "device deactivated");
                record.error = Some(reason);
                Sent::Final
            }
            PushOutcome::Rejected { reason } => {
                record.error = Some(reason);
                Sent::Final
            }
            PushOutcome::Retry { reason, .. } if job_attempt < self.retry.max_retries => {
                record.state = DeliveryState::Retrying;
                record.error = Some(reason);
                Sent::Retry(device.id)
            }
            PushOutcome::Retry { reason, .. } => {
                record.error = Some(format!("gave up after {attempts} attempts: {reason}"));
                Sent::GaveUp
            }
        };
        tracing::info!(
            deviceId = %device.id,
            provider = self.provider.name(),
            state = record.state.as_str(),
            error = record.error.as_deref(),
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            "push attempted"
        );
        self.store.finish_delivery(&event.scope, &record).await?;
        Ok(sent)
    }

    /// Settles the event once every delivery is final.
    async fn settle_from_deliveries(&self, event: &Event) -> Result<(), DeliverError> {
        let deliveries = self.store.list_deliveries(&event.scope, event.id).await?;
        if deliveries.iter().any(|d| !d.state.is_final()) {
            return Ok(());
        }
        let state = if deliveries.is_empty() {
            NotificationState::Skipped
        } else if deliveries
            .iter()
            .any(|d| d.state == DeliveryState::Delivered)
        {
            NotificationState::Delivered
        } else {
            NotificationState::Failed
        };
        self.settle(event, state).await
    }

    async fn settle(&self, event: &Event, state: NotificationState) -> Result<(), DeliverError> {
        self.store
            .set_notification_state(
                &event.scope,
                event.id,
                &[NotificationState::Pending, NotificationState::Queued],
                state,
            )
            .await?;
        tracing::info!(state = state.as_str(), "notification settled");
        Ok(())
    }
}

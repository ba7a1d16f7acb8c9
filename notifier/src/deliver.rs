//! What one notify job does: load the event, pick the devices, claim each
//! delivery as a lease, send each push once, record the outcome under that
//! lease, schedule retries and re-checks, and settle the event's
//! notification state.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use common::{
    jobs::{Job, NotifyJob},
    queue::{JobQueue, QueueError, RetryPolicy},
    store::{
        Delivery, DeliveryClaim, DeliveryState, Device, Event, NotificationState, Store,
        StoreError, lease::ClaimRequest,
    },
    time::Clock,
};
use futures::{StreamExt as _, stream};

use crate::{
    metrics::{NotifierMetrics, ProviderLabels, PushLabels, RetryLabels},
    push::{Alert, Push, PushOutcome, PushProvider},
};

/// How many pushes of one job are in flight at once.
const PUSHES_PER_JOB: usize = 16;
/// A re-check waits this much past the instant it waits for, so it does
/// not arrive a hair early and find the lease still live.
const RECHECK_MARGIN: Duration = Duration::from_millis(100);

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

impl DeliverError {
    /// Whether waiting can fix it (the store or the broker is away or
    /// refusing for now, as a broker under a resource alarm does), as
    /// opposed to a job that fails the same way every time (a poison job).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Store(StoreError::Unavailable(_)) | Self::Queue(_)
        )
    }
}

/// Everything `deliver` needs.
pub struct Deliverer {
    pub store: Arc<dyn Store>,
    pub provider: Arc<dyn PushProvider>,
    pub queue: Arc<dyn JobQueue>,
    pub retry: RetryPolicy,
    /// How long a claim is its worker's. A worker that dies mid-send holds
    /// it until then; afterwards another worker sends the push (with the
    /// same collapse id, so the device shows it once).
    pub lease: Duration,
    pub clock: Clock,
    pub metrics: NotifierMetrics,
}

/// How one delivery went, for the job.
enum Sent {
    /// Nothing more to do for it.
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

        // One delay for every device of this job that needs a retry: the
        // deliveries record it as their earliest next try, and the retry
        // job is published with it.
        let retry_delay = self.retry.delay_with_jitter(job.attempt + 1);
        // Collected first: a lazily mapped stream of borrowing futures trips
        // the compiler's Send inference for spawned tasks.
        let sends: Vec<_> = devices
            .iter()
            .map(|device| self.send_one(&event, device, retry_delay))
            .collect();
        let results: Vec<Result<Sent, DeliverError>> = stream::iter(sends)
            .buffer_unordered(PUSHES_PER_JOB)
            .collect()
            .await;
        let (mut retry, mut wait, mut wait_until) = (Vec::new(), Vec::new(), None);
        let mut retry_delay = retry_delay;
        let mut gave_up = false;
        for result in results {
            match result? {
                Sent::Final => {}
                Sent::Retry(device, delay) => {
                    retry.push(device);
                    retry_delay = retry_delay.max(delay);
                }
                Sent::Wait(device, until) => {
                    wait.push(device);
                    wait_until = wait_until.max(Some(until));
                }
                Sent::GaveUp => gave_up = true,
            }
        }
        let settled_here = retry.is_empty() && wait_until.is_none();
        if !retry.is_empty() {
            let next = job.attempt + 1;
            self.again(job, next, retry, retry_delay, "push").await?;
            tracing::info!(
                retry = next,
                delay_ms = retry_delay.as_millis() as u64,
                "retry scheduled"
            );
        }
        if let Some(until) = wait_until {
            let delay = (until - self.clock.now()).to_std().unwrap_or_default() + RECHECK_MARGIN;
            self.again(job, job.attempt, wait, delay, "lease").await?;
            tracing::info!(
                delay_ms = delay.as_millis() as u64,
                "deliveries held elsewhere; looking again when their lease or retry is due"
            );
        }
        if settled_here {
            let eligible: Vec<uuid::Uuid> = devices.iter().map(|d| d.id).collect();
            self.settle_from_deliveries(&event, &eligible).await?;
        }
        Ok(if gave_up {
            JobOutcome::DeadLetter
        } else {
            JobOutcome::Done
        })
    }

    /// Publishes the job again for `devices`, after `delay`.
    async fn again(
        &self,
        job: &NotifyJob,
        attempt: u32,
        devices: Vec<uuid::Uuid>,
        delay: Duration,
        reason: &'static str,
    ) -> Result<(), DeliverError> {
        let again = Job::NotifyV1(NotifyJob {
            attempt,
            devices: Some(devices),
            // It was processed: whatever failed before was not a poison.
            failures: 0,
            ..job.clone()
        });
        self.queue.publish_delayed(&again, delay).await?;
        self.metrics
            .job_retries
            .get_or_create(&RetryLabels { reason })
            .inc();
        Ok(())
    }

    /// Claims, sends and records the push of `event` to `device`.
    async fn send_one(
        &self,
        event: &Event,
        device: &Device,
        retry_delay: Duration,
    ) -> Result<Sent, DeliverError> {
        let request = ClaimRequest {
            now: self.clock.now(),
            lease: self.lease,
            max_attempts: self.retry.max_retries + 1,
        };
        let claim = self
            .store
            .claim_delivery(&event.scope, event.id, device.id, &request)
            .await?;
        let attempt = match claim {
            DeliveryClaim::Acquired { attempt, .. } => attempt,
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
            alert: Alert {
                title: event.title.clone(),
                body: event.description.clone(),
                icon: event.icon.clone(),
                channel: event.channel_name.clone(),
                event_id: event.id,
                priority: event.priority,
            },
        };
        let provider = self.provider.provider_for(&push);
        let started = std::time::Instant::now();
        let outcome = self.send_within_lease(&push).await;
        self.metrics
            .push_duration
            .get_or_create(&ProviderLabels { provider })
            .observe(started.elapsed().as_secs_f64());
        let now = self.clock.now();
        let mut record = Delivery {
            event_id: event.id,
            device_id: device.id,
            state: DeliveryState::Failed,
            attempts: attempt,
            error: None,
            apns_id: None,
            provider: Some(provider.to_owned()),
            lease_until: None,
            updated_at: now,
        };
        let can_retry = attempt <= self.retry.max_retries;
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
                Sent::Final
            }
            PushOutcome::DeviceGone { reason } => {
                self.store
                    .deactivate_device(&event.scope, device.id, &reason, now)
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
                // Never sooner than the push service asked, never later than
                // the longest delay the retry settings allow.
                let delay = after.map_or(retry_delay, |after| {
                    retry_delay.max(after.min(self.retry.max))
                });
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
        if !self.store.finish_delivery(&event.scope, &record).await? {
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
            Err(_) => PushOutcome::Retry {
                reason: format!("no answer within {} ms", limit.as_millis()),
                after: None,
            },
        }
    }

    fn count_push(&self, outcome: &'static str) {
        self.metrics
            .pushes
            .get_or_create(&PushLabels { outcome })
            .inc();
    }

    /// Settles the event once every delivery that can still happen is
    /// final. A delivery left unfinished for a device that is no longer
    /// `eligible` (deleted, deactivated, or its channels changed) will never
    /// be sent, so it does not keep the event open.
    async fn settle_from_deliveries(
        &self,
        event: &Event,
        eligible: &[uuid::Uuid],
    ) -> Result<(), DeliverError> {
        let deliveries: Vec<Delivery> = self
            .store
            .list_deliveries(&event.scope, event.id)
            .await?
            .into_iter()
            .filter(|d| d.state.is_final() || eligible.contains(&d.device_id))
            .collect();
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

    /// Moves the event's notification to its final `state`.
    pub async fn settle(
        &self,
        event: &Event,
        state: NotificationState,
    ) -> Result<(), DeliverError> {
        self.store
            .set_notification_state(
                &event.scope,
                event.id,
                &[NotificationState::Pending, NotificationState::Queued],
                state,
                None,
            )
            .await?;
        tracing::info!(state = state.as_str(), "notification settled");
        Ok(())
    }
}

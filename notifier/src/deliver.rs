//! What one notify job does: load the event, pick the recipients (its
//! project's devices and destinations, from a short-lived cache,
//! `crate::recipients`), claim each delivery as a lease, send each push or
//! destination message once, record the outcome under that lease,
//! schedule retries and re-checks, and settle the event's notification
//! state.
//! Claims and outcomes of every job in hand are written in batches
//! (`crate::batch`), and sends across jobs are bounded by the in-flight
//! limit. When to retry, and for how long to wait, is asked of the retry
//! policy (`crate::retry`).

use std::{num::NonZeroUsize, sync::Arc, time::Duration};

use common::{
    jobs::{Job, NotifyJob},
    queue::{JobQueue, QueueError},
    rules::HoldReason,
    sealed::SecretsKey,
    store::{
        Admission, Delivery, DeliveryClaim, DeliveryState, Event, Holding, NotificationState,
        Scope, Store, StoreError,
        lease::{ClaimKey, ClaimRequest},
    },
    time::Clock,
};
use futures::{StreamExt as _, stream};
use tokio::sync::Semaphore;

mod one_push;
mod summary;
mod verdict;

use self::one_push::{Sent, Subject};
use self::verdict::Verdict;
use crate::{
    batch::Batcher,
    destinations::{Message, Senders},
    metrics::{NotifierMetrics, RetryLabels},
    push::{Alert, PushProvider},
    recipients::{Recipient, RecipientCache},
    retry::{self, RetryPolicy},
};

/// Most claims, or outcomes, written in one store call.
const BATCH: usize = 256;

/// What the worker does with the job message once `deliver` is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// Everything that could be done is done (retries, if any, are queued).
    Done,
    /// Some deliveries gave up after the last retry: keep the job in the
    /// dead-letter queue for inspection.
    DeadLetter,
}

/// Why a job could not be processed now; the worker retries it later
/// (whether it ever gives up is the retry policy's:
/// [`retry::classify::is_transient`]). Each variant is the store's or the
/// queue's error as it came, with its own source.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// What a [`Deliverer`] is made of.
pub struct Parts {
    pub store: Arc<dyn Store>,
    pub provider: Arc<dyn PushProvider>,
    /// What sends to destinations.
    pub destinations: Arc<Senders>,
    /// What destinations' settings are opened with.
    pub secrets_key: Option<SecretsKey>,
    pub queue: Arc<dyn JobQueue>,
    pub retry: RetryPolicy,
    /// How long a claim is its worker's. A worker that dies mid-send holds
    /// it until then; afterwards another worker sends the push (with the
    /// same collapse id, so the device shows it once).
    pub lease: Duration,
    pub clock: Clock,
    pub metrics: NotifierMetrics,
    /// Most pushes waiting for their push service at once, across jobs.
    pub max_in_flight: NonZeroUsize,
    /// Longest a project's recipient list is reused ([`RecipientCache`]).
    pub device_cache: Duration,
}

/// Everything `deliver` needs.
pub struct Deliverer {
    pub store: Arc<dyn Store>,
    pub provider: Arc<dyn PushProvider>,
    pub destinations: Arc<Senders>,
    pub queue: Arc<dyn JobQueue>,
    pub retry: RetryPolicy,
    pub lease: Duration,
    pub clock: Clock,
    pub metrics: NotifierMetrics,
    /// The event of every job, read in one store call per batch.
    events: Batcher<(Scope, uuid::Uuid), Option<Event>>,
    /// Claims of every job, gathered into one store call per batch.
    claims: Batcher<ClaimKey, DeliveryClaim>,
    /// Outcomes of every job, likewise.
    finishes: Batcher<(Scope, Delivery), bool>,
    /// Deliveries the recipients' rules filtered, likewise.
    withheld: Batcher<(Scope, Delivery), bool>,
    recipients: RecipientCache,
    /// One permit per push waiting for its push service.
    in_flight: Semaphore,
    max_in_flight: usize,
}

impl Deliverer {
    /// Builds the deliverer and starts its batchers (they stop when it is
    /// dropped).
    pub fn new(parts: Parts) -> Self {
        let Parts {
            store,
            provider,
            destinations,
            secrets_key,
            queue,
            retry,
            lease,
            clock,
            metrics,
            max_in_flight,
            device_cache,
        } = parts;
        let events = {
            let store = Arc::clone(&store);
            Batcher::spawn(BATCH, move |keys: Vec<(Scope, uuid::Uuid)>| {
                let store = Arc::clone(&store);
                async move { store.get_events(&keys).await }
            })
        };
        let claims = {
            let store = Arc::clone(&store);
            Batcher::spawn(BATCH, move |keys: Vec<ClaimKey>| {
                let store = Arc::clone(&store);
                // The lease runs from when the batch is claimed.
                let request = ClaimRequest {
                    now: clock.now(),
                    lease,
                    max_attempts: retry.max_attempts(),
                };
                async move { store.claim_deliveries(&keys, &request).await }
            })
        };
        let finishes = {
            let store = Arc::clone(&store);
            Batcher::spawn(BATCH, move |records: Vec<(Scope, Delivery)>| {
                let store = Arc::clone(&store);
                async move { store.finish_deliveries(&records).await }
            })
        };
        let withheld = {
            let store = Arc::clone(&store);
            Batcher::spawn(BATCH, move |records: Vec<(Scope, Delivery)>| {
                let store = Arc::clone(&store);
                async move { store.record_withheld(&records).await }
            })
        };
        Self {
            recipients: RecipientCache::new(Arc::clone(&store), secrets_key, device_cache),
            store,
            provider,
            destinations,
            queue,
            retry,
            lease,
            clock,
            metrics,
            events,
            claims,
            finishes,
            withheld,
            in_flight: Semaphore::new(max_in_flight.get()),
            max_in_flight: max_in_flight.get(),
        }
    }
}

impl Deliverer {
    /// Processes one notify job.
    pub async fn deliver(&self, job: &NotifyJob) -> Result<JobOutcome, DeliverError> {
        let listed = self.recipients.list(&job.scope).await?;
        if listed.is_empty() {
            // Nothing to send, so the event itself need not be read: it
            // settles from the deliveries it may have (a device deleted
            // since an earlier try), or as skipped, in one store call.
            self.settle_from_deliveries(&job.scope, job.event_id, &[])
                .await?;
            return Ok(JobOutcome::Done);
        }
        let Some(event) = self.events.call((job.scope.clone(), job.event_id)).await? else {
            tracing::warn!("event not found; nothing to send");
            return Ok(JobOutcome::Done);
        };
        if !event.notify {
            self.settle(&event, NotificationState::Skipped).await?;
            return Ok(JobOutcome::Done);
        }
        let devices = self.sort_out(&event, &listed, job).await?;
        tracing::info!(recipients = devices.len(), "sending");

        // One delay for every device of this job that needs a retry: the
        // deliveries record it as their earliest next try, and the retry
        // job is published with it.
        let retry_delay = self.retry.push_backoff(job.attempt + 1);
        // Collected first: a lazily mapped stream of borrowing futures trips
        // the compiler's Send inference for spawned tasks.
        let subject = Subject {
            scope: &event.scope,
            id: event.id,
            alert: Alert::of(&event),
            message: devices
                .iter()
                .any(|r| r.is_destination())
                .then(|| Message::of_event(&event)),
        };
        let sends: Vec<_> = devices
            .iter()
            .map(|device| self.send_one(&subject, device, retry_delay))
            .collect();
        let results: Vec<Result<Sent, DeliverError>> = stream::iter(sends)
            // The in-flight limit bounds the sends; this only bounds how
            // many claims one job has waiting at once.
            .buffer_unordered(self.max_in_flight)
            .collect()
            .await;
        let (mut retry, mut wait, mut wait_until) = (Vec::new(), Vec::new(), None);
        let mut retry_delay = retry_delay;
        let mut gave_up = false;
        for result in results {
            match result? {
                Sent::Delivered | Sent::Final => {}
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
            let delay = retry::recheck_delay(until, self.clock.now());
            self.again(job, job.attempt, wait, delay, "lease").await?;
            tracing::info!(
                delay_ms = delay.as_millis() as u64,
                "deliveries held elsewhere; looking again when their lease or retry is due"
            );
        }
        if settled_here {
            let eligible: Vec<uuid::Uuid> = devices.iter().map(|d| d.id).collect();
            self.settle_from_deliveries(&event.scope, event.id, &eligible)
                .await?;
        }
        Ok(if gave_up {
            JobOutcome::DeadLetter
        } else {
            JobOutcome::Done
        })
    }

    /// The active recipients of the job that get the alert now. On a
    /// job's first pass each recipient's rules are applied ([`verdict`]),
    /// and what they filter or hold is recorded as its delivery's outcome.
    /// A recipient whose delivery already has a record (this job was
    /// redelivered) goes to the claim, which answers by that record: the
    /// first decision stands, and no alert is held twice. A later pass
    /// (`job.devices`) is for recipients already decided to get it.
    async fn sort_out<'a>(
        &self,
        event: &Event,
        listed: &'a [Recipient],
        job: &NotifyJob,
    ) -> Result<Vec<&'a Recipient>, DeliverError> {
        let active = listed.iter().filter(|d| d.active);
        if let Some(only) = &job.devices {
            return Ok(active.filter(|d| only.contains(&d.id)).collect());
        }
        let now = self.clock.now();
        // Holding and counting toward a burst are not idempotent by the
        // record alone: when a device of the event may be held, what an
        // earlier pass decided is read first (one read per such event).
        let decided: Vec<uuid::Uuid> = if active
            .clone()
            .any(|d| d.rules.quiet_hours.is_some() || d.rules.burst.is_some())
        {
            let earlier = self.store.list_deliveries(&event.scope, event.id).await?;
            earlier.iter().map(|d| d.device_id).collect()
        } else {
            Vec::new()
        };
        let mut send = Vec::new();
        let mut withheld = Vec::new();
        for device in active {
            if decided.contains(&device.id) {
                send.push(device);
                continue;
            }
            let held = match verdict::verdict(&device.rules, event, now) {
                Verdict::Send => None,
                Verdict::Filtered(reason) => {
                    withheld.push((device, DeliveryState::Filtered(reason)));
                    continue;
                }
                Verdict::Quiet { ends } => Some((HoldReason::QuietHours, ends)),
                Verdict::Burst(burst) => match self
                    .store
                    .admit_alert(&event.scope, device.id, &burst, now)
                    .await?
                {
                    Admission::Admitted => None,
                    Admission::Over { window_ends } => Some((HoldReason::Burst, window_ends)),
                },
            };
            let Some((reason, due)) = held else {
                send.push(device);
                continue;
            };
            match self
                .store
                .hold_alert(&event.scope, device.id, reason, due, event.id)
                .await?
            {
                Holding::Held { .. } => withheld.push((device, DeliveryState::Held(reason))),
                // Its summary is already going out: this alert goes now.
                Holding::Closed => send.push(device),
            }
        }
        let records = withheld.iter().map(|(device, state)| {
            let record = verdict::withheld(event, device.id, *state, now);
            self.withheld.call((event.scope.clone(), record))
        });
        let written = futures::future::try_join_all(records).await?;
        for ((device, state), written) in withheld.into_iter().zip(written) {
            if written {
                self.metrics.count_withheld(state);
            } else {
                send.push(device);
            }
        }
        Ok(send)
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

    /// Settles the event once every delivery that can still happen (for a
    /// device still `eligible`) is final ([`common::store::settled_state`]).
    async fn settle_from_deliveries(
        &self,
        scope: &Scope,
        event_id: uuid::Uuid,
        eligible: &[uuid::Uuid],
    ) -> Result<(), DeliverError> {
        if let Some(state) = self
            .store
            .settle_notification(scope, event_id, eligible)
            .await?
        {
            tracing::info!(state = state.as_str(), "notification settled");
        }
        Ok(())
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

/// An event as the notifier reads it, for the unit tests of its steps.
#[cfg(test)]
pub(crate) fn sample_event(channel: &str, title: &str, priority: common::store::Priority) -> Event {
    Event {
        id: uuid::Uuid::now_v7(),
        scope: Scope::new("o", "p"),
        channel_name: channel.into(),
        title: title.into(),
        description: None,
        icon: None,
        tags: vec![],
        metadata: Default::default(),
        user_id: None,
        notify: true,
        source: None,
        priority,
        alert_key: None,
        parser: common::store::Parser::Text,
        url: None,
        created_at: common::time::now(),
        notification: NotificationState::Queued,
        request_id: None,
        notification_due_at: None,
    }
}

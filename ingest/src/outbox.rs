//! The outbox: every event with `notify` true is stored `pending` first, then
//! its job is published with a confirm and the event marked `queued`. When
//! the broker is down or does not confirm, the request still succeeds and the
//! relay publishes the job later, so no such event is left without a job.
//! With the in-process queue of the embedded mode the event is stored
//! `queued` at once and its job handed over after that one write
//! ([`Outbox::stored_state`] says why that is safe).
//!
//! The relay is also the watchdog for jobs lost after they were queued (with
//! a crashed in-process queue, or dropped by a broker): an unsettled event
//! carries the time it is due, and an event still unsettled then gets its
//! job published again. Each look pushes the next one further out (at
//! least `requeue_after`, then as long as the event has already waited, up
//! to an hour), so an outage of every notifier does not flood the queue.
//! Duplicate jobs are harmless: the notifier claims each (event, device)
//! delivery once.
//!
//! The relay also publishes the job of each summary of held alerts once
//! its window has ended (the end of a device's quiet hours, or of its
//! burst window), and again every `requeue_after` until the notifier
//! marks it done: a summary lives in the store, not in a delayed message,
//! so it goes out whichever process dies, in either mode.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use common::{
    jobs::{Job, SummaryJob},
    queue::JobQueue,
    store::{Event, NotificationState, Store},
};
use tokio::sync::watch;
use tracing::Instrument as _;

use crate::metrics::IngestMetrics;

/// Events read from the store per page; the relay reads page after page
/// until the backlog is done.
const RELAY_PAGE: u32 = 200;
/// The longest wait between two looks at an event that stays unsettled.
const MAX_REQUEUE_WAIT: Duration = Duration::from_secs(3600);
/// Unsettled states: the relay's work.
const UNSETTLED: [NotificationState; 2] = [NotificationState::Pending, NotificationState::Queued];

/// When the relay looks at events.
#[derive(Debug, Clone, Copy)]
pub struct RelayTimes {
    /// How old a `pending` event must be before the relay takes it over from
    /// the request that stored it.
    pub grace: Duration,
    /// How long a `queued` event may stay unsettled before its job is
    /// presumed lost and published again.
    pub requeue_after: Duration,
}

pub struct Outbox {
    store: Arc<dyn Store>,
    queue: Arc<dyn JobQueue>,
    metrics: IngestMetrics,
    times: RelayTimes,
}

fn after(now: DateTime<Utc>, wait: Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX)
}

impl Outbox {
    pub fn new(
        store: Arc<dyn Store>,
        queue: Arc<dyn JobQueue>,
        metrics: IngestMetrics,
        times: RelayTimes,
    ) -> Self {
        Self {
            store,
            queue,
            metrics,
            times,
        }
    }

    /// The state a new event asking for a push is stored in at `now`, and
    /// when the relay is to look at it.
    ///
    /// With a broker, `pending`, taken over by the relay after `grace`
    /// unless the request publishes its job and labels it `queued` first:
    /// the broker may be away, and only the label says it took the job.
    /// With the in-process queue, `queued` at once, so the request writes
    /// once: its publish fails only once the process is stopping, and a
    /// job it holds is lost with the process whatever the label says, so
    /// every start publishes every unsettled event's job again
    /// ([`Outbox::recover`]). A write that commits after its request gave
    /// up (a 503) publishes nothing; its event waits for the relay's
    /// `requeue_after`, or for a retry under its Idempotency-Key, which
    /// publishes the job of the event it finds ([`Outbox::hand_over`]).
    pub fn stored_state(&self, now: DateTime<Utc>) -> (NotificationState, DateTime<Utc>) {
        if self.queue.is_durable() {
            (NotificationState::Pending, after(now, self.times.grace))
        } else {
            (
                NotificationState::Queued,
                after(now, self.times.requeue_after),
            )
        }
    }

    /// When an event queued at `now` is next looked at: at least
    /// `requeue_after` from now, and at least as long as it already waited.
    fn queued_due(&self, event: &Event, now: DateTime<Utc>) -> DateTime<Utc> {
        let waited = (now - event.created_at).to_std().unwrap_or_default();
        let longest = MAX_REQUEUE_WAIT.max(self.times.requeue_after);
        after(now, waited.clamp(self.times.requeue_after, longest))
    }

    /// Publishes the job of an event the request just stored (or found
    /// stored by an earlier try), as its state ([`Outbox::stored_state`])
    /// asks: a `pending` one's, labelling it `queued`; with the in-process
    /// queue, a `queued` one's too, as no one else will. Returns the state
    /// the event is in afterwards; failures leave it to the relay.
    pub async fn hand_over(&self, event: &Event) -> NotificationState {
        match event.notification {
            NotificationState::Pending => self.try_dispatch(event).await,
            NotificationState::Queued if !self.queue.is_durable() => self
                .publish(event)
                .await
                .then_some(NotificationState::Queued),
            _ => None,
        }
        .unwrap_or(event.notification)
    }

    /// Publishes `event`'s job; false (logged and counted) when the queue
    /// did not take it.
    async fn publish(&self, event: &Event) -> bool {
        let published = self.queue.publish(&Job::for_event(event)).await;
        self.metrics.published(published.is_ok());
        if let Err(e) = &published {
            tracing::warn!(eventId = %event.id, error = %common::telemetry::chain(e), "job not published; the relay will retry");
        }
        published.is_ok()
    }

    /// Publishes an unsettled event's job and labels the event `queued`;
    /// `None` when the job was not published.
    async fn try_dispatch(&self, event: &Event) -> Option<NotificationState> {
        if !self.publish(event).await {
            return None;
        }
        let now = common::time::now();
        match self
            .store
            .set_notification_state(
                &event.scope,
                event.id,
                &UNSETTLED,
                NotificationState::Queued,
                Some(self.queued_due(event, now)),
            )
            .await
        {
            Ok(true) => Some(NotificationState::Queued),
            // A fast notifier already settled it.
            Ok(false) => Some(NotificationState::Queued),
            Err(e) => {
                // The job is on the queue; only the label lags behind (the
                // relay may publish it again, harmlessly).
                tracing::warn!(eventId = %event.id, error = %e, "could not mark the event queued");
                Some(event.notification)
            }
        }
    }

    /// Publishes the jobs of every event in `states` due by `due_before`,
    /// page after page, until none is left or the broker fails. Returns
    /// how many were published.
    pub async fn relay(&self, states: &[NotificationState], due_before: DateTime<Utc>) -> usize {
        let mut published = 0;
        let mut cursor = None;
        loop {
            let page = match self
                .store
                .events_due(states, due_before, cursor, RELAY_PAGE)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox relay cannot read the store");
                    break;
                }
            };
            for event in &page {
                // The relay's lines about an event carry the id of the
                // request that recorded it, like the rest of its story.
                let span = tracing::info_span!(
                    "relay",
                    requestId = event.request_id.as_deref().unwrap_or("-"),
                );
                if self.try_dispatch(event).instrument(span).await.is_none() {
                    // The broker is away; try the rest next pass.
                    self.log(published);
                    return published;
                }
                published += 1;
            }
            match page.last() {
                Some(last) if page.len() == RELAY_PAGE as usize => cursor = Some(last.id),
                _ => break,
            }
        }
        self.log(published);
        published
    }

    fn log(&self, published: usize) {
        if published > 0 {
            tracing::info!(published, "outbox relay published jobs");
        }
    }

    /// Publishes the job of every summary whose window ended by `ended_by`
    /// and whose job is due by `due_before`, page after page, and pushes
    /// its next look `requeue_after` out: a summary is looked at until its
    /// push is done, whoever dies meanwhile. Returns how many were
    /// published.
    pub async fn relay_summaries(
        &self,
        ended_by: DateTime<Utc>,
        due_before: DateTime<Utc>,
    ) -> usize {
        let mut published = 0;
        let mut cursor = None;
        loop {
            let page = match self
                .store
                .summaries_due(ended_by, due_before, cursor, RELAY_PAGE)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox relay cannot read the summaries");
                    break;
                }
            };
            for summary in &page {
                let job = Job::SummaryV1(SummaryJob {
                    summary_id: summary.id,
                    scope: summary.scope.clone(),
                    device_id: summary.device_id,
                    due_at: summary.due_at,
                    attempt: 0,
                });
                if let Err(e) = self.queue.publish(&job).await {
                    tracing::warn!(summaryId = %summary.id, error = %common::telemetry::chain(&e), "summary job not published; the relay will retry");
                    return published;
                }
                let next = after(common::time::now(), self.times.requeue_after);
                if let Err(e) = self
                    .store
                    .set_summary_recheck(&summary.scope, summary.id, next)
                    .await
                {
                    tracing::warn!(summaryId = %summary.id, error = %e, "could not push the summary's next look out");
                }
                published += 1;
            }
            match page.last() {
                Some(last) if page.len() == RELAY_PAGE as usize => cursor = Some(last.id),
                _ => break,
            }
        }
        if published > 0 {
            tracing::info!(published, "outbox relay published summary jobs");
        }
        published
    }

    /// Publishes every job a previous run of this process may have left
    /// unpublished or lost (the embedded mode's in-process queue keeps
    /// nothing across a restart): every unsettled event, due or not, and
    /// every summary whose window ended and that is not done.
    pub async fn recover(&self) -> usize {
        let now = common::time::now();
        self.relay(&UNSETTLED, DateTime::<Utc>::MAX_UTC).await
            + self.relay_summaries(now, DateTime::<Utc>::MAX_UTC).await
    }

    /// Publishes every `pending` job, whatever its age, until none is left or
    /// the broker fails. For shutdown, once in-flight requests are done:
    /// nothing this process accepted waits for another replica's relay.
    pub async fn flush(&self) {
        let flushed = self
            .relay(&[NotificationState::Pending], DateTime::<Utc>::MAX_UTC)
            .await;
        tracing::info!(flushed, "outbox flushed");
    }

    /// Relays every `interval` until `stop` turns true, then flushes.
    pub async fn run_relay(self: Arc<Self>, interval: Duration, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = common::time::now();
                    self.relay(&UNSETTLED, now).await;
                    self.relay_summaries(now, now).await;
                }
                _ = stop.changed() => {
                    self.flush().await;
                    return;
                }
            }
        }
    }
}

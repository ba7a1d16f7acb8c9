//! The outbox: every event with `notify` true is stored `pending` first, then
//! its job is published with a confirm and the event marked `queued`. When
//! the broker is down or does not confirm, the request still succeeds and the
//! relay publishes the job later, so no such event is left without a job.
//! Duplicate jobs (a relay racing a slow confirm, two replicas relaying) are
//! harmless: the notifier claims each (event, device) delivery once.

use std::{sync::Arc, time::Duration};

use common::{
    jobs::Job,
    queue::JobQueue,
    store::{Event, NotificationState, Store},
};
use tokio::sync::watch;
use tracing::Instrument as _;

use crate::metrics::IngestMetrics;

/// Events handed to the relay per pass.
const RELAY_BATCH: u32 = 200;

pub struct Outbox {
    store: Arc<dyn Store>,
    queue: Arc<dyn JobQueue>,
    metrics: IngestMetrics,
}

impl Outbox {
    pub fn new(store: Arc<dyn Store>, queue: Arc<dyn JobQueue>, metrics: IngestMetrics) -> Self {
        Self {
            store,
            queue,
            metrics,
        }
    }

    /// Publishes the job of a freshly stored `pending` event. Returns the
    /// state the event is in afterwards; failures leave it to the relay.
    pub async fn dispatch(&self, event: &Event) -> NotificationState {
        let job = Job::notify(event.id, event.scope.clone(), event.request_id.clone());
        let published = self.queue.publish(&job).await;
        self.metrics.published(published.is_ok());
        if let Err(e) = published {
            tracing::warn!(eventId = %event.id, error = %e, "job not published; the relay will retry");
            return NotificationState::Pending;
        }
        match self
            .store
            .set_notification_state(
                &event.scope,
                event.id,
                &[NotificationState::Pending],
                NotificationState::Queued,
            )
            .await
        {
            Ok(true) => NotificationState::Queued,
            // A fast notifier already settled it.
            Ok(false) => NotificationState::Queued,
            Err(e) => {
                // The job is on the queue; only the label lags behind.
                tracing::warn!(eventId = %event.id, error = %e, "could not mark the event queued");
                NotificationState::Pending
            }
        }
    }

    /// Publishes the jobs of events in `states` created before `now - grace`.
    /// Returns how many were published.
    pub async fn relay_once(&self, states: &[NotificationState], grace: Duration) -> usize {
        let before = common::time::now() - grace;
        let events = match self
            .store
            .events_in_notification_state(states, before, RELAY_BATCH)
            .await
        {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "outbox relay cannot read the store");
                return 0;
            }
        };
        let mut published = 0;
        for event in &events {
            // The relay's lines about an event carry the id of the request
            // that recorded it, like the rest of its story.
            let span = tracing::info_span!(
                "relay",
                requestId = event.request_id.as_deref().unwrap_or("-"),
            );
            if self.dispatch(event).instrument(span).await == NotificationState::Pending {
                // The broker is still away; try the rest next pass.
                break;
            }
            published += 1;
        }
        if published > 0 {
            tracing::info!(published, "outbox relay published pending jobs");
        }
        published
    }

    /// Publishes every `pending` job, whatever its age, until none is left or
    /// the broker fails. For shutdown, once in-flight requests are done:
    /// nothing this process accepted waits for another replica's relay.
    pub async fn flush(&self) {
        let mut flushed = 0;
        loop {
            let published = self
                .relay_once(&[NotificationState::Pending], Duration::ZERO)
                .await;
            flushed += published;
            if published < RELAY_BATCH as usize {
                break;
            }
        }
        tracing::info!(flushed, "outbox flushed");
    }

    /// Relays every `interval` until `stop` turns true, then flushes.
    pub async fn run_relay(
        self: Arc<Self>,
        interval: Duration,
        grace: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.relay_once(&[NotificationState::Pending], grace).await;
                }
                _ = stop.changed() => {
                    self.flush().await;
                    return;
                }
            }
        }
    }
}

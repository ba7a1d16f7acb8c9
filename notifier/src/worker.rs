//! The consume loop: takes received jobs, processes up to `concurrency` at
//! once, and settles each message only after its deliveries are recorded
//! (ack, dead-letter, or requeue). On stop it takes nothing new, gives back
//! the jobs it had not started, and waits for the ones in hand.

use std::{sync::Arc, time::Duration};

use common::{jobs::Job, queue::Received};
use tokio::{
    sync::{Semaphore, mpsc, watch},
    task::JoinSet,
};
use tracing::Instrument as _;

use crate::{
    deliver::{Deliverer, JobOutcome},
    metrics::RetryLabels,
};

/// Where received jobs come from: RabbitMQ's consumer task (bounded by the
/// prefetch) or the embedded mode's in-process queue.
pub enum Inbox {
    Bounded(mpsc::Receiver<Received>),
    Unbounded(mpsc::UnboundedReceiver<Received>),
}

impl Inbox {
    async fn recv(&mut self) -> Option<Received> {
        match self {
            Self::Bounded(rx) => rx.recv().await,
            Self::Unbounded(rx) => rx.recv().await,
        }
    }

    fn try_recv(&mut self) -> Option<Received> {
        match self {
            Self::Bounded(rx) => rx.try_recv().ok(),
            Self::Unbounded(rx) => rx.try_recv().ok(),
        }
    }

    fn close(&mut self) {
        match self {
            Self::Bounded(rx) => rx.close(),
            Self::Unbounded(rx) => rx.close(),
        }
    }
}

/// Runs jobs from `inbox` until it closes or `stop` turns true.
pub async fn run(
    deliverer: Arc<Deliverer>,
    mut inbox: Inbox,
    concurrency: usize,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut tasks = JoinSet::new();
    loop {
        if *stop.borrow() {
            break;
        }
        tokio::select! {
            _ = stop.changed() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            permit = Arc::clone(&permits).acquire_owned() => {
                let Ok(permit) = permit else { break };
                let received = tokio::select! {
                    _ = stop.changed() => break,
                    received = inbox.recv() => received,
                };
                let Some(received) = received else { break };
                let deliverer = Arc::clone(&deliverer);
                tasks.spawn(async move {
                    process(&deliverer, received).await;
                    drop(permit);
                });
            }
        }
    }
    // Stopping: what was prefetched but not started goes back to the queue.
    inbox.close();
    let mut returned = 0;
    while let Some(received) = inbox.try_recv() {
        if let Err(e) = received.acker.requeue().await {
            tracing::warn!(error = %e, "could not give a job back; the broker will redeliver it");
        }
        returned += 1;
    }
    let in_hand = tasks.len();
    while tasks.join_next().await.is_some() {}
    tracing::info!(returned, finished = in_hand, "worker stopped");
}

/// Processes one received message and settles it.
async fn process(deliverer: &Deliverer, received: Received) {
    let Received {
        job,
        redelivered,
        acker,
    } = received;
    let metrics = &deliverer.metrics;
    metrics.jobs_consumed.inc();
    let job = match job {
        Ok(Job::NotifyV1(job)) => job,
        Err(reason) => {
            tracing::error!(%reason, "unreadable job; dead-lettering it");
            metrics.jobs_dead_lettered.inc();
            let _ = acker.dead_letter().await;
            return;
        }
    };
    let span = tracing::info_span!(
        "job",
        requestId = job.request_id.as_deref().unwrap_or("-"),
        eventId = %job.event_id,
        attempt = job.attempt,
        redelivered,
    );
    async {
        let settled = match deliverer.deliver(&job).await {
            Ok(JobOutcome::Done) => acker.ack().await,
            Ok(JobOutcome::DeadLetter) => {
                tracing::warn!("deliveries gave up after the last retry; job dead-lettered");
                metrics.jobs_dead_lettered.inc();
                acker.dead_letter().await
            }
            Err(e) => {
                // The store or the queue failed mid-way: nothing is lost,
                // claims make the next attempt skip what was sent.
                tracing::warn!(error = %e, "job failed; it will be retried");
                let again = Job::NotifyV1(job.clone());
                let delay = deliverer
                    .retry
                    .delay_with_jitter(1)
                    .max(Duration::from_millis(100));
                match deliverer.queue.publish_delayed(&again, delay).await {
                    Ok(()) => {
                        metrics
                            .job_retries
                            .get_or_create(&RetryLabels { reason: "error" })
                            .inc();
                        acker.ack().await
                    }
                    Err(_) => acker.requeue().await,
                }
            }
        };
        if let Err(e) = settled {
            tracing::warn!(error = %e, "could not settle the job message; it will be redelivered");
        }
    }
    .instrument(span)
    .await;
}

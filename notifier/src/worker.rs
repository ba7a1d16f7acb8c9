//! The consume loop: takes received jobs, processes up to `concurrency` at
//! once, and settles each message only after its deliveries are recorded
//! (ack, dead-letter, or requeue). On stop it takes nothing new, gives back
//! the jobs it had not started, and waits for the ones in hand. What
//! happens to a job that failed (again after a delay, or dead-lettered) is
//! the retry policy's decision (`crate::retry`); errors are logged with
//! their causes.

use std::{num::NonZeroUsize, sync::Arc};

use common::{
    jobs::{Job, NotifyJob, SummaryJob},
    queue::{JobConsumer, Received},
    store::NotificationState,
    telemetry::chain,
};
use tokio::{
    sync::{Semaphore, watch},
    task::JoinSet,
};
use tracing::Instrument as _;

use crate::{
    deliver::{DeliverError, Deliverer, JobOutcome},
    metrics::{DeadLetterLabels, RetryLabels},
    retry::classify,
};

/// Runs jobs from `consumer` until it runs dry or `stop` turns true, then
/// closes it.
pub async fn run(
    deliverer: Arc<Deliverer>,
    mut consumer: Box<dyn JobConsumer>,
    concurrency: NonZeroUsize,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(concurrency.get()));
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
                    received = consumer.next() => received,
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
    let left = consumer.stop().await;
    let returned = left.len();
    for received in left {
        if let Err(e) = received.acker.requeue().await {
            tracing::warn!(error = %chain(&e), "could not give a job back; the broker will redeliver it");
        }
    }
    let in_hand = tasks.len();
    while tasks.join_next().await.is_some() {}
    consumer.close().await;
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
        Ok(Job::SummaryV1(job)) => {
            summarize(deliverer, job, redelivered, acker).await;
            return;
        }
        Err(e) => {
            tracing::error!(reason = %chain(&e), "unreadable job; dead-lettering it");
            dead_lettered(deliverer, "unreadable");
            let _ = acker.dead_letter().await;
            return;
        }
    };
    let span = tracing::info_span!(
        "job",
        requestId = job.request_id.as_deref().unwrap_or("-"),
        eventId = %job.event_id,
        attempt = job.attempt,
        priority = job.priority.as_str(),
        redelivered,
    );
    async {
        let settled = match deliverer.deliver(&job).await {
            Ok(JobOutcome::Done) => acker.ack().await,
            Ok(JobOutcome::DeadLetter) => {
                tracing::warn!("deliveries gave up after the last retry; job dead-lettered");
                dead_lettered(deliverer, "gave_up");
                acker.dead_letter().await
            }
            Err(e) => match failed(deliverer, &job, &e).await {
                Failed::Again => acker.ack().await,
                Failed::GiveBack => acker.requeue().await,
                Failed::Poison => acker.dead_letter().await,
            },
        };
        if let Err(e) = settled {
            tracing::warn!(error = %chain(&e), "could not settle the job message; it will be redelivered");
        }
    }
    .instrument(span)
    .await;
}

/// Processes one summary job and settles its message. A failure of ours
/// (the store or the queue) is tried again after the retry policy's
/// delay; should scheduling that fail too, the message goes back to the
/// queue. The relay publishes the job again anyway while the summary is
/// not done, so a summary outlives any number of failures.
async fn summarize(
    deliverer: &Deliverer,
    job: SummaryJob,
    redelivered: bool,
    acker: Box<dyn common::queue::Acknowledge>,
) {
    let span = tracing::info_span!(
        "summary",
        summaryId = %job.summary_id,
        deviceId = %job.device_id,
        attempt = job.attempt,
        redelivered,
    );
    async {
        let settled = match deliverer.summarize(&job).await {
            Ok(JobOutcome::Done) => acker.ack().await,
            Ok(JobOutcome::DeadLetter) => {
                tracing::warn!("the summary's push gave up after the last retry");
                dead_lettered(deliverer, "gave_up");
                acker.dead_letter().await
            }
            Err(e) => {
                tracing::warn!(error = %chain(&e), "summary failed; it will be retried");
                let again = Job::SummaryV1(job.clone());
                let delay = deliverer.retry.error_delay(1);
                match deliverer.queue.publish_delayed(&again, delay).await {
                    Ok(()) => acker.ack().await,
                    Err(_) => acker.requeue().await,
                }
            }
        };
        if let Err(e) = settled {
            tracing::warn!(error = %chain(&e), "could not settle the job message; it will be redelivered");
        }
    }
    .instrument(span)
    .await;
}

/// What to do with a job whose processing failed with an error of ours.
enum Failed {
    /// A copy was scheduled with a backoff delay: ack this one.
    Again,
    /// Could not schedule a copy: give this one back to the queue.
    GiveBack,
    /// It fails the same way every time: dead-letter it.
    Poison,
}

/// Arranges what the retry policy decides for a job after `error`. Nothing
/// is lost by retrying: claims make the next attempt skip what was sent.
/// An outage (store or broker unavailable) is waited out however long it
/// lasts, with capped backoff; any other error is the same next time, so
/// past `max_retries` the job is dead-lettered, its event marked failed,
/// and the poison counted.
async fn failed(deliverer: &Deliverer, job: &NotifyJob, error: &DeliverError) -> Failed {
    let failures = job.failures + 1;
    let policy = &deliverer.retry;
    if policy.gives_up_on_error(failures, classify::is_transient(error)) {
        tracing::error!(error = %chain(error), failures, "job keeps failing; dead-lettering it");
        dead_lettered(deliverer, "poison");
        let event = deliverer
            .store
            .set_notification_state(
                &job.scope,
                job.event_id,
                &[NotificationState::Pending, NotificationState::Queued],
                NotificationState::Failed,
                None,
            )
            .await;
        if let Err(e) = event {
            tracing::warn!(error = %chain(&e), "could not mark the poisoned event failed");
        }
        return Failed::Poison;
    }
    tracing::warn!(error = %chain(error), failures, "job failed; it will be retried");
    let again = Job::NotifyV1(NotifyJob {
        failures,
        ..job.clone()
    });
    let delay = policy.error_delay(failures);
    match deliverer.queue.publish_delayed(&again, delay).await {
        Ok(()) => {
            deliverer
                .metrics
                .job_retries
                .get_or_create(&RetryLabels { reason: "error" })
                .inc();
            Failed::Again
        }
        Err(e) => {
            tracing::warn!(error = %chain(&e), "could not schedule the retry; giving the job back");
            Failed::GiveBack
        }
    }
}

fn dead_lettered(deliverer: &Deliverer, reason: &'static str) {
    deliverer
        .metrics
        .jobs_dead_lettered
        .get_or_create(&DeadLetterLabels { reason })
        .inc();
}

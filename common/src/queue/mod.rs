//! The job queue between ingest and the notifier, as a symmetric pair: a
//! producer ([`JobQueue`]) that ingest publishes notify jobs to, and a
//! consumer ([`JobConsumer`]) the notifier's worker takes them from. [`open`]
//! makes the pair for either implementation: RabbitMQ ([`amqp`]: a durable
//! quorum queue, persistent messages, publisher confirms, delayed retry
//! queues, a dead-letter queue) or the in-process queue of the embedded
//! single-binary mode ([`local`]).
//!
//! The queue decides nothing about retries: it holds a job back for the
//! delays it is given ([`ConsumeSettings::delays`]), and the notifier's
//! retry policy (`notifier::retry`) decides which delays those are and when
//! a job is published again. Its errors ([`QueueError`]) keep the broker's
//! error as their source.

pub mod amqp;
pub mod local;

use std::{
    num::NonZeroU16,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;

use crate::jobs::{Job, JobDecodeError};

/// Which queue carries the jobs.
#[derive(Debug, Clone)]
pub enum QueueConfig {
    /// A channel inside one process (embedded mode): nothing survives a
    /// restart, so the outbox relay queues unfinished work again at start.
    InProcess,
    /// RabbitMQ, shared by any number of ingest and notifier processes.
    Amqp(amqp::AmqpConfig),
}

/// Opens both ends of the queue `config` selects. Nothing is connected yet:
/// the producer connects on its first publish (so ingest starts, and takes
/// events, while the broker is down) and the consumer when it is started.
/// A process that only publishes drops the consumer.
pub fn open(config: &QueueConfig) -> (Arc<dyn JobQueue>, Box<dyn JobConsumer>) {
    match config {
        QueueConfig::InProcess => {
            let (producer, consumer) = local::open();
            (Arc::new(producer), Box::new(consumer))
        }
        QueueConfig::Amqp(amqp) => {
            let (producer, consumer) = amqp::open(amqp.clone());
            (Arc::new(producer), Box::new(consumer))
        }
    }
}

/// Why the queue could not take, or settle, a job. Each variant says what
/// failed; the broker's own error, when there is one, is its
/// [`source`](std::error::Error::source), so a log line with the chain
/// (`common::telemetry::chain`) shows both.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The broker failed `action` (connecting, publishing, settling): it is
    /// down, unreachable, or closed the channel.
    #[error("queue unavailable: {action} failed")]
    Broker {
        /// What was being done, in a few words ("connecting to the broker").
        action: &'static str,
        #[source]
        source: lapin::Error,
    },
    /// The broker did not answer `action` within the configured timeout.
    #[error("queue unavailable: {action} timed out")]
    TimedOut {
        action: &'static str,
        #[source]
        source: tokio::time::error::Elapsed,
    },
    /// A connection attempt failed moments ago: publishes fail at once
    /// until the pause is over instead of each waiting for its own attempt.
    #[error("queue unavailable: broker unreachable (retrying shortly)")]
    Reconnecting,
    /// The in-process worker has stopped (the process is shutting down).
    #[error("queue unavailable: the in-process worker has stopped")]
    Stopped,
    /// The broker refused the message (a negative publisher confirm).
    #[error("queue refused the job: the broker did not confirm the message")]
    Nacked,
    /// The channel does not confirm publishes, so nothing can be promised.
    #[error("queue refused the job: publisher confirms are off")]
    ConfirmsOff,
    /// A delayed publish through a producer whose consumer was never
    /// started: no retry queues were declared to hold it.
    #[error(
        "queue refused the job: no retry queues: delayed jobs go through a started consumer's producer"
    )]
    NoRetryQueues,
}

/// Hands jobs to the queue. `Ok` means the queue has taken responsibility
/// for the job (for RabbitMQ: a publisher confirm for a persistent message).
#[async_trait]
pub trait JobQueue: Send + Sync + 'static {
    async fn publish(&self, job: &Job) -> Result<(), QueueError>;
    /// Publishes a job to be delivered after `delay` (retry backoff). Only
    /// the producer of a started consumer's pair can: the delays wait in
    /// the consumer's retry queues.
    async fn publish_delayed(&self, job: &Job, delay: Duration) -> Result<(), QueueError>;
    /// Whether a job the queue has taken survives a restart of this process.
    /// When it does not, the publisher must queue unfinished work again
    /// when it starts.
    fn is_durable(&self) -> bool;
}

/// How a consumer takes jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeSettings {
    /// Most jobs received and not yet settled at once.
    pub prefetch: NonZeroU16,
    /// Every delay a job may be published with ([`JobQueue::publish_delayed`]),
    /// shortest first: the retry policy's distinct delays
    /// (`notifier::retry::RetryPolicy::delays`). RabbitMQ declares one delay
    /// queue for each.
    pub delays: Vec<Duration>,
}

/// Takes jobs from the queue: started once, read until stopped, then
/// closed once every job it gave out is settled.
#[async_trait]
pub trait JobConsumer: Send + 'static {
    /// Starts consuming in the background (for RabbitMQ: connecting,
    /// declaring the retry queues, reconnecting after failures).
    fn start(&mut self, settings: ConsumeSettings);
    /// The next job; `None` once the consumer is stopped or was never
    /// started. Cancel-safe: a job is never lost by dropping the future.
    async fn next(&mut self) -> Option<Received>;
    /// Stops taking jobs and hands back the ones received but not yet given
    /// out, for the caller to give back ([`Acknowledge::requeue`]).
    async fn stop(&mut self) -> Vec<Received>;
    /// Closes the connection. Call after settling every job given out:
    /// settling needs the connection the job came on.
    async fn close(self: Box<Self>);
    /// Whether the consumer is taking jobs now (for readiness checks).
    fn readiness(&self) -> Readiness;
}

/// A shared view of whether a consumer is connected and taking jobs.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Readiness that is always true (a queue with no connection to lose).
    pub fn always() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }
}

/// What the worker does with a received job once it is done with it.
#[async_trait]
pub trait Acknowledge: Send + Sync {
    /// Done: remove it from the queue.
    async fn ack(&self) -> Result<(), QueueError>;
    /// Unprocessable: move it to the dead-letter queue.
    async fn dead_letter(&self) -> Result<(), QueueError>;
    /// Not processed (shutting down): give it back for another worker.
    async fn requeue(&self) -> Result<(), QueueError>;
}

/// A job taken from the queue, with the means to settle it.
pub struct Received {
    /// The job, or why its bytes are not a job this worker understands.
    pub job: Result<Job, JobDecodeError>,
    /// Whether the queue delivered it before (to another worker that died).
    pub redelivered: bool,
    pub acker: Box<dyn Acknowledge>,
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// The broker's error survives as the source, for the log line to show
    /// and for a caller to inspect.
    #[test]
    fn a_broker_failure_keeps_the_brokers_error_as_its_source() {
        let err = QueueError::Broker {
            action: "publishing",
            source: lapin::Error::from(std::io::Error::other("connection reset")),
        };
        assert_eq!(err.to_string(), "queue unavailable: publishing failed");
        let source = err.source().expect("a source");
        assert!(
            source.downcast_ref::<lapin::Error>().is_some(),
            "{source:?}"
        );
    }
}

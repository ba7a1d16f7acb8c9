//! The job queue between ingest and the notifier, as a symmetric pair: a
//! producer ([`JobQueue`]) that ingest publishes notify jobs to, and a
//! consumer ([`JobConsumer`]) the notifier's worker takes them from. [`open`]
//! makes the pair for either implementation: RabbitMQ ([`amqp`]: a durable
//! quorum queue, persistent messages, publisher confirms, delayed retry
//! queues, a dead-letter queue) or the in-process queue of the embedded
//! single-binary mode ([`local`]).

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
use rand::Rng as _;

use crate::jobs::Job;

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

/// Why a job could not be handed to the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The broker cannot be reached, or did not confirm in time.
    #[error("queue unavailable: {0}")]
    Unavailable(String),
    /// The broker refused the message (a negative confirm).
    #[error("queue refused the job: {0}")]
    Refused(String),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumeSettings {
    /// Most jobs received and not yet settled at once.
    pub prefetch: NonZeroU16,
    /// The delays failed jobs wait before they are tried again.
    pub retry: RetryPolicy,
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
    pub job: Result<Job, String>,
    /// Whether the queue delivered it before (to another worker that died).
    pub redelivered: bool,
    pub acker: Box<dyn Acknowledge>,
}

/// How failed deliveries are retried: exponential backoff with jitter,
/// capped, for a bounded number of attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay before the first retry.
    pub base: Duration,
    /// Longest delay between two tries.
    pub max: Duration,
    /// Retries after the first try; past them the job is dead-lettered.
    pub max_retries: u32,
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1-based), without jitter.
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The delay before retry `retry`, less up to a quarter at random, so
    /// retries of many jobs failing together spread out.
    pub fn delay_with_jitter(&self, retry: u32) -> Duration {
        let full = self.delay(retry);
        full.mul_f64(1.0 - rand::rng().random_range(0.0..0.25))
    }

    /// Every distinct delay the policy can ask for, shortest first.
    pub fn levels(&self) -> Vec<Duration> {
        let mut levels: Vec<Duration> = (1..=self.max_retries.max(1))
            .map(|r| self.delay(r))
            .collect();
        levels.dedup();
        levels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let policy = RetryPolicy {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
            max_retries: 6,
        };
        let delays: Vec<u64> = (1..=6).map(|r| policy.delay(r).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 10, 10]);
        assert_eq!(policy.levels().len(), 5);
        for r in 1..=6 {
            let jittered = policy.delay_with_jitter(r);
            assert!(jittered <= policy.delay(r) && jittered >= policy.delay(r).mul_f64(0.75));
        }
    }
}

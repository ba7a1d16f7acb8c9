//! The job queue between ingest and the notifier, behind one interface with
//! two implementations: RabbitMQ (durable quorum queue, persistent messages,
//! publisher confirms, delayed retry queues, a dead-letter queue) and an
//! in-process queue for the embedded single-binary mode.

pub mod amqp;
pub mod local;

use std::time::Duration;

use async_trait::async_trait;
use rand::Rng as _;

use crate::jobs::Job;

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
    /// Publishes a job to be delivered after `delay` (retry backoff).
    async fn publish_delayed(&self, job: &Job, delay: Duration) -> Result<(), QueueError>;
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

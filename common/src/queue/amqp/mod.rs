//! RabbitMQ through lapin.
//!
//! Topology, declared idempotently:
//! - by the producer (and the consumer, which needs it too): exchange
//!   `<prefix>` (direct) → quorum queue `<prefix>.notify`, whose rejected or
//!   too-often-redelivered messages go to exchange `<prefix>.dlx` → quorum
//!   queue `<prefix>.notify.dead`;
//! - by the consumer, from the delays it was started with
//!   ([`ConsumeSettings::delays`](super::ConsumeSettings::delays), the
//!   notifier's retry delays): one delay queue per delay,
//!   `<prefix>.notify.retry.<ms>ms`, with no consumer: messages wait
//!   there until their TTL runs out and are then dead-lettered back to
//!   `<prefix>` / `notify`. The producer of the consumer's pair publishes
//!   the delayed copies into them.
//!
//! Messages are persistent and every publish waits for the broker's confirm.
//!
//! [`producer`] publishes, [`consumer`] consumes, [`acks`] acknowledges
//! runs of done jobs with one frame, [`topology`] declares.

mod acks;
mod consumer;
mod producer;
mod topology;

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use tokio::sync::Mutex;

pub use self::{consumer::AmqpConsumer, producer::AmqpQueue};
use super::{QueueError, Readiness};

/// Routing key of notify jobs.
const NOTIFY: &str = "notify";

/// How to reach the broker and name things on it.
#[derive(Clone)]
pub struct AmqpConfig {
    pub url: String,
    /// Prefix of every exchange and queue name (tests use one per test).
    pub prefix: String,
    /// Deadline for connecting and for each publish confirm.
    pub timeout: Duration,
}

impl std::fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("AmqpConfig")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl AmqpConfig {
    pub fn exchange(&self) -> String {
        self.prefix.clone()
    }
    pub fn dead_letter_exchange(&self) -> String {
        format!("{}.dlx", self.prefix)
    }
    pub fn queue(&self) -> String {
        format!("{}.notify", self.prefix)
    }
    pub fn dead_letter_queue(&self) -> String {
        format!("{}.notify.dead", self.prefix)
    }
    pub fn retry_queue(&self, delay: Duration) -> String {
        format!("{}.notify.retry.{}ms", self.prefix, delay.as_millis())
    }
    /// Every queue name this topology uses with delay queues for `delays`.
    pub fn queues(&self, delays: &[Duration]) -> Vec<String> {
        let mut names = vec![self.queue(), self.dead_letter_queue()];
        names.extend(delays.iter().map(|d| self.retry_queue(*d)));
        names
    }
}

/// The error of a broker operation that failed, naming what was being done.
fn broker(action: &'static str) -> impl FnOnce(lapin::Error) -> QueueError {
    move |source| QueueError::Broker { action, source }
}

/// What both ends of a pair know: where the broker is, and the delays of
/// the consumer's delay queues once it is started.
struct Shared {
    config: AmqpConfig,
    delays: OnceLock<Vec<Duration>>,
}

/// Creates both ends of a RabbitMQ queue; neither connects yet.
pub fn open(config: AmqpConfig) -> (AmqpQueue, AmqpConsumer) {
    let shared = Arc::new(Shared {
        config,
        delays: OnceLock::new(),
    });
    let consumer = AmqpConsumer {
        shared: Arc::clone(&shared),
        readiness: Readiness::default(),
        running: None,
    };
    let producer = AmqpQueue {
        shared,
        link: Mutex::new(None),
        last_failure: std::sync::Mutex::new(None),
    };
    (producer, consumer)
}

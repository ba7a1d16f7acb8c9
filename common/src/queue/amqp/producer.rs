//! Publishing: one connection and channel, opened on first use and again
//! after a failure, each publish persistent and confirmed. A failure is a
//! [`QueueError`] that keeps lapin's error (or the timeout) as its source.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use lapin::{BasicProperties, Channel, Confirmation, Connection, options::BasicPublishOptions};
use tokio::sync::Mutex;

use super::{AmqpConfig, NOTIFY, Shared, broker, topology::connect};
use crate::{
    jobs::Job,
    queue::{JobQueue, QueueError},
};

/// After a failed connection attempt, publishes fail at once for this long
/// instead of each request waiting for its own connection attempt.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

fn properties(job: &Job) -> BasicProperties {
    BasicProperties::default()
        .with_delivery_mode(2) // persistent
        .with_content_type("application/json".into())
        .with_type(job.kind().into())
        .with_message_id(job.subject().to_string().into())
}

pub(super) struct Link {
    // Kept so the connection lives as long as its channel.
    _conn: Connection,
    channel: Channel,
}

/// Publishes jobs to RabbitMQ. It connects on first use, so ingest starts
/// (and accepts events) even while the broker is down, and reconnects on
/// demand after a failure.
pub struct AmqpQueue {
    pub(super) shared: Arc<Shared>,
    pub(super) link: Mutex<Option<Arc<Link>>>,
    pub(super) last_failure: std::sync::Mutex<Option<Instant>>,
}

impl AmqpQueue {
    fn config(&self) -> &AmqpConfig {
        &self.shared.config
    }

    async fn link(&self) -> Result<Arc<Link>, QueueError> {
        let mut guard = self.link.lock().await;
        if let Some(link) = guard.as_ref()
            && link.channel.status().connected()
        {
            return Ok(Arc::clone(link));
        }
        *guard = None;
        let paused = self
            .last_failure
            .lock()
            .map(|t| t.is_some_and(|at| at.elapsed() < RECONNECT_PAUSE))
            .unwrap_or(false);
        if paused {
            return Err(QueueError::Reconnecting);
        }
        let config = self.config();
        let opened = connect(config, self.shared.delays.get().map(Vec::as_slice));
        const ACTION: &str = "connecting to the broker";
        let failed = match tokio::time::timeout(config.timeout, opened).await {
            Ok(Ok((conn, channel))) => {
                let link = Arc::new(Link {
                    _conn: conn,
                    channel,
                });
                *guard = Some(Arc::clone(&link));
                return Ok(link);
            }
            Ok(Err(source)) => broker(ACTION)(source),
            Err(source) => QueueError::TimedOut {
                action: ACTION,
                source,
            },
        };
        if let Ok(mut last) = self.last_failure.lock() {
            *last = Some(Instant::now());
        }
        Err(failed)
    }

    async fn send(
        &self,
        exchange: &str,
        routing_key: &str,
        job: &Job,
        props: BasicProperties,
    ) -> Result<(), QueueError> {
        let link = self.link().await?;
        let bytes = job.to_bytes();
        let confirmed = tokio::time::timeout(self.config().timeout, async {
            link.channel
                .basic_publish(
                    exchange.into(),
                    routing_key.into(),
                    BasicPublishOptions::default(),
                    &bytes,
                    props,
                )
                .await?
                .await
        })
        .await;
        let outcome = match confirmed {
            Ok(Ok(Confirmation::Ack(_))) => return Ok(()),
            Ok(Ok(Confirmation::Nack(_))) => QueueError::Nacked,
            Ok(Ok(Confirmation::NotRequested)) => QueueError::ConfirmsOff,
            Ok(Err(source)) => broker("publishing")(source),
            Err(source) => QueueError::TimedOut {
                action: "the publisher confirm",
                source,
            },
        };
        // Start afresh next time: the channel may be broken.
        *self.link.lock().await = None;
        Err(outcome)
    }
}

#[async_trait]
impl JobQueue for AmqpQueue {
    async fn publish(&self, job: &Job) -> Result<(), QueueError> {
        self.send(&self.config().exchange(), NOTIFY, job, properties(job))
            .await
    }

    async fn publish_delayed(&self, job: &Job, delay: Duration) -> Result<(), QueueError> {
        let Some(levels) = self.shared.delays.get() else {
            return Err(QueueError::NoRetryQueues);
        };
        // The shortest delay queue that waits at least `delay`; the message's
        // own expiration (jittered by the caller) can only shorten it.
        let level = levels
            .iter()
            .copied()
            .find(|l| *l >= delay)
            .or_else(|| levels.last().copied())
            .unwrap_or(delay);
        let expiration = delay.min(level).as_millis().max(1).to_string();
        let props = properties(job).with_expiration(expiration.as_str().into());
        self.send("", &self.config().retry_queue(level), job, props)
            .await
    }

    fn is_durable(&self) -> bool {
        true
    }
}

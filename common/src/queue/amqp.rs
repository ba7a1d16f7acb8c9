//! RabbitMQ through lapin.
//!
//! Topology (declared idempotently by whichever side connects first):
//! - exchange `<prefix>` (direct) → quorum queue `<prefix>.notify`, whose
//!   rejected or too-often-redelivered messages go to
//! - exchange `<prefix>.dlx` → quorum queue `<prefix>.notify.dead`;
//! - one delay queue per retry delay, `<prefix>.notify.retry.<ms>ms`, with no
//!   consumer: messages wait there until their TTL runs out and are then
//!   dead-lettered back to `<prefix>` / `notify`.
//!
//! Messages are persistent and every publish waits for the broker's confirm.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use async_trait::async_trait;
use futures::StreamExt as _;
use lapin::{
    Acker, BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ExchangeKind,
    options::{
        BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions,
        BasicPublishOptions, BasicQosOptions, BasicRejectOptions, ConfirmSelectOptions,
        ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
    },
    types::{AMQPValue, FieldTable, LongString, ShortString},
};
use tokio::sync::{Mutex, mpsc, watch};

use super::{Acknowledge, JobQueue, QueueError, Received, RetryPolicy};
use crate::jobs::Job;

/// Routing key of notify jobs.
const NOTIFY: &str = "notify";
/// Redeliveries after which a message that keeps killing workers is
/// dead-lettered by the broker (quorum queues count them).
const DELIVERY_LIMIT: i64 = 20;
/// After a failed connection attempt, publishes fail at once for this long
/// instead of each request waiting for its own connection attempt.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

/// How to reach the broker and name things on it.
#[derive(Clone)]
pub struct AmqpConfig {
    pub url: String,
    /// Prefix of every exchange and queue name (tests use one per test).
    pub prefix: String,
    /// Deadline for connecting and for each publish confirm.
    pub timeout: Duration,
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("AmqpConfig")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
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
    /// Every queue name this topology uses.
    pub fn queues(&self) -> Vec<String> {
        let mut names = vec![self.queue(), self.dead_letter_queue()];
        names.extend(self.retry.levels().into_iter().map(|d| self.retry_queue(d)));
        names
    }
}

fn unavailable(e: impl std::fmt::Display) -> QueueError {
    QueueError::Unavailable(e.to_string())
}

fn args(entries: &[(&str, AMQPValue)]) -> FieldTable {
    let mut table = FieldTable::default();
    for (k, v) in entries {
        table.insert(ShortString::from(*k), v.clone());
    }
    table
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// Connects, opens a channel with publisher confirms, declares the topology.
async fn open(config: &AmqpConfig) -> lapin::Result<(Connection, Channel)> {
    let props = ConnectionProperties::default().with_connection_name("tocsin".into());
    let conn = Connection::connect(&config.url, props).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    declare(&channel, config).await?;
    Ok((conn, channel))
}

async fn declare(channel: &Channel, config: &AmqpConfig) -> lapin::Result<()> {
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    let durable_queue = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for exchange in [config.exchange(), config.dead_letter_exchange()] {
        channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Direct,
                durable,
                FieldTable::default(),
            )
            .await?;
    }
    let queue = config.queue();
    channel
        .queue_declare(
            queue.clone().into(),
            durable_queue,
            args(&[
                ("x-queue-type", text("quorum")),
                (
                    "x-dead-letter-exchange",
                    text(&config.dead_letter_exchange()),
                ),
                ("x-dead-letter-routing-key", text(NOTIFY)),
                ("x-delivery-limit", AMQPValue::LongLongInt(DELIVERY_LIMIT)),
            ]),
        )
        .await?;
    channel
        .queue_bind(
            queue.into(),
            config.exchange().into(),
            NOTIFY.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let dead = config.dead_letter_queue();
    channel
        .queue_declare(
            dead.clone().into(),
            durable_queue,
            args(&[("x-queue-type", text("quorum"))]),
        )
        .await?;
    channel
        .queue_bind(
            dead.into(),
            config.dead_letter_exchange().into(),
            NOTIFY.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    for delay in config.retry.levels() {
        // Classic queues: per-message TTL expiry is their long-standing
        // feature, and nothing consumes them.
        channel
            .queue_declare(
                config.retry_queue(delay).into(),
                durable_queue,
                args(&[
                    (
                        "x-message-ttl",
                        AMQPValue::LongLongInt(delay.as_millis() as i64),
                    ),
                    ("x-dead-letter-exchange", text(&config.exchange())),
                    ("x-dead-letter-routing-key", text(NOTIFY)),
                ]),
            )
            .await?;
    }
    Ok(())
}

fn properties(job: &Job) -> BasicProperties {
    let Job::NotifyV1(notify) = job;
    BasicProperties::default()
        .with_delivery_mode(2) // persistent
        .with_content_type("application/json".into())
        .with_type("notify.v1".into())
        .with_message_id(notify.event_id.to_string().into())
}

struct Link {
    // Kept so the connection lives as long as its channel.
    _conn: Connection,
    channel: Channel,
}

/// Publishes jobs to RabbitMQ, reconnecting on demand after a failure.
pub struct AmqpQueue {
    config: AmqpConfig,
    link: Mutex<Option<Arc<Link>>>,
    last_failure: std::sync::Mutex<Option<Instant>>,
}

impl AmqpQueue {
    /// A queue that connects on first use: ingest starts (and accepts
    /// events) even while the broker is down.
    pub fn new(config: AmqpConfig) -> Self {
        Self {
            config,
            link: Mutex::new(None),
            last_failure: std::sync::Mutex::new(None),
        }
    }

    /// Connects now and declares the topology, failing if the broker is down.
    pub async fn connect(config: AmqpConfig) -> Result<Self, QueueError> {
        let queue = Self::new(config);
        queue.link().await?;
        Ok(queue)
    }

    pub fn config(&self) -> &AmqpConfig {
        &self.config
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
            return Err(QueueError::Unavailable(
                "broker unreachable (retrying shortly)".into(),
            ));
        }
        match tokio::time::timeout(self.config.timeout, open(&self.config)).await {
            Ok(Ok((conn, channel))) => {
                let link = Arc::new(Link {
                    _conn: conn,
                    channel,
                });
                *guard = Some(Arc::clone(&link));
                Ok(link)
            }
            outcome => {
                if let Ok(mut last) = self.last_failure.lock() {
                    *last = Some(Instant::now());
                }
                Err(match outcome {
                    Ok(Err(e)) => unavailable(e),
                    _ => QueueError::Unavailable("connecting to the broker timed out".into()),
                })
            }
        }
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
        let confirmed = tokio::time::timeout(self.config.timeout, async {
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
            Ok(Ok(Confirmation::Nack(_))) => {
                QueueError::Refused("the broker did not confirm the message".into())
            }
            Ok(Ok(Confirmation::NotRequested)) => {
                QueueError::Refused("publisher confirms are off".into())
            }
            Ok(Err(e)) => unavailable(e),
            Err(_) => QueueError::Unavailable("no publisher confirm in time".into()),
        };
        // Start afresh next time: the channel may be broken.
        *self.link.lock().await = None;
        Err(outcome)
    }
}

#[async_trait]
impl JobQueue for AmqpQueue {
    async fn publish(&self, job: &Job) -> Result<(), QueueError> {
        self.send(&self.config.exchange(), NOTIFY, job, properties(job))
            .await
    }

    async fn publish_delayed(&self, job: &Job, delay: Duration) -> Result<(), QueueError> {
        // The shortest delay queue that waits at least `delay`; the message's
        // own expiration (jittered by the caller) can only shorten it.
        let levels = self.config.retry.levels();
        let level = levels
            .iter()
            .copied()
            .find(|l| *l >= delay)
            .or_else(|| levels.last().copied())
            .unwrap_or(delay);
        let expiration = delay.min(level).as_millis().max(1).to_string();
        let props = properties(job).with_expiration(expiration.as_str().into());
        self.send("", &self.config.retry_queue(level), job, props)
            .await
    }
}

struct AmqpAck(Acker);

#[async_trait]
impl Acknowledge for AmqpAck {
    async fn ack(&self) -> Result<(), QueueError> {
        self.0
            .ack(BasicAckOptions::default())
            .await
            .map(drop)
            .map_err(unavailable)
    }
    async fn dead_letter(&self) -> Result<(), QueueError> {
        self.0
            .reject(BasicRejectOptions { requeue: false })
            .await
            .map(drop)
            .map_err(unavailable)
    }
    async fn requeue(&self) -> Result<(), QueueError> {
        self.0
            .nack(BasicNackOptions {
                requeue: true,
                ..Default::default()
            })
            .await
            .map(drop)
            .map_err(unavailable)
    }
}

/// Consumes notify jobs into `out` with at most `prefetch` unacknowledged at
/// a time, reconnecting (with backoff) whenever the broker goes away, until
/// `stop` turns true. Then it cancels the consumer, waits for the worker to
/// drop `out`'s receiver (so every job in hand is settled on this
/// connection), and closes the connection.
pub async fn consume(
    config: AmqpConfig,
    prefetch: u16,
    out: mpsc::Sender<Received>,
    consuming: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if *stop.borrow() {
            return;
        }
        let opened = tokio::time::timeout(config.timeout, open(&config)).await;
        let (conn, channel) = match opened {
            Ok(Ok(link)) => link,
            failed => {
                let cause = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".into(),
                };
                tracing::warn!(
                    cause,
                    retry_in_ms = backoff.as_millis() as u64,
                    "cannot reach the broker"
                );
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        let consumer = async {
            channel
                .basic_qos(prefetch, BasicQosOptions::default())
                .await?;
            channel
                .basic_consume(
                    config.queue().into(),
                    "".into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
        };
        let mut consumer = match consumer.await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start consuming");
                continue;
            }
        };
        tracing::info!(queue = %config.queue(), prefetch, "consuming notify jobs");
        consuming.store(true, Ordering::Relaxed);
        loop {
            tokio::select! {
                _ = stop.changed() => {
                    consuming.store(false, Ordering::Relaxed);
                    let _ = channel.basic_cancel(consumer.tag(), BasicCancelOptions::default()).await;
                    // Jobs in hand are settled through this connection.
                    out.closed().await;
                    let _ = conn.close(200, "shutting down".into()).await;
                    return;
                }
                next = consumer.next() => match next {
                    Some(Ok(delivery)) => {
                        let received = Received {
                            job: Job::from_bytes(&delivery.data).map_err(|e| e.to_string()),
                            redelivered: delivery.redelivered,
                            acker: Box::new(AmqpAck(delivery.acker)),
                        };
                        if out.send(received).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "consumer failed; reconnecting");
                        break;
                    }
                    None => {
                        tracing::warn!("consumer cancelled by the broker; reconnecting");
                        break;
                    }
                }
            }
        }
        consuming.store(false, Ordering::Relaxed);
    }
}

//! Consuming: a background task owns the connection, reconnects after
//! failures (its own backoff, [`RECONNECT_FIRST`] doubling to
//! [`RECONNECT_MAX`]: reaching the broker, not retrying deliveries, which the
//! notifier's retry policy decides), and hands each delivery over, decoded,
//! with the means to settle it (through the channel's ack window,
//! `super::acks`).

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use futures::StreamExt as _;
use lapin::{
    options::{BasicCancelOptions, BasicConsumeOptions, BasicQosOptions},
    types::FieldTable,
};
use tokio::{
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
};

use super::{Shared, acks::Window, topology::connect};
use crate::{
    jobs::Job,
    queue::{ConsumeSettings, JobConsumer, Readiness, Received},
    telemetry::chain,
};

/// The wait after the first failed attempt to reach the broker; it doubles
/// after each further failure.
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two attempts to reach the broker, so a broker
/// that comes back is found within about this long.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Takes jobs from `<prefix>.notify` through a background task that owns
/// the connection.
pub struct AmqpConsumer {
    pub(super) shared: Arc<Shared>,
    pub(super) readiness: Readiness,
    pub(super) running: Option<Running>,
}

/// The consume task and the means to steer it.
pub(super) struct Running {
    rx: mpsc::Receiver<Received>,
    /// Tells the task to cancel the consumer (take nothing more).
    stop: watch::Sender<bool>,
    /// Dropped when every job given out is settled: the task then closes
    /// the connection.
    release: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

#[async_trait]
impl JobConsumer for AmqpConsumer {
    fn start(&mut self, settings: ConsumeSettings) {
        if self.running.is_some() {
            return;
        }
        let _ = self.shared.delays.set(settings.delays.clone());
        let (tx, rx) = mpsc::channel(usize::from(settings.prefetch.get()));
        let (stop, stopped) = watch::channel(false);
        let (release, released) = oneshot::channel();
        let task = tokio::spawn(consume(
            Arc::clone(&self.shared),
            settings,
            tx,
            self.readiness.clone(),
            stopped,
            released,
        ));
        self.running = Some(Running {
            rx,
            stop,
            release,
            task,
        });
    }

    async fn next(&mut self) -> Option<Received> {
        self.running.as_mut()?.rx.recv().await
    }

    async fn stop(&mut self) -> Vec<Received> {
        let Some(running) = self.running.as_mut() else {
            return Vec::new();
        };
        let _ = running.stop.send(true);
        running.rx.close();
        let mut left = Vec::new();
        while let Some(received) = running.rx.recv().await {
            left.push(received);
        }
        left
    }

    async fn close(self: Box<Self>) {
        if let Some(running) = self.running {
            let _ = running.stop.send(true);
            drop(running.release);
            drop(running.rx);
            let _ = running.task.await;
        }
    }

    fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }
}

/// Consumes notify jobs into `out` with at most `prefetch` unacknowledged at
/// a time, reconnecting (with backoff) whenever the broker goes away, until
/// `stop` turns true. Then it cancels the consumer, waits for `released`
/// (every job in hand is settled on this connection), and closes the
/// connection.
async fn consume(
    shared: Arc<Shared>,
    settings: ConsumeSettings,
    out: mpsc::Sender<Received>,
    readiness: Readiness,
    mut stop: watch::Receiver<bool>,
    released: oneshot::Receiver<()>,
) {
    let config = &shared.config;
    let prefetch = settings.prefetch.get();
    let mut backoff = RECONNECT_FIRST;
    loop {
        if *stop.borrow() {
            return;
        }
        let opened =
            tokio::time::timeout(config.timeout, connect(config, Some(&settings.delays))).await;
        let (conn, channel) = match opened {
            Ok(Ok(link)) => link,
            failed => {
                let cause = match failed {
                    Ok(Err(e)) => chain(&e).to_string(),
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
                backoff = (backoff * 2).min(RECONNECT_MAX);
                continue;
            }
        };
        backoff = RECONNECT_FIRST;
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
                tracing::warn!(error = %chain(&e), "cannot start consuming");
                continue;
            }
        };
        // Delivery tags are the channel's: a new window for each one.
        let window = Arc::new(Window::default());
        tracing::info!(queue = %config.queue(), prefetch, "consuming notify jobs");
        readiness.set(true);
        let stopping = loop {
            tokio::select! {
                _ = stop.changed() => break true,
                next = consumer.next() => match next {
                    Some(Ok(delivery)) => {
                        let received = Received {
                            job: Job::from_bytes(&delivery.data),
                            redelivered: delivery.redelivered,
                            acker: window.track(delivery.acker, delivery.delivery_tag),
                        };
                        // A closed receiver means the worker is stopping.
                        if out.send(received).await.is_err() {
                            break true;
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %chain(&e), "consumer failed; reconnecting");
                        break false;
                    }
                    None => {
                        tracing::warn!("consumer cancelled by the broker; reconnecting");
                        break false;
                    }
                }
            }
        };
        readiness.set(false);
        if stopping {
            let _ = channel
                .basic_cancel(consumer.tag(), BasicCancelOptions::default())
                .await;
            // Jobs in hand are settled through this connection; whatever was
            // prefetched and not given out returns to the queue as it closes.
            let _ = released.await;
            if let Err(e) = window.flush(true).await {
                tracing::warn!(error = %chain(&e), "could not acknowledge the last jobs; the broker will redeliver them");
            }
            let _ = conn.close(200, "shutting down".into()).await;
            return;
        }
    }
}

//! The in-process queue of the embedded mode: a channel from the request
//! handlers to a notifier worker running in the same process. Nothing
//! survives a restart, so on start-up ingest re-enqueues every notification
//! that was not finished (see the outbox relay); for the same reason there
//! is nothing to give back or dead-letter into: settling is a no-op.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::{Acknowledge, ConsumeSettings, JobConsumer, JobQueue, QueueError, Readiness, Received};
use crate::jobs::Job;

/// The sending half, shared by request handlers and the worker's retries.
#[derive(Clone)]
pub struct LocalQueue {
    tx: mpsc::UnboundedSender<Received>,
}

/// The receiving half, read by one worker.
pub struct LocalConsumer {
    rx: mpsc::UnboundedReceiver<Received>,
}

/// Creates both halves of an in-process queue.
pub fn open() -> (LocalQueue, LocalConsumer) {
    let (tx, rx) = mpsc::unbounded_channel();
    (LocalQueue { tx }, LocalConsumer { rx })
}

struct NoAck;

#[async_trait]
impl Acknowledge for NoAck {
    async fn ack(&self) -> Result<(), QueueError> {
        Ok(())
    }
    async fn dead_letter(&self) -> Result<(), QueueError> {
        Ok(())
    }
    async fn requeue(&self) -> Result<(), QueueError> {
        // The process is stopping; the relay re-enqueues the job at start-up.
        Ok(())
    }
}

fn received(job: &Job) -> Received {
    Received {
        job: Ok(job.clone()),
        redelivered: false,
        acker: Box::new(NoAck),
    }
}

#[async_trait]
impl JobQueue for LocalQueue {
    async fn publish(&self, job: &Job) -> Result<(), QueueError> {
        self.tx.send(received(job)).map_err(|_| QueueError::Stopped)
    }

    async fn publish_delayed(&self, job: &Job, delay: Duration) -> Result<(), QueueError> {
        if self.tx.is_closed() {
            return Err(QueueError::Stopped);
        }
        let tx = self.tx.clone();
        let job = job.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(received(&job));
        });
        Ok(())
    }

    fn is_durable(&self) -> bool {
        false
    }
}

#[async_trait]
impl JobConsumer for LocalConsumer {
    fn start(&mut self, _settings: ConsumeSettings) {
        // Jobs wait in the channel from the moment they are published, and
        // retries wait in timers: nothing to connect or declare.
    }

    async fn next(&mut self) -> Option<Received> {
        self.rx.recv().await
    }

    async fn stop(&mut self) -> Vec<Received> {
        self.rx.close();
        let mut left = Vec::new();
        while let Ok(received) = self.rx.try_recv() {
            left.push(received);
        }
        left
    }

    async fn close(self: Box<Self>) {}

    fn readiness(&self) -> Readiness {
        Readiness::always()
    }
}

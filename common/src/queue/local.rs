//! The in-process queue of the embedded mode: a channel from the request
//! handlers to a notifier worker running in the same process. Nothing
//! survives a restart, so on start-up ingest re-enqueues every notification
//! that was not finished (see the outbox relay).

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::{Acknowledge, JobQueue, QueueError, Received};
use crate::jobs::Job;

/// The sending half, shared by request handlers.
#[derive(Clone)]
pub struct LocalQueue {
    tx: mpsc::UnboundedSender<Received>,
}

/// Creates a queue and the receiver a worker consumes.
pub fn channel() -> (LocalQueue, mpsc::UnboundedReceiver<Received>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (LocalQueue { tx }, rx)
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
        self.tx
            .send(received(job))
            .map_err(|_| QueueError::Unavailable("the in-process worker has stopped".into()))
    }

    async fn publish_delayed(&self, job: &Job, delay: Duration) -> Result<(), QueueError> {
        if self.tx.is_closed() {
            return Err(QueueError::Unavailable(
                "the in-process worker has stopped".into(),
            ));
        }
        let tx = self.tx.clone();
        let job = job.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(received(&job));
        });
        Ok(())
    }
}

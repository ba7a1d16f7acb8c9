//! Acknowledging many jobs with one frame (`basic.ack` with `multiple`),
//! without ever acknowledging one that is not done.
//!
//! `multiple` acknowledges every delivery of the channel up to the tag it
//! names, so one frame is only right for a run of done jobs with no job in
//! hand below it. The window keeps the channel's deliveries in tag order
//! from the moment they arrive: a job the worker reports done waits until
//! every job below it is done (or settled on its own), then one
//! `multiple` ack covers the run. A job done behind one that takes long is
//! acknowledged on its own after [`HOLD`], so a slow job never holds the
//! prefetch window shut. A job given back or dead-lettered is settled on
//! its own at once, and leaves the window before any `multiple` ack can
//! reach past it.
//!
//! If the process dies, whatever was not acknowledged is redelivered: only
//! jobs reported done (their deliveries recorded) were ever acknowledged.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use async_trait::async_trait;
use lapin::{
    Acker,
    options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions},
    types::DeliveryTag,
};

use super::broker;
use crate::{
    queue::{Acknowledge, QueueError},
    telemetry::chain,
};

/// How long a done job waits for the jobs below it before it is
/// acknowledged on its own.
const HOLD: Duration = Duration::from_millis(100);

/// One delivery of the channel, from arrival until it is settled.
struct Slot {
    acker: Acker,
    /// When the worker reported it done; `None` while it is in hand.
    done: Option<Instant>,
}

/// The deliveries of one channel not yet settled, by tag.
#[derive(Default)]
pub(super) struct Window {
    slots: Mutex<BTreeMap<DeliveryTag, Slot>>,
    /// Held while acks are sent, so they go out in the order decided and
    /// a tag is never acknowledged twice.
    sending: tokio::sync::Mutex<()>,
    /// Whether a flush is already scheduled for jobs held behind a gap.
    scheduled: Mutex<bool>,
}

/// What one flush sends.
#[derive(Default)]
struct Acks {
    /// The highest tag of the run of done jobs at the bottom: one
    /// `multiple` ack.
    run: Option<Acker>,
    /// Done jobs held behind a gap longer than [`HOLD`] (or all of them,
    /// when closing): one ack each.
    single: Vec<Acker>,
    /// Done jobs still waiting behind a gap.
    waiting: bool,
}

impl Window {
    /// Tracks a delivery from its arrival, and returns its settling handle.
    pub(super) fn track(self: &Arc<Self>, acker: Acker, tag: DeliveryTag) -> Box<dyn Acknowledge> {
        self.lock().insert(tag, Slot { acker, done: None });
        Box::new(WindowAck {
            window: Arc::clone(self),
            tag,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<DeliveryTag, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes what can be acknowledged now out of the window.
    fn take(&self, everything: bool) -> Acks {
        let mut slots = self.lock();
        let mut acks = Acks::default();
        while let Some(entry) = slots.first_entry() {
            if entry.get().done.is_none() {
                break;
            }
            acks.run = Some(entry.remove().acker);
        }
        let now = Instant::now();
        let old: Vec<DeliveryTag> = slots
            .iter()
            .filter_map(|(tag, slot)| {
                let done = slot.done?;
                if everything || now.duration_since(done) >= HOLD {
                    Some(*tag)
                } else {
                    acks.waiting = true;
                    None
                }
            })
            .collect();
        acks.single = old
            .into_iter()
            .filter_map(|tag| slots.remove(&tag).map(|slot| slot.acker))
            .collect();
        acks
    }

    /// Sends what can be acknowledged now; `everything` acknowledges every
    /// done job (the channel is closing).
    pub(super) async fn flush(self: &Arc<Self>, everything: bool) -> Result<(), QueueError> {
        let acks = {
            let _sending = self.sending.lock().await;
            let acks = self.take(everything);
            let mut result = Ok(());
            if let Some(run) = &acks.run {
                result = run
                    .ack(BasicAckOptions { multiple: true })
                    .await
                    .map(drop)
                    .map_err(broker("acknowledging jobs"));
            }
            for single in &acks.single {
                let sent = single
                    .ack(BasicAckOptions::default())
                    .await
                    .map(drop)
                    .map_err(broker("acknowledging a job"));
                result = result.and(sent);
            }
            result.map(|()| acks.waiting)
        };
        if acks.as_ref().is_ok_and(|waiting| *waiting) {
            self.schedule();
        }
        acks.map(drop)
    }

    /// Flushes again after [`HOLD`], for jobs done behind a slow one.
    fn schedule(self: &Arc<Self>) {
        {
            let mut scheduled = self.scheduled.lock().unwrap_or_else(|e| e.into_inner());
            if *scheduled {
                return;
            }
            *scheduled = true;
        }
        let window = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(HOLD).await;
            *window.scheduled.lock().unwrap_or_else(|e| e.into_inner()) = false;
            if let Err(e) = window.flush(false).await {
                tracing::warn!(error = %chain(&e), "could not acknowledge jobs; the broker will redeliver them");
            }
        });
    }

    /// Removes a delivery to settle it on its own.
    fn remove(&self, tag: DeliveryTag) -> Option<Acker> {
        self.lock().remove(&tag).map(|slot| slot.acker)
    }
}

/// The handle the worker settles one job with.
struct WindowAck {
    window: Arc<Window>,
    tag: DeliveryTag,
}

impl WindowAck {
    /// Settles this job on its own with `settle`, then lets the run above
    /// it go: it leaves the window only once its own frame is sent.
    async fn alone<F, Fut>(&self, action: &'static str, settle: F) -> Result<(), QueueError>
    where
        F: FnOnce(Acker) -> Fut,
        Fut: std::future::Future<Output = lapin::Result<bool>>,
    {
        let acker = self.window.lock().get(&self.tag).map(|s| s.acker.clone());
        let Some(acker) = acker else {
            return Ok(());
        };
        let sent = settle(acker).await.map(drop).map_err(broker(action));
        self.window.remove(self.tag);
        let flushed = self.window.flush(false).await;
        sent.and(flushed)
    }
}

#[async_trait]
impl Acknowledge for WindowAck {
    async fn ack(&self) -> Result<(), QueueError> {
        if let Some(slot) = self.window.lock().get_mut(&self.tag) {
            slot.done.get_or_insert_with(Instant::now);
        }
        self.window.flush(false).await
    }

    async fn dead_letter(&self) -> Result<(), QueueError> {
        self.alone("dead-lettering a job", |acker| async move {
            acker.reject(BasicRejectOptions { requeue: false }).await
        })
        .await
    }

    async fn requeue(&self) -> Result<(), QueueError> {
        self.alone("giving a job back", |acker| async move {
            acker
                .nack(BasicNackOptions {
                    requeue: true,
                    ..Default::default()
                })
                .await
        })
        .await
    }
}

//! Following what every replica records, for the live streams
//! (`GET /v1/stream`): one poller per process reads the events recorded
//! since it last looked, across every project, from the store all replicas
//! share, and broadcasts each new one to the open streams, which keep their
//! own project's.
//!
//! Recording order is by `createdAt`, taken just before the write, so two
//! writes can commit out of order (and other replicas' clocks drift): each
//! poll reads again from `lookback` before the newest time seen and skips
//! the ids it has already broadcast. The poller only queries while a stream
//! is open.

use std::{collections::HashMap, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use common::store::{Event, EventPosition, Store, StoreResult};
use tokio::sync::{Mutex, Notify, broadcast, watch};
use uuid::Uuid;

/// Events read per store query.
const PAGE: u32 = 500;
/// Events a stream may fall behind the poller before it is closed (its
/// client reconnects with `Last-Event-ID` and is replayed the rest).
const BACKLOG: usize = 4096;

/// The shared poller and its subscribers.
pub struct Tail {
    store: Arc<dyn Store>,
    lookback: chrono::Duration,
    sender: broadcast::Sender<Arc<Event>>,
    state: Mutex<Seen>,
    /// Wakes the poller early: a stream just opened, or this replica just
    /// recorded an event.
    wake: Notify,
    closing: watch::Sender<bool>,
}

/// Where the poller reads from, and the ids it has seen since then.
#[derive(Default)]
struct Seen {
    /// False while no stream is open: nothing is polled, nothing kept.
    active: bool,
    /// `lookback` before the newest event seen (or before the first poll),
    /// never moving back: nothing recorded earlier is broadcast.
    from: Option<DateTime<Utc>>,
    ids: HashMap<Uuid, DateTime<Utc>>,
}

impl Tail {
    pub fn new(store: Arc<dyn Store>, lookback: Duration) -> Arc<Self> {
        Arc::new(Self {
            store,
            lookback: chrono::Duration::from_std(lookback).unwrap_or(chrono::Duration::MAX),
            sender: broadcast::channel(BACKLOG).0,
            state: Mutex::new(Seen::default()),
            wake: Notify::new(),
            closing: watch::channel(false).0,
        })
    }

    /// Subscribes to every event recorded from now on. When no stream was
    /// open, what the store holds now is read first without broadcasting
    /// it, so the subscriber gets only what comes after.
    pub async fn subscribe(&self) -> StoreResult<Subscription> {
        let mut seen = self.state.lock().await;
        if !seen.active {
            *seen = Seen {
                active: true,
                ..Seen::default()
            };
            self.poll(&mut seen, false).await?;
        }
        Ok(Subscription {
            events: self.sender.subscribe(),
            horizon: seen.from.unwrap_or_else(common::time::now),
        })
    }

    /// Signals that events may have been recorded, so streams see them
    /// before the next tick. Free when no stream is open: the write path
    /// calls it on every event.
    pub fn nudge(&self) {
        if self.sender.receiver_count() > 0 {
            self.wake.notify_one();
        }
    }

    /// A receiver that turns true when the service shuts down: streams end.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Ends every stream (the service is shutting down).
    pub fn close(&self) {
        let _ = self.closing.send(true);
    }

    /// Polls every `interval` (or when nudged) while a stream is open.
    pub async fn run(self: Arc<Self>, interval: Duration) {
        let mut closing = self.closing();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.wake.notified() => {}
                _ = closing.wait_for(|c| *c) => return,
            }
            let mut seen = self.state.lock().await;
            if self.sender.receiver_count() == 0 {
                *seen = Seen::default();
                continue;
            }
            if let Err(e) = self.poll(&mut seen, true).await {
                tracing::warn!(error = %e, "following new events failed; retrying");
            }
        }
    }

    /// Reads what was recorded since `lookback` before the newest event
    /// seen, broadcasting (if `broadcast`) each event not seen before.
    async fn poll(&self, seen: &mut Seen, broadcast: bool) -> StoreResult<()> {
        let start = *seen
            .from
            .get_or_insert_with(|| common::time::now() - self.lookback);
        let mut from = EventPosition::start_of(start);
        let mut newest = None;
        loop {
            let page = self.store.events_after(None, None, from, PAGE).await?;
            let full = page.len() == PAGE as usize;
            for event in page {
                from = event.position();
                if seen.ids.insert(event.id, event.created_at).is_some() {
                    continue;
                }
                newest = newest.max(Some(event.created_at));
                if broadcast {
                    // No receiver left is fine: the next tick resets.
                    let _ = self.sender.send(Arc::new(event));
                }
            }
            if !full {
                break;
            }
        }
        if let Some(newest) = newest {
            seen.from = seen.from.max(Some(newest - self.lookback));
        }
        let horizon = seen.from.unwrap_or(start);
        seen.ids.retain(|_, at| *at >= horizon);
        Ok(())
    }
}

/// A stream's share of the tail.
pub struct Subscription {
    /// Every event recorded after the subscription, of every project.
    pub events: broadcast::Receiver<Arc<Event>>,
    /// Nothing recorded before this time is ever broadcast to it.
    pub horizon: DateTime<Utc>,
}

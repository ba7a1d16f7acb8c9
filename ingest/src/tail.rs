//! Following what every replica records, for the live streams
//! (`GET /v1/stream`): one poller per process reads the events recorded
//! and the insights changed since it last looked, across every project,
//! from the store all replicas share, and broadcasts each new one to the
//! open streams, which keep their own project's.
//!
//! Recording order is by `createdAt`, taken just before the write, so two
//! writes can commit out of order (and other replicas' clocks drift): each
//! poll reads again from `lookback` before the newest time seen and skips
//! the ids it has already broadcast. Insights are followed the same way, by
//! the time of their last change (an index in both stores), each with a
//! position of its own: an insight is broadcast when its change (time and
//! version) differs from the one last broadcast, so many increments between
//! two polls go out as one message with the latest value. The poller only
//! queries while a stream is open.

use std::{collections::HashMap, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use common::store::{Event, EventPosition, InsightChange, Scope, Store, StoreResult};
use tokio::sync::{Mutex, Notify, broadcast, watch};
use uuid::Uuid;

/// Events, or insight changes, read per store query.
const PAGE: u32 = 500;
/// Messages (events, insights' changes) a stream may fall behind the
/// poller before it is closed (its client reconnects with `Last-Event-ID`
/// and is replayed the rest of the events, and lists the insights again).
const BACKLOG: usize = 4096;

/// What the poller broadcasts: an event recorded, or a change to an
/// insight (set, incremented or deleted).
#[derive(Debug, Clone)]
pub enum Tailed {
    Event(Arc<Event>),
    Insight(Arc<InsightChange>),
}

/// The shared poller and its subscribers.
pub struct Tail {
    store: Arc<dyn Store>,
    lookback: chrono::Duration,
    sender: broadcast::Sender<Tailed>,
    state: Mutex<Seen>,
    /// Wakes the poller early: a stream just opened, or this replica just
    /// recorded an event or changed an insight.
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
    /// Where insight changes are read from, as `from` is for events.
    insights_from: Option<DateTime<Utc>>,
    /// The last change broadcast of each insight (time, version) read since
    /// `insights_from`.
    insights: HashMap<(Scope, String), (DateTime<Utc>, i64)>,
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

    /// Subscribes to every event recorded and every insight changed from
    /// now on. When no stream was open, what the store holds now is read
    /// first without broadcasting it, so the subscriber gets only what
    /// comes after.
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
            changes: self.sender.subscribe(),
            horizon: seen.from.unwrap_or_else(common::time::now),
        })
    }

    /// Signals that events may have been recorded or insights changed, so
    /// streams see them before the next tick. Free when no stream is open:
    /// the write path calls it on every event.
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
    /// seen, broadcasting (if `broadcast`) each event not seen before; then
    /// the insights' changes likewise.
    async fn poll(&self, seen: &mut Seen, broadcast: bool) -> StoreResult<()> {
        self.poll_events(seen, broadcast).await?;
        self.poll_insights(seen, broadcast).await
    }

    async fn poll_events(&self, seen: &mut Seen, broadcast: bool) -> StoreResult<()> {
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
                    let _ = self.sender.send(Tailed::Event(Arc::new(event)));
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

    /// Reads the insights changed since `lookback` before the newest change
    /// seen, broadcasting (if `broadcast`) each whose change differs from
    /// the one last seen of it.
    async fn poll_insights(&self, seen: &mut Seen, broadcast: bool) -> StoreResult<()> {
        let start = *seen
            .insights_from
            .get_or_insert_with(|| common::time::now() - self.lookback);
        let mut from = start;
        let mut newest = None;
        loop {
            let page = self.store.insights_changed(from, PAGE).await?;
            let full = page.len() == PAGE as usize;
            let last = page.last().map(|change| change.changed_at);
            for change in page {
                let mark = (change.changed_at, change.version);
                let key = (change.scope.clone(), change.title.clone());
                if seen.insights.insert(key, mark) == Some(mark) {
                    continue;
                }
                newest = newest.max(Some(change.changed_at));
                if broadcast {
                    let _ = self.sender.send(Tailed::Insight(Arc::new(change)));
                }
            }
            // Pages go by time, the next from the last one's time (read
            // again, and skipped as seen): a full page of changes all at
            // one instant cannot be paged past, and waits for the next poll.
            match last {
                Some(last) if full && last > from => from = last,
                Some(_) if full => {
                    tracing::warn!(at = %from, "more insight changes at one instant than a page");
                    break;
                }
                _ => break,
            }
        }
        if let Some(newest) = newest {
            seen.insights_from = seen.insights_from.max(Some(newest - self.lookback));
        }
        let horizon = seen.insights_from.unwrap_or(start);
        seen.insights.retain(|_, (at, _)| *at >= horizon);
        Ok(())
    }
}

/// A stream's share of the tail.
pub struct Subscription {
    /// Every event recorded and every insight changed after the
    /// subscription, of every project.
    pub changes: broadcast::Receiver<Tailed>,
    /// Nothing recorded before this time is ever broadcast to it.
    pub horizon: DateTime<Utc>,
}

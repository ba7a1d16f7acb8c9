//! When each API key was last used, without a store write per request: the
//! authentication layer records every use here, in memory; a background task writes what
//! changed, at most once a minute per key, in one batch, and everything
//! left at graceful shutdown. The admin API reads the newer of this and
//! the stored value, so it is current on this replica and at most a minute
//! behind for uses seen by others.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use common::store::{Store, StoreResult};
use dashmap::DashMap;
use tokio::{sync::watch, time::Instant};
use uuid::Uuid;

/// The shortest time between two writes of one key's last use.
pub const WRITE_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
struct Use {
    at: DateTime<Utc>,
    /// When it was last written, if ever by this process.
    written: Option<Instant>,
    /// Whether `at` is newer than what was written.
    dirty: bool,
}

#[derive(Debug, Default)]
pub struct LastUsed {
    seen: DashMap<Uuid, Use>,
}

impl LastUsed {
    /// Notes that `key` was used at `at`.
    pub fn record(&self, key: Uuid, at: DateTime<Utc>) {
        self.seen
            .entry(key)
            .and_modify(|u| {
                if at > u.at {
                    u.at = at;
                    u.dirty = true;
                }
            })
            .or_insert(Use {
                at,
                written: None,
                dirty: true,
            });
    }

    /// The last use of `key` this process saw.
    pub fn get(&self, key: Uuid) -> Option<DateTime<Utc>> {
        self.seen.get(&key).map(|u| u.at)
    }

    /// The uses to write at `now`: changed, and not written within
    /// [`WRITE_EVERY`] (or every changed one, at shutdown).
    fn due(&self, now: Instant, all: bool) -> Vec<(Uuid, DateTime<Utc>)> {
        self.seen
            .iter()
            .filter(|e| {
                e.dirty
                    && (all
                        || e.written
                            .is_none_or(|at| now.saturating_duration_since(at) >= WRITE_EVERY))
            })
            .map(|e| (*e.key(), e.at))
            .collect()
    }

    /// Marks `batch` written at `now`; a use recorded meanwhile stays due.
    fn written(&self, batch: &[(Uuid, DateTime<Utc>)], now: Instant) {
        for (key, at) in batch {
            if let Some(mut u) = self.seen.get_mut(key) {
                u.written = Some(now);
                if u.at == *at {
                    u.dirty = false;
                }
            }
        }
    }

    /// Writes what is due; returns how many keys were written.
    pub async fn flush(&self, store: &dyn Store, all: bool) -> StoreResult<usize> {
        let now = Instant::now();
        let batch = self.due(now, all);
        if !batch.is_empty() {
            store.set_keys_last_used(&batch).await?;
            self.written(&batch, now);
        }
        Ok(batch.len())
    }

    /// Flushes every `interval` until `stop` turns true, then once more
    /// with everything left.
    pub async fn run(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        interval: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|stopped| *stopped) => break,
            }
            if let Err(e) = self.flush(store.as_ref(), false).await {
                tracing::warn!(error = %e, "writing when keys were last used failed; will retry");
            }
        }
        if let Err(e) = self.flush(store.as_ref(), true).await {
            tracing::warn!(error = %e, "writing when keys were last used failed at shutdown");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_used_many_times_within_a_minute_is_written_once() {
        let last_used = LastUsed::default();
        let key = Uuid::now_v7();
        let start = Instant::now();
        let t0 = Utc::now();
        last_used.record(key, t0);
        let first = last_used.due(start, false);
        assert_eq!(first, vec![(key, t0)]);
        last_used.written(&first, start);
        for s in 1..=59 {
            last_used.record(key, t0 + chrono::Duration::seconds(s));
            assert!(
                last_used
                    .due(start + Duration::from_secs(s as u64), false)
                    .is_empty(),
                "due again after {s} s"
            );
        }
        let later = last_used.due(start + WRITE_EVERY, false);
        assert_eq!(later, vec![(key, t0 + chrono::Duration::seconds(59))]);
        // At shutdown everything changed is written, a minute or not.
        last_used.written(&later, start + WRITE_EVERY);
        last_used.record(key, t0 + chrono::Duration::seconds(61));
        assert_eq!(last_used.due(start + WRITE_EVERY, true).len(), 1);
        assert!(last_used.due(start + WRITE_EVERY, false).is_empty());
    }

    #[test]
    fn an_older_use_never_replaces_a_newer_one() {
        let last_used = LastUsed::default();
        let key = Uuid::now_v7();
        let t0 = Utc::now();
        last_used.record(key, t0);
        last_used.record(key, t0 - chrono::Duration::seconds(5));
        assert_eq!(last_used.get(key), Some(t0));
    }
}

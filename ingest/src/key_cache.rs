//! API keys as authentication looks them up, without a store read per
//! request: what the store said about a secret's hash is kept in memory for
//! at most [`KEY_CACHE_TTL`], counted from before the read. So a key revoked
//! or rotated elsewhere (the CLI, another replica) is refused here within
//! that time; one revoked or rotated through this process's admin API is
//! refused at once, because the handler calls [`KeyCache::forget_all`] once
//! the store has it.
//!
//! Only keys the store has are kept: an unknown secret is looked up each
//! time (its refusals count against the failed-authentication limit), so
//! guesses cannot fill the memory, and a key created elsewhere works at
//! once.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use common::store::{ApiKey, Store, StoreResult};
use dashmap::DashMap;

/// How long a key's record is used without asking the store again: the
/// bound on how late a revocation made by another process takes effect
/// (docs/api.md, "Authentication and scopes").
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(1);

/// Past this many entries, a new one first sweeps out the expired.
const SWEEP_ABOVE: usize = 1024;

#[derive(Debug, Default)]
pub struct KeyCache {
    by_hash: DashMap<String, Entry>,
    /// Moves on every [`KeyCache::forget_all`], so a read that began before
    /// it does not put its (possibly older) answer back.
    generation: AtomicU64,
}

#[derive(Debug)]
struct Entry {
    key: Arc<ApiKey>,
    /// When the read that produced it began.
    asked: Instant,
}

impl KeyCache {
    /// The key whose secret (or previous secret) hashes to `hash`, revoked
    /// or not, as [`Store::find_api_key_by_hash`] says, at most
    /// [`KEY_CACHE_TTL`] old.
    pub async fn find(&self, store: &dyn Store, hash: &str) -> StoreResult<Option<Arc<ApiKey>>> {
        if let Some(entry) = self.by_hash.get(hash)
            && entry.asked.elapsed() < KEY_CACHE_TTL
        {
            return Ok(Some(Arc::clone(&entry.key)));
        }
        let generation = self.generation.load(Ordering::SeqCst);
        let asked = Instant::now();
        let Some(key) = store.find_api_key_by_hash(hash).await?.map(Arc::new) else {
            self.by_hash.remove(hash);
            return Ok(None);
        };
        if self.by_hash.len() >= SWEEP_ABOVE {
            self.by_hash
                .retain(|_, e| e.asked.elapsed() < KEY_CACHE_TTL);
        }
        self.by_hash.insert(
            hash.to_owned(),
            Entry {
                key: Arc::clone(&key),
                asked,
            },
        );
        // A change made through this process while the store was being
        // read: the answer may predate it, so it is not kept. (A change
        // after this check clears the entry itself.)
        if self.generation.load(Ordering::SeqCst) != generation {
            self.by_hash.remove(hash);
        }
        Ok(Some(key))
    }

    /// Drops every entry: called after this process revoked or rotated a
    /// key, so its next request reads the store.
    pub fn forget_all(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.by_hash.clear();
    }
}

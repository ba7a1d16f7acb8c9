//! A short-lived cache of each project's device list, so a busy project's
//! jobs do not each read the same list.
//!
//! A list is kept at most `ttl` (`NOTIFIER_DEVICE_CACHE_MS`), and only
//! while the store handle has made no device change since it was read
//! ([`DeviceStore::device_changes`](common::store::DeviceStore::device_changes)). So a device registered, deleted or
//! deactivated through the same store handle (the API of the ingest that
//! runs this notifier in embedded mode, or this notifier deactivating a
//! dead token) counts from the next job on; one changed by another process
//! (another ingest, the CLI) counts at most `ttl` after the change.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::store::{Device, Scope, Store, StoreResult};
use tokio::time::Instant;

/// Beyond this many projects the cache starts over, so it never grows
/// without bound.
const MAX_PROJECTS: usize = 10_000;

/// One project's list, as read.
struct Cached {
    /// When the read started: the list is at least this fresh.
    read_at: Instant,
    /// The store's device changes when the read started.
    changes: u64,
    devices: Arc<Vec<Device>>,
}

/// Device lists by project.
pub struct DeviceCache {
    store: Arc<dyn Store>,
    ttl: Duration,
    /// One slot per project; its lock makes the jobs that find a list
    /// stale wait for one read instead of each reading it.
    projects: Mutex<HashMap<Scope, Arc<tokio::sync::Mutex<Option<Cached>>>>>,
}

impl DeviceCache {
    /// A cache keeping lists at most `ttl` (zero: every job reads).
    pub fn new(store: Arc<dyn Store>, ttl: Duration) -> Self {
        Self {
            store,
            ttl,
            projects: Mutex::new(HashMap::new()),
        }
    }

    /// The project's devices, oldest first.
    pub async fn list(&self, scope: &Scope) -> StoreResult<Arc<Vec<Device>>> {
        if self.ttl.is_zero() {
            return Ok(Arc::new(self.store.list_devices(scope).await?));
        }
        let slot = {
            let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
            if projects.len() >= MAX_PROJECTS && !projects.contains_key(scope) {
                projects.clear();
            }
            Arc::clone(projects.entry(scope.clone()).or_default())
        };
        let mut cached = slot.lock().await;
        // Read before the list: a change committed after this number was
        // read makes it differ next time, whether or not the list saw it.
        let changes = self.store.device_changes();
        if let Some(c) = cached.as_ref()
            && c.changes == changes
            && c.read_at.elapsed() < self.ttl
        {
            return Ok(Arc::clone(&c.devices));
        }
        let read_at = Instant::now();
        let devices = Arc::new(self.store.list_devices(scope).await?);
        *cached = Some(Cached {
            read_at,
            changes,
            devices: Arc::clone(&devices),
        });
        Ok(devices)
    }
}

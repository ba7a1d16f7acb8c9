//! Who gets a project's alerts: its devices and its destinations, as one
//! list of [`Recipient`]s with the same rules and the same bookkeeping,
//! and a short-lived cache of each project's list, so a busy project's
//! jobs do not each read it. A destination's settings are opened here,
//! once per read, with the secrets key.
//!
//! A list is kept at most `ttl` (`NOTIFIER_DEVICE_CACHE_MS`), and only
//! while the store handle has made no device or destination change since
//! it was read ([`DeviceStore::device_changes`](common::store::DeviceStore::device_changes)).
//! So a recipient added, changed, deleted or deactivated through the same
//! store handle (the API of the ingest that runs this notifier in embedded
//! mode, or this notifier deactivating a dead token or a gone webhook)
//! counts from the next job on; one changed by another process (another
//! ingest, the CLI) counts at most `ttl` after the change.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{
    destination::{DestinationKind, Settings},
    rules::AlertRules,
    sealed::SecretsKey,
    store::{Destination, Device, PushTarget, Scope, Store, StoreResult},
};
use tokio::time::Instant;
use uuid::Uuid;

/// Whoever gets a project's alerts: a device or a destination.
#[derive(Debug, Clone)]
pub struct Recipient {
    /// The device's id, or the destination's: what its deliveries are
    /// kept under.
    pub id: Uuid,
    pub rules: AlertRules,
    /// False for a dead device or a disabled destination: it gets nothing.
    pub active: bool,
    pub to: To,
}

/// Where a recipient's alerts go.
#[derive(Debug, Clone)]
pub enum To {
    /// A push to a phone or browser.
    Device(PushTarget),
    /// A destination; its settings opened, or why they could not be.
    Destination {
        kind: DestinationKind,
        settings: Result<Arc<Settings>, String>,
    },
}

impl Recipient {
    fn device(d: &Device) -> Self {
        Self {
            id: d.id,
            rules: d.rules.clone(),
            active: d.active,
            to: To::Device(d.target.clone()),
        }
    }

    fn destination(d: &Destination, key: Option<&SecretsKey>) -> Self {
        let settings = match key {
            None => Err(
                "this notifier has no secrets key to open the destination's settings \
                         with: set TOCSIN_SECRETS_KEY as on ingest"
                    .to_owned(),
            ),
            Some(key) => Settings::open(key, d.id, &d.sealed)
                .map(Arc::new)
                .map_err(|e| e.to_string()),
        };
        Self {
            id: d.id,
            rules: d.rules.clone(),
            active: d.enabled,
            to: To::Destination {
                kind: d.kind,
                settings,
            },
        }
    }

    pub fn is_destination(&self) -> bool {
        matches!(self.to, To::Destination { .. })
    }
}

/// Beyond this many projects the cache starts over, so it never grows
/// without bound.
const MAX_PROJECTS: usize = 10_000;

/// One project's list, as read.
struct Cached {
    /// When the read started: the list is at least this fresh.
    read_at: Instant,
    /// The store's device changes when the read started.
    changes: u64,
    recipients: Arc<Vec<Recipient>>,
}

/// Recipient lists by project.
pub struct RecipientCache {
    store: Arc<dyn Store>,
    /// What destinations' settings are opened with.
    key: Option<SecretsKey>,
    ttl: Duration,
    /// One slot per project; its lock makes the jobs that find a list
    /// stale wait for one read instead of each reading it.
    projects: Mutex<HashMap<Scope, Arc<tokio::sync::Mutex<Option<Cached>>>>>,
}

impl RecipientCache {
    /// A cache keeping lists at most `ttl` (zero: every job reads).
    pub fn new(store: Arc<dyn Store>, key: Option<SecretsKey>, ttl: Duration) -> Self {
        Self {
            store,
            key,
            ttl,
            projects: Mutex::new(HashMap::new()),
        }
    }

    /// The project's devices, oldest first, then its destinations.
    async fn read(&self, scope: &Scope) -> StoreResult<Vec<Recipient>> {
        let (devices, destinations) = futures::try_join!(
            self.store.list_devices(scope),
            self.store.list_destinations(scope)
        )?;
        let mut recipients: Vec<Recipient> = devices.iter().map(Recipient::device).collect();
        recipients.extend(
            destinations
                .iter()
                .map(|d| Recipient::destination(d, self.key.as_ref())),
        );
        Ok(recipients)
    }

    /// The project's recipients: its devices, oldest first, then its
    /// destinations.
    pub async fn list(&self, scope: &Scope) -> StoreResult<Arc<Vec<Recipient>>> {
        if self.ttl.is_zero() {
            return Ok(Arc::new(self.read(scope).await?));
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
            return Ok(Arc::clone(&c.recipients));
        }
        let read_at = Instant::now();
        let recipients = Arc::new(self.read(scope).await?);
        *cached = Some(Cached {
            read_at,
            changes,
            recipients: Arc::clone(&recipients),
        });
        Ok(recipients)
    }
}

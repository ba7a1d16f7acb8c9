//! The production store on MongoDB, through the official driver.
//!
//! Every write relies on single-document atomicity (unique indexes and
//! conditional updates), never on multi-document transactions, so it runs on
//! any MongoDB deployment and on the MongoDB-compatible test server.
//!
//! This module owns the connection, the indexes, the sorting of driver
//! errors, and `Store` itself (`ping`). `codec` turns records into documents
//! and back. Each record kind implements its trait in its own module:
//!
//! | trait | module |
//! |---|---|
//! | `EventStore` | `events` |
//! | `HistoryStore` | `history` |
//! | `DeliveryStore` | `deliveries` |
//! | `IdempotencyStore` | `idempotency` |
//! | `KeyStore` | `keys` |
//! | `AdminStore` | `admins` |
//! | `TenancyStore` | `tenancy` |
//! | `DeviceStore` | `devices` |
//! | `IdentityStore` | `identities` |
//! | `InsightStore` | `insights` |
//!
//! The driver is awaited in many places (cursors included), so each method
//! runs its body through the store's deadline and observer as one call
//! (`self.guard.call(name, async { ... })`, `super::guard`). Event inserts
//! go through `group_commit`, which sends the inserts of concurrent
//! requests as one bulk write (`bulk_insert`) and their users' counters as
//! one `update` command (`user_counts`, which also counts, once, the events
//! stored before counters existed).

mod admins;
mod bulk_insert;
mod codec;
mod deliveries;
mod destinations;
mod devices;
mod events;
mod group_commit;
mod history;
mod idempotency;
mod identities;
mod insights;
mod keys;
mod summaries;
mod tenancy;
mod user_counts;

pub use group_commit::GroupCommitCounts;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::{
    Client, Collection, IndexModel,
    bson::{Document, doc},
    error::{ErrorKind, WriteFailure},
    options::{ClientOptions, DatabaseOptions, IndexOptions},
};

use super::{MongoWriteConcern, Store, StoreError, StoreObserver, StoreResult, guard::Guard};

/// MongoDB's duplicate key error code.
const DUPLICATE_KEY: i32 = 11000;
/// Optimistic-concurrency attempts before a contended write gives up.
const MAX_ATTEMPTS: usize = 16;
/// How long idempotency records live before the TTL monitor may remove them.
const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// The collections the group-commit writer shares with the store.
const EVENTS: &str = "events";
const CHANNELS: &str = "channels";
const IDEMPOTENCY: &str = "idempotency";
const IDENTITIES: &str = "identities";

pub struct MongoStore {
    db: mongodb::Database,
    /// Device changes made through this handle (`DeviceStore::device_changes`).
    device_changes: std::sync::atomic::AtomicU64,
    /// The group-commit writer of event inserts.
    writer: group_commit::Writer,
    /// The deadline of every call, and its observer.
    guard: Guard,
}

impl MongoStore {
    /// Connects, and creates every index the store relies on (idempotent).
    /// Every call fails as unavailable once `deadline` has passed.
    pub async fn connect(
        uri: &str,
        database: &str,
        write_concern: MongoWriteConcern,
        deadline: Duration,
    ) -> StoreResult<Self> {
        let mut options = ClientOptions::parse(uri).await.map_err(|e| {
            StoreError::Unavailable(anyhow::Error::new(e).context("invalid MongoDB URI"))
        })?;
        options.app_name = Some("tocsin".into());
        options.server_selection_timeout = Some(deadline);
        options.connect_timeout = Some(deadline);
        let client = Client::with_options(options).map_err(classify)?;
        // On the database, so every collection made from it (and so every
        // write the store and its group-commit writer make) carries it,
        // whatever the URI says.
        let db = client.database_with_options(
            database,
            DatabaseOptions::builder()
                .write_concern(write_concern.driver())
                .build(),
        );
        let writer = group_commit::Writer::start(group_commit::Collections {
            events: db.collection(EVENTS),
            channels: db.collection(CHANNELS),
            idempotency: db.collection(IDEMPOTENCY),
            users: identities::Users::new(&db),
        });
        let store = Self {
            db,
            device_changes: Default::default(),
            writer,
            guard: Guard::new(Some(deadline)),
        };
        store.create_indexes().await?;
        store.adopt_scopes().await?;
        user_counts::migrate(
            &identities::Users::new(&store.db),
            &store.events(),
            &store.db.collection("migrations"),
            crate::time::now(),
        )
        .await?;
        Ok(store)
    }

    /// Gives the organizations and projects that exist only as scope strings
    /// on keys and devices (written before they were records) their records,
    /// at every open, idempotently. Events need no look: each was written
    /// with a key of its scope, and keys are never deleted.
    async fn adopt_scopes(&self) -> StoreResult<()> {
        let mut scopes = Vec::new();
        for collection in [self.keys(), self.devices()] {
            let mut found = collection
                .find(doc! {})
                .projection(doc! { "org": 1, "project": 1 })
                .await
                .map_err(classify)?;
            while let Some(d) = found.try_next().await.map_err(classify)? {
                if let (Ok(org), Ok(project)) = (d.get_str("org"), d.get_str("project")) {
                    scopes.push(crate::store::Scope::new(org, project));
                }
            }
        }
        super::tenancy::adopt(self, &scopes, crate::time::now()).await
    }

    /// The write concern every write of the store carries.
    pub fn write_concern(&self) -> Option<&mongodb::options::WriteConcern> {
        self.db.write_concern()
    }

    /// What the group-commit writer has done since the store was opened.
    pub fn group_commit_counts(&self) -> GroupCommitCounts {
        self.writer.counts()
    }

    async fn create_indexes(&self) -> StoreResult<()> {
        let unique = |keys: Document| {
            IndexModel::builder()
                .keys(keys)
                .options(IndexOptions::builder().unique(true).build())
                .build()
        };
        let plain = |keys: Document| IndexModel::builder().keys(keys).build();
        let expiring = IndexModel::builder()
            .keys(doc! { "createdAt": 1 })
            .options(
                IndexOptions::builder()
                    .expire_after(IDEMPOTENCY_TTL)
                    .build(),
            )
            .build();
        let indexes = [
            (self.keys(), unique(doc! { "hash": 1 })),
            (
                self.channels(),
                unique(doc! { "org": 1, "project": 1, "name": 1 }),
            ),
            (
                self.events(),
                plain(doc! { "org": 1, "project": 1, "_id": -1 }),
            ),
            // The read side: listings newest first (per scope, per channel),
            // the tail every stream follows and retention (by time).
            (
                self.events(),
                plain(doc! { "org": 1, "project": 1, "createdAt": -1, "_id": -1 }),
            ),
            (
                self.events(),
                plain(doc! { "org": 1, "project": 1, "channelName": 1, "createdAt": -1 }),
            ),
            (self.events(), plain(doc! { "createdAt": 1, "_id": 1 })),
            (self.events(), plain(doc! { "notification": 1, "_id": 1 })),
            (
                self.devices(),
                unique(doc! { "org": 1, "project": 1, "token": 1 }),
            ),
            (
                self.deliveries(),
                unique(doc! { "eventId": 1, "deviceId": 1 }),
            ),
            (
                self.identities(),
                unique(doc! { "org": 1, "project": 1, "userId": 1 }),
            ),
            // Users: the listing (most recently seen first) and the
            // forwarders of a user (its aliases, `identities.rs`).
            (
                self.identities(),
                plain(doc! { "org": 1, "project": 1, "lastSeenAt": -1, "userId": -1 }),
            ),
            (
                self.identities(),
                plain(doc! { "org": 1, "project": 1, "mergedInto": 1 }),
            ),
            // A user's timeline: only events with a user take room in it.
            (
                self.events(),
                IndexModel::builder()
                    .keys(doc! { "org": 1, "project": 1, "userId": 1, "createdAt": -1, "_id": -1 })
                    .options(
                        IndexOptions::builder()
                            .partial_filter_expression(doc! { "userId": { "$type": "string" } })
                            .build(),
                    )
                    .build(),
            ),
            (
                self.idempotency(),
                unique(doc! { "org": 1, "project": 1, "key": 1 }),
            ),
            (self.idempotency(), expiring),
            (self.keys(), plain(doc! { "previousHash": 1 })),
            (self.organizations(), unique(doc! { "name": 1 })),
            (self.organizations(), unique(doc! { "slug": 1 })),
            (
                self.projects(),
                unique(doc! { "organizationId": 1, "name": 1 }),
            ),
            (
                self.projects(),
                unique(doc! { "organizationId": 1, "slug": 1 }),
            ),
            (self.admins(), unique(doc! { "hash": 1 })),
            (
                self.destinations(),
                plain(doc! { "org": 1, "project": 1, "_id": 1 }),
            ),
            // An insight by its title (unique per project), and the live
            // streams' look for what changed since they last looked.
            (
                self.insights(),
                unique(doc! { "org": 1, "project": 1, "title": 1 }),
            ),
            (self.insights(), plain(doc! { "updatedAt": 1 })),
            // The relay's look for summaries whose window ended.
            (self.summaries(), plain(doc! { "state": 1, "recheckAt": 1 })),
        ];
        for (collection, index) in indexes {
            collection.create_index(index).await.map_err(classify)?;
        }
        Ok(())
    }

    /// Removes the records of `collection` with these ids, and the
    /// deliveries keyed by them (an event's, or a summary's push): the
    /// deliveries first, so a crash in between leaves records without their
    /// deliveries, which the next pass removes, never deliveries without
    /// their record. Returns how many of each went.
    async fn purge_with_deliveries(
        &self,
        collection: &Collection<Document>,
        ids: &[&str],
    ) -> StoreResult<(u64, u64)> {
        let deliveries = self
            .deliveries()
            .delete_many(doc! { "eventId": { "$in": ids } })
            .await
            .map_err(classify)?
            .deleted_count;
        let records = collection
            .delete_many(doc! { "_id": { "$in": ids } })
            .await
            .map_err(classify)?
            .deleted_count;
        Ok((records, deliveries))
    }

    fn keys(&self) -> Collection<Document> {
        self.db.collection("api_keys")
    }
    fn channels(&self) -> Collection<Document> {
        self.db.collection(CHANNELS)
    }
    fn events(&self) -> Collection<Document> {
        self.db.collection(EVENTS)
    }
    fn identities(&self) -> Collection<Document> {
        self.db.collection(IDENTITIES)
    }
    fn idempotency(&self) -> Collection<Document> {
        self.db.collection(IDEMPOTENCY)
    }
    fn devices(&self) -> Collection<Document> {
        self.db.collection("devices")
    }
    fn deliveries(&self) -> Collection<Document> {
        self.db.collection("deliveries")
    }
    fn summaries(&self) -> Collection<Document> {
        self.db.collection("summaries")
    }
    fn insights(&self) -> Collection<Document> {
        self.db.collection("insights")
    }
    fn destinations(&self) -> Collection<Document> {
        self.db.collection("destinations")
    }
    fn organizations(&self) -> Collection<Document> {
        self.db.collection("organizations")
    }
    fn projects(&self) -> Collection<Document> {
        self.db.collection("projects")
    }
    fn admins(&self) -> Collection<Document> {
        self.db.collection("admins")
    }
    fn audit(&self) -> Collection<Document> {
        self.db.collection("audit")
    }
}

#[async_trait]
impl Store for MongoStore {
    async fn ping(&self) -> StoreResult<()> {
        self.guard
            .call("ping", async {
                self.db
                    .run_command(doc! { "ping": 1 })
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }

    fn observe(&self, observer: Arc<dyn StoreObserver>) -> bool {
        self.guard.observe(observer)
    }
}

/// Sorts driver errors into "cannot reach the store" and everything else.
fn classify(e: mongodb::error::Error) -> StoreError {
    match e.kind.as_ref() {
        ErrorKind::ServerSelection { .. }
        | ErrorKind::Io(_)
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::DnsResolve { .. } => StoreError::Unavailable(anyhow::Error::new(e)),
        _ => StoreError::Backend(anyhow::Error::new(e)),
    }
}

fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == DUPLICATE_KEY,
        ErrorKind::Command(c) => c.code == DUPLICATE_KEY,
        _ => false,
    }
}

/// Every document matching `filter`, sorted, at most `limit` of them.
async fn find_all(
    collection: &Collection<Document>,
    filter: Document,
    sort: Document,
    limit: Option<i64>,
) -> StoreResult<Vec<Document>> {
    let mut find = collection.find(filter).sort(sort);
    if let Some(limit) = limit {
        find = find.limit(limit);
    }
    find.await
        .map_err(classify)?
        .try_collect()
        .await
        .map_err(classify)
}

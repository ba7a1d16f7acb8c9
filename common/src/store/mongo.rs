//! The production store on MongoDB, through the official driver.
//!
//! Every write relies on single-document atomicity (unique indexes and
//! conditional updates), never on multi-document transactions, so it runs on
//! any MongoDB deployment and on the MongoDB-compatible test server.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use mongodb::{
    Client, Collection, IndexModel,
    bson::{self, Bson, Document, doc, spec::BinarySubtype},
    error::{ErrorKind, WriteFailure},
    options::{ClientOptions, IndexOptions},
};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{
    ApiKey, ApnsEnvironment, Delivery, DeliveryClaim, DeliveryState, Device, DeviceRegistration,
    Event, IdempotencyBegin, Identity, Inserted, NotificationState, Scope, Store, StoreError,
    StoreResult, StoredResponse,
    lease::{self, ClaimRequest, Decision, Held},
    model::merge_identity_fields,
};

/// MongoDB's duplicate key error code.
const DUPLICATE_KEY: i32 = 11000;
/// Optimistic-concurrency attempts before a contended write gives up.
const MAX_ATTEMPTS: usize = 16;
/// How long idempotency records live before the TTL monitor may remove them.
const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 60 * 60);

pub struct MongoStore {
    db: mongodb::Database,
}

impl MongoStore {
    /// Connects, and creates every index the store relies on (idempotent).
    pub async fn connect(uri: &str, database: &str, deadline: Duration) -> StoreResult<Self> {
        let mut options = ClientOptions::parse(uri)
            .await
            .map_err(|e| StoreError::Unavailable(format!("invalid MongoDB URI: {e}")))?;
        options.app_name = Some("tocsin".into());
        options.server_selection_timeout = Some(deadline);
        options.connect_timeout = Some(deadline);
        let client = Client::with_options(options).map_err(classify)?;
        let store = Self {
            db: client.database(database),
        };
        store.create_indexes().await?;
        Ok(store)
    }

    async fn create_indexes(&self) -> StoreResult<()> {
        let unique = |keys: Document| {
            IndexModel::builder()
                .keys(keys)
                .options(IndexOptions::builder().unique(true).build())
                .build()
        };
        self.keys()
            .create_index(unique(doc! { "hash": 1 }))
            .await
            .map_err(classify)?;
        self.channels()
            .create_index(unique(doc! { "org": 1, "project": 1, "name": 1 }))
            .await
            .map_err(classify)?;
        self.events()
            .create_index(
                IndexModel::builder()
                    .keys(doc! { "org": 1, "project": 1, "_id": -1 })
                    .build(),
            )
            .await
            .map_err(classify)?;
        self.events()
            .create_index(
                IndexModel::builder()
                    .keys(doc! { "notification": 1, "_id": 1 })
                    .build(),
            )
            .await
            .map_err(classify)?;
        self.devices()
            .create_index(unique(doc! { "org": 1, "project": 1, "token": 1 }))
            .await
            .map_err(classify)?;
        self.deliveries()
            .create_index(unique(doc! { "eventId": 1, "deviceId": 1 }))
            .await
            .map_err(classify)?;
        self.identities()
            .create_index(unique(doc! { "org": 1, "project": 1, "userId": 1 }))
            .await
            .map_err(classify)?;
        self.idempotency()
            .create_index(unique(doc! { "org": 1, "project": 1, "key": 1 }))
            .await
            .map_err(classify)?;
        self.idempotency()
            .create_index(
                IndexModel::builder()
                    .keys(doc! { "createdAt": 1 })
                    .options(
                        IndexOptions::builder()
                            .expire_after(IDEMPOTENCY_TTL)
                            .build(),
                    )
                    .build(),
            )
            .await
            .map_err(classify)?;
        Ok(())
    }

    fn keys(&self) -> Collection<Document> {
        self.db.collection("api_keys")
    }
    fn channels(&self) -> Collection<Document> {
        self.db.collection("channels")
    }
    fn events(&self) -> Collection<Document> {
        self.db.collection("events")
    }
    fn identities(&self) -> Collection<Document> {
        self.db.collection("identities")
    }
    fn idempotency(&self) -> Collection<Document> {
        self.db.collection("idempotency")
    }
    fn devices(&self) -> Collection<Document> {
        self.db.collection("devices")
    }
    fn deliveries(&self) -> Collection<Document> {
        self.db.collection("deliveries")
    }
}

/// Sorts driver errors into "cannot reach the store" and everything else.
fn classify(e: mongodb::error::Error) -> StoreError {
    match e.kind.as_ref() {
        ErrorKind::ServerSelection { .. }
        | ErrorKind::Io(_)
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::DnsResolve { .. } => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Backend(anyhow::Error::new(e)),
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

fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == DUPLICATE_KEY,
        ErrorKind::Command(c) => c.code == DUPLICATE_KEY,
        _ => false,
    }
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(anyhow::anyhow!("unreadable {what} document: {e}"))
}

fn scope_filter(scope: &Scope) -> Document {
    doc! { "org": &scope.org, "project": &scope.project }
}

fn date(t: &DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(*t)
}

/// JSON → BSON without the serializer's failure modes: integers that do not
/// fit i64 become doubles instead of an error, so no client input can make a
/// write fail.
fn to_bson(v: &Value) -> Bson {
    match v {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Bson::Int64(i),
            None => Bson::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Bson::String(s.clone()),
        Value::Array(a) => Bson::Array(a.iter().map(to_bson).collect()),
        Value::Object(o) => Bson::Document(to_document(o)),
    }
}

fn to_document(map: &Map<String, Value>) -> Document {
    map.iter()
        .map(|(k, v)| (encode_key(k), to_bson(v)))
        .collect()
}

/// Escapes the characters BSON cannot hold in a key. Keys are C strings, so
/// a client's key containing NUL (valid JSON, and fine in SQLite) would
/// make the driver refuse the whole write; escaped, it round-trips, and
/// both stores give the same answer. U+FFFF (a noncharacter) is the escape:
/// NUL becomes U+FFFF '0' and U+FFFF itself U+FFFF '1', so every key maps
/// to one stored key and back. Keys without either are stored as they are.
const KEY_ESCAPE: char = '\u{FFFF}';

fn encode_key(key: &str) -> String {
    if !key.contains(['\0', KEY_ESCAPE]) {
        return key.to_owned();
    }
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        match c {
            '\0' => out.extend([KEY_ESCAPE, '0']),
            KEY_ESCAPE => out.extend([KEY_ESCAPE, '1']),
            c => out.push(c),
        }
    }
    out
}

fn decode_key(key: &str) -> String {
    if !key.contains(KEY_ESCAPE) {
        return key.to_owned();
    }
    let mut out = String::with_capacity(key.len());
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match (c, c == KEY_ESCAPE) {
            (_, true) => match chars.next() {
                Some('0') => out.push('\0'),
                // '1', or a lone escape written before escaping existed.
                Some('1') | None => out.push(KEY_ESCAPE),
                Some(other) => out.extend([KEY_ESCAPE, other]),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

fn to_json(b: &Bson) -> Value {
    match b {
        Bson::Null | Bson::Undefined => Value::Null,
        Bson::Boolean(v) => Value::Bool(*v),
        Bson::Int32(i) => Value::from(*i),
        Bson::Int64(i) => Value::from(*i),
        Bson::Double(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Bson::String(s) => Value::String(s.clone()),
        Bson::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Bson::Document(d) => Value::Object(from_document(d)),
        other => other.clone().into_relaxed_extjson(),
    }
}

fn from_document(d: &Document) -> Map<String, Value> {
    d.iter().map(|(k, v)| (decode_key(k), to_json(v))).collect()
}

fn opt_str(d: &Document, key: &str) -> Option<String> {
    d.get_str(key).ok().map(str::to_owned)
}

fn key_to_doc(k: &ApiKey) -> Document {
    doc! {
        "_id": k.id.to_string(),
        "name": k.name.clone(),
        "org": &k.scope.org,
        "project": &k.scope.project,
        "hash": &k.hash,
        "prefix": &k.prefix,
        "rateLimit": k.rate_limit.map(i64::from),
        "createdAt": date(&k.created_at),
        "revokedAt": k.revoked_at.as_ref().map(date),
    }
}

fn key_from_doc(d: &Document) -> StoreResult<ApiKey> {
    let parse = || -> anyhow::Result<ApiKey> {
        Ok(ApiKey {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            name: opt_str(d, "name"),
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            hash: d.get_str("hash")?.to_owned(),
            prefix: d.get_str("prefix")?.to_owned(),
            rate_limit: d.get_i64("rateLimit").ok().map(u32::try_from).transpose()?,
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            revoked_at: d.get_datetime("revokedAt").ok().map(|t| t.to_chrono()),
        })
    };
    parse().map_err(|e| corrupt("api key", e))
}

fn event_to_doc(e: &Event) -> Document {
    doc! {
        "_id": e.id.to_string(),
        "org": &e.scope.org,
        "project": &e.scope.project,
        "channelName": &e.channel_name,
        "title": &e.title,
        "description": e.description.clone(),
        "icon": e.icon.clone(),
        "tags": e.tags.clone(),
        "metadata": to_document(&e.metadata),
        "userId": e.user_id.clone(),
        "notify": e.notify,
        "source": e.source.clone(),
        "createdAt": date(&e.created_at),
        "notification": e.notification.as_str(),
        "requestId": e.request_id.clone(),
        "notificationDueAt": e.notification_due_at.as_ref().map(date),
    }
}

fn event_from_doc(d: &Document) -> StoreResult<Event> {
    let parse = || -> anyhow::Result<Event> {
        Ok(Event {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            channel_name: d.get_str("channelName")?.to_owned(),
            title: d.get_str("title")?.to_owned(),
            description: opt_str(d, "description"),
            icon: opt_str(d, "icon"),
            tags: d
                .get_array("tags")?
                .iter()
                .map(|t| t.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| anyhow::anyhow!("a tag is not a string"))?,
            metadata: from_document(d.get_document("metadata")?),
            user_id: opt_str(d, "userId"),
            notify: d.get_bool("notify")?,
            source: opt_str(d, "source"),
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            notification: NotificationState::parse(d.get_str("notification")?)
                .ok_or_else(|| anyhow::anyhow!("unknown notification state"))?,
            request_id: opt_str(d, "requestId"),
            notification_due_at: d
                .get_datetime("notificationDueAt")
                .ok()
                .map(|t| t.to_chrono()),
        })
    };
    parse().map_err(|e| corrupt("event", e))
}

fn device_to_doc(d: &Device) -> Document {
    doc! {
        "_id": d.id.to_string(),
        "org": &d.scope.org,
        "project": &d.scope.project,
        "token": &d.token,
        "environment": d.environment.as_str(),
        "name": d.name.clone(),
        "channels": d.channels.clone(),
        "active": d.active,
        "deactivatedReason": d.deactivated_reason.clone(),
        "createdAt": date(&d.created_at),
        "updatedAt": date(&d.updated_at),
    }
}

fn strings(d: &Document, key: &str) -> anyhow::Result<Option<Vec<String>>> {
    match d.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| anyhow::anyhow!("{key} holds a non-string")),
        Some(_) => anyhow::bail!("{key} is not an array"),
    }
}

fn device_from_doc(d: &Document) -> StoreResult<Device> {
    let parse = || -> anyhow::Result<Device> {
        Ok(Device {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            token: d.get_str("token")?.to_owned(),
            environment: ApnsEnvironment::parse(d.get_str("environment")?)
                .ok_or_else(|| anyhow::anyhow!("unknown environment"))?,
            name: opt_str(d, "name"),
            channels: strings(d, "channels")?,
            active: d.get_bool("active")?,
            deactivated_reason: opt_str(d, "deactivatedReason"),
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            updated_at: d.get_datetime("updatedAt")?.to_chrono(),
        })
    };
    parse().map_err(|e| corrupt("device", e))
}

fn delivery_from_doc(d: &Document) -> StoreResult<Delivery> {
    let parse = || -> anyhow::Result<Delivery> {
        Ok(Delivery {
            event_id: Uuid::parse_str(d.get_str("eventId")?)?,
            device_id: Uuid::parse_str(d.get_str("deviceId")?)?,
            state: DeliveryState::parse(d.get_str("state")?)
                .ok_or_else(|| anyhow::anyhow!("unknown delivery state"))?,
            attempts: u32::try_from(d.get_i64("attempts")?)?,
            error: opt_str(d, "error"),
            apns_id: opt_str(d, "apnsId"),
            updated_at: d.get_datetime("updatedAt")?.to_chrono(),
            lease_until: d.get_datetime("leaseUntil").ok().map(|t| t.to_chrono()),
        })
    };
    parse().map_err(|e| corrupt("delivery", e))
}

fn state_names(states: &[NotificationState]) -> Vec<&'static str> {
    states.iter().map(|s| s.as_str()).collect()
}

fn identity_from_doc(d: &Document) -> StoreResult<(Identity, i64)> {
    let parse = || -> anyhow::Result<(Identity, i64)> {
        let identity = Identity {
            user_id: d.get_str("userId")?.to_owned(),
            properties: from_document(d.get_document("properties")?),
            aliases: d
                .get_array("aliases")?
                .iter()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect(),
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            updated_at: d.get_datetime("updatedAt")?.to_chrono(),
        };
        Ok((identity, d.get_i64("version")?))
    };
    parse().map_err(|e| corrupt("identity", e))
}

#[async_trait]
impl Store for MongoStore {
    async fn ping(&self) -> StoreResult<()> {
        self.db
            .run_command(doc! { "ping": 1 })
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        self.keys()
            .insert_one(key_to_doc(key))
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        self.keys()
            .find_one(doc! { "hash": hash })
            .await
            .map_err(classify)?
            .as_ref()
            .map(key_from_doc)
            .transpose()
    }

    async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>> {
        let docs = find_all(
            &self.keys(),
            doc! {},
            doc! { "createdAt": 1, "_id": 1 },
            None,
        )
        .await?;
        docs.iter().map(key_from_doc).collect()
    }

    async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        let result = self
            .keys()
            .update_one(
                doc! { "_id": id.to_string(), "revokedAt": Bson::Null },
                doc! { "$set": { "revokedAt": date(&at) } },
            )
            .await
            .map_err(classify)?;
        Ok(result.modified_count == 1)
    }

    async fn insert_event(&self, event: &Event) -> StoreResult<Inserted> {
        let mut channel = scope_filter(&event.scope);
        channel.insert("name", &event.channel_name);
        let created = self
            .channels()
            .update_one(
                channel,
                doc! { "$setOnInsert": { "createdAt": date(&event.created_at) } },
            )
            .upsert(true)
            .await;
        match created {
            // Two first events racing to create one channel: the loser's
            // upsert hits the unique index, and the channel exists either way.
            Err(e) if !is_duplicate_key(&e) => return Err(classify(e)),
            _ => {}
        }
        match self.events().insert_one(event_to_doc(event)).await {
            Ok(_) => Ok(Inserted::New),
            Err(e) if is_duplicate_key(&e) => {
                let existing = self
                    .events()
                    .find_one(doc! { "_id": event.id.to_string() })
                    .await
                    .map_err(classify)?
                    .ok_or_else(|| {
                        StoreError::Backend(anyhow::anyhow!("event {} vanished", event.id))
                    })?;
                Ok(Inserted::Existing(Box::new(event_from_doc(&existing)?)))
            }
            Err(e) => Err(classify(e)),
        }
    }

    async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>> {
        let mut filter = scope_filter(scope);
        filter.insert("_id", id.to_string());
        self.events()
            .find_one(filter)
            .await
            .map_err(classify)?
            .as_ref()
            .map(event_from_doc)
            .transpose()
    }

    async fn count_events(&self, scope: &Scope) -> StoreResult<u64> {
        self.events()
            .count_documents(scope_filter(scope))
            .await
            .map_err(classify)
    }

    async fn list_channels(&self, scope: &Scope) -> StoreResult<Vec<String>> {
        let docs = find_all(
            &self.channels(),
            scope_filter(scope),
            doc! { "createdAt": 1, "name": 1 },
            None,
        )
        .await?;
        Ok(docs.iter().filter_map(|d| opt_str(d, "name")).collect())
    }

    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity> {
        let mut filter = scope_filter(scope);
        filter.insert("userId", user_id);
        // Read, merge in Rust, write back only if nobody wrote in between
        // (a version check). Merging here rather than with update operators
        // keeps property names containing '.' or '$' literal.
        for _ in 0..MAX_ATTEMPTS {
            let existing = self
                .identities()
                .find_one(filter.clone())
                .await
                .map_err(classify)?;
            let (mut identity, version) = match &existing {
                Some(d) => identity_from_doc(d)?,
                None => (
                    Identity {
                        user_id: user_id.to_owned(),
                        properties: Map::new(),
                        aliases: Vec::new(),
                        created_at: now,
                        updated_at: now,
                    },
                    0,
                ),
            };
            merge_identity_fields(
                &mut identity.properties,
                &mut identity.aliases,
                properties.clone(),
                aliases.clone(),
            );
            identity.updated_at = now;
            let mut replacement = filter.clone();
            replacement.insert("properties", to_document(&identity.properties));
            replacement.insert("aliases", identity.aliases.clone());
            replacement.insert("createdAt", date(&identity.created_at));
            replacement.insert("updatedAt", date(&now));
            replacement.insert("version", version + 1);
            let written = if existing.is_some() {
                let mut guard = filter.clone();
                guard.insert("version", version);
                self.identities()
                    .replace_one(guard, replacement)
                    .await
                    .map(|r| r.matched_count == 1)
            } else {
                self.identities()
                    .insert_one(replacement)
                    .await
                    .map(|_| true)
            };
            match written {
                Ok(true) => return Ok(identity),
                Ok(false) => continue,
                Err(e) if is_duplicate_key(&e) => continue,
                Err(e) => return Err(classify(e)),
            }
        }
        Err(StoreError::Unavailable(format!(
            "identity {user_id} is being updated too often; try again"
        )))
    }

    async fn begin_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        fingerprint: &str,
        resource: Uuid,
        now: DateTime<Utc>,
        ttl: Duration,
        lock_timeout: Duration,
    ) -> StoreResult<IdempotencyBegin> {
        let mut id = scope_filter(scope);
        id.insert("key", key);
        let expired_before = now - ttl;
        let stale_before = now - lock_timeout;
        let mut fresh = id.clone();
        fresh.insert("fingerprint", fingerprint);
        fresh.insert("status", Bson::Null);
        fresh.insert("createdAt", date(&now));
        fresh.insert("lockedAt", date(&now));
        fresh.insert("resourceId", resource.to_string());
        for _ in 0..MAX_ATTEMPTS {
            match self.idempotency().insert_one(fresh.clone()).await {
                Ok(_) => return Ok(IdempotencyBegin::Started { resource }),
                Err(e) if !is_duplicate_key(&e) => return Err(classify(e)),
                Err(_) => {}
            }
            let Some(existing) = self
                .idempotency()
                .find_one(id.clone())
                .await
                .map_err(classify)?
            else {
                continue; // removed between our insert and read: try again
            };
            let created = existing
                .get_datetime("createdAt")
                .map_err(|e| corrupt("idempotency", e))?
                .to_chrono();
            let locked = existing
                .get_datetime("lockedAt")
                .map_err(|e| corrupt("idempotency", e))?
                .to_chrono();
            // The TTL monitor runs only once a minute: an expired record is
            // replaced here rather than trusted.
            if created < expired_before {
                let mut guard = id.clone();
                guard.insert("createdAt", date(&created));
                let replaced = self
                    .idempotency()
                    .replace_one(guard, fresh.clone())
                    .await
                    .map_err(classify)?;
                if replaced.matched_count == 1 {
                    return Ok(IdempotencyBegin::Started { resource });
                }
                continue;
            }
            if existing.get_str("fingerprint").ok() != Some(fingerprint) {
                return Ok(IdempotencyBegin::Mismatch);
            }
            if let Ok(status) = existing.get_i32("status") {
                let body = match existing.get("body") {
                    Some(Bson::Binary(b)) => b.bytes.clone(),
                    _ => Vec::new(),
                };
                return Ok(IdempotencyBegin::Replay(StoredResponse {
                    status: u16::try_from(status).map_err(|e| corrupt("idempotency", e))?,
                    content_type: opt_str(&existing, "contentType").unwrap_or_default(),
                    body,
                }));
            }
            if locked < stale_before {
                // Taken over: the id reserved by the first try stays, so
                // what it may have written is found, not doubled.
                let reserved = existing
                    .get_str("resourceId")
                    .ok()
                    .and_then(|r| Uuid::parse_str(r).ok())
                    .unwrap_or(resource);
                let mut guard = id.clone();
                guard.insert("lockedAt", date(&locked));
                guard.insert("status", Bson::Null);
                let taken = self
                    .idempotency()
                    .update_one(
                        guard,
                        doc! { "$set": {
                            "lockedAt": date(&now),
                            "resourceId": reserved.to_string(),
                        }},
                    )
                    .await
                    .map_err(classify)?;
                if taken.matched_count == 1 {
                    return Ok(IdempotencyBegin::Started { resource: reserved });
                }
                continue;
            }
            return Ok(IdempotencyBegin::InFlight);
        }
        Err(StoreError::Unavailable(format!(
            "idempotency key {key} is contended; try again"
        )))
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()> {
        let mut id = scope_filter(scope);
        id.insert("key", key);
        self.idempotency()
            .update_one(
                id,
                doc! { "$set": {
                    "status": i32::from(response.status),
                    "contentType": &response.content_type,
                    "body": bson::Binary { subtype: BinarySubtype::Generic, bytes: response.body.clone() },
                }},
            )
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        let mut id = scope_filter(scope);
        id.insert("key", key);
        id.insert("status", Bson::Null);
        self.idempotency().delete_one(id).await.map_err(classify)?;
        Ok(())
    }

    async fn abandon_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        let mut id = scope_filter(scope);
        id.insert("key", key);
        id.insert("status", Bson::Null);
        self.idempotency()
            .update_one(
                id,
                doc! { "$set": { "lockedAt": bson::DateTime::from_millis(0) } },
            )
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn set_notification_state(
        &self,
        scope: &Scope,
        event_id: Uuid,
        from: &[NotificationState],
        to: NotificationState,
        due: Option<DateTime<Utc>>,
    ) -> StoreResult<bool> {
        let mut filter = scope_filter(scope);
        filter.insert("_id", event_id.to_string());
        filter.insert("notification", doc! { "$in": state_names(from) });
        let result = self
            .events()
            .update_one(
                filter,
                doc! { "$set": {
                    "notification": to.as_str(),
                    "notificationDueAt": due.as_ref().map(date),
                }},
            )
            .await
            .map_err(classify)?;
        Ok(result.matched_count == 1)
    }

    async fn events_due(
        &self,
        states: &[NotificationState],
        due_before: DateTime<Utc>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        let mut filter = doc! {
            "notification": { "$in": state_names(states) },
            // Events written before due times existed have none: due now.
            "$or": [
                { "notificationDueAt": { "$lte": date(&due_before) } },
                { "notificationDueAt": Bson::Null },
            ],
        };
        if let Some(after) = after {
            filter.insert("_id", doc! { "$gt": after.to_string() });
        }
        let docs = find_all(
            &self.events(),
            filter,
            doc! { "_id": 1 },
            Some(i64::from(limit)),
        )
        .await?;
        docs.iter().map(event_from_doc).collect()
    }

    async fn count_in_notification_state(&self, state: NotificationState) -> StoreResult<u64> {
        self.events()
            .count_documents(doc! { "notification": state.as_str() })
            .await
            .map_err(classify)
    }

    async fn upsert_device(
        &self,
        scope: &Scope,
        registration: &DeviceRegistration,
        now: DateTime<Utc>,
    ) -> StoreResult<(Device, bool)> {
        let mut filter = scope_filter(scope);
        filter.insert("token", &registration.token);
        for _ in 0..MAX_ATTEMPTS {
            let existing = self
                .devices()
                .find_one(filter.clone())
                .await
                .map_err(classify)?
                .as_ref()
                .map(device_from_doc)
                .transpose()?;
            let device = Device {
                id: existing.as_ref().map_or_else(Uuid::now_v7, |d| d.id),
                scope: scope.clone(),
                token: registration.token.clone(),
                environment: registration.environment,
                name: registration.name.clone(),
                channels: registration.channels.clone(),
                active: true,
                deactivated_reason: None,
                created_at: existing.as_ref().map_or(now, |d| d.created_at),
                updated_at: now,
            };
            let written = match &existing {
                Some(_) => self
                    .devices()
                    .replace_one(
                        doc! { "_id": device.id.to_string() },
                        device_to_doc(&device),
                    )
                    .await
                    .map(|r| r.matched_count == 1),
                None => self
                    .devices()
                    .insert_one(device_to_doc(&device))
                    .await
                    .map(|_| true),
            };
            match written {
                Ok(true) => return Ok((device, existing.is_none())),
                Ok(false) => continue,
                Err(e) if is_duplicate_key(&e) => continue,
                Err(e) => return Err(classify(e)),
            }
        }
        Err(StoreError::Unavailable(
            "device registration is contended; try again".into(),
        ))
    }

    async fn list_devices(&self, scope: &Scope) -> StoreResult<Vec<Device>> {
        let docs = find_all(
            &self.devices(),
            scope_filter(scope),
            doc! { "createdAt": 1, "_id": 1 },
            None,
        )
        .await?;
        docs.iter().map(device_from_doc).collect()
    }

    async fn delete_device(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
        let mut filter = scope_filter(scope);
        filter.insert("_id", id.to_string());
        let result = self.devices().delete_one(filter).await.map_err(classify)?;
        Ok(result.deleted_count == 1)
    }

    async fn deactivate_device(
        &self,
        scope: &Scope,
        id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut filter = scope_filter(scope);
        filter.insert("_id", id.to_string());
        let result = self
            .devices()
            .update_one(
                filter,
                doc! { "$set": { "active": false, "deactivatedReason": reason, "updatedAt": date(&now) } },
            )
            .await
            .map_err(classify)?;
        Ok(result.matched_count == 1)
    }

    async fn claim_delivery(
        &self,
        scope: &Scope,
        event_id: Uuid,
        device_id: Uuid,
        request: &ClaimRequest,
    ) -> StoreResult<DeliveryClaim> {
        let key = doc! { "eventId": event_id.to_string(), "deviceId": device_id.to_string() };
        let now = date(&request.now);
        // Most claims are first claims: try the insert before reading
        // anything, and read only when a record turns out to exist.
        let mut look = false;
        for _ in 0..MAX_ATTEMPTS {
            let existing = if look {
                self.deliveries()
                    .find_one(key.clone())
                    .await
                    .map_err(classify)?
            } else {
                None
            };
            look = true;
            let held = existing
                .as_ref()
                .map(|d| {
                    let current = delivery_from_doc(d)?;
                    // Records from before leases: a claim's lease was a minute.
                    let lease_until = current.lease_until.unwrap_or_else(|| {
                        d.get_datetime("claimedAt")
                            .map(|t| t.to_chrono() + chrono::Duration::seconds(60))
                            .unwrap_or_default()
                    });
                    Ok::<_, StoreError>(Held {
                        state: current.state,
                        attempts: current.attempts,
                        lease_until,
                    })
                })
                .transpose()?;
            let decision = lease::decide(held, request);
            // Every write is conditional on the record read (or on there
            // being none), so of two workers racing only one wins.
            let written = match (decision, held) {
                (Decision::Answer(_), _) => true,
                (
                    Decision::Take {
                        attempt,
                        lease_until,
                    },
                    None,
                ) => {
                    let mut fresh = key.clone();
                    fresh.insert("org", &scope.org);
                    fresh.insert("project", &scope.project);
                    fresh.insert("state", DeliveryState::Sending.as_str());
                    fresh.insert("attempts", i64::from(attempt));
                    fresh.insert("claimedAt", now);
                    fresh.insert("leaseUntil", date(&lease_until));
                    fresh.insert("updatedAt", now);
                    match self.deliveries().insert_one(fresh).await {
                        Ok(_) => true,
                        Err(e) if is_duplicate_key(&e) => false,
                        Err(e) => return Err(classify(e)),
                    }
                }
                (decision, Some(held)) => {
                    let mut guard = key.clone();
                    guard.insert("state", held.state.as_str());
                    guard.insert("attempts", i64::from(held.attempts));
                    let update = match decision {
                        Decision::Take {
                            attempt,
                            lease_until,
                        } => doc! { "$set": {
                            "state": DeliveryState::Sending.as_str(),
                            "attempts": i64::from(attempt),
                            "claimedAt": now,
                            "leaseUntil": date(&lease_until),
                            "updatedAt": now,
                        }},
                        _ => doc! { "$set": {
                            "state": DeliveryState::Failed.as_str(),
                            "error": lease::gave_up_reason(held.attempts),
                            "leaseUntil": Bson::Null,
                            "updatedAt": now,
                        }},
                    };
                    self.deliveries()
                        .update_one(guard, update)
                        .await
                        .map_err(classify)?
                        .matched_count
                        == 1
                }
                (Decision::GiveUp { .. }, None) => true,
            };
            if written {
                return Ok(decision.claim());
            }
        }
        Err(StoreError::Unavailable(
            "delivery claim is contended; try again".into(),
        ))
    }

    async fn finish_delivery(&self, scope: &Scope, delivery: &Delivery) -> StoreResult<bool> {
        let mut filter = scope_filter(scope);
        filter.insert("eventId", delivery.event_id.to_string());
        filter.insert("deviceId", delivery.device_id.to_string());
        filter.insert("state", DeliveryState::Sending.as_str());
        filter.insert("attempts", i64::from(delivery.attempts));
        let result = self
            .deliveries()
            .update_one(
                filter,
                doc! { "$set": {
                    "state": delivery.state.as_str(),
                    "error": delivery.error.clone(),
                    "apnsId": delivery.apns_id.clone(),
                    "leaseUntil": delivery.lease_until.as_ref().map(date),
                    "updatedAt": date(&delivery.updated_at),
                }},
            )
            .await
            .map_err(classify)?;
        Ok(result.matched_count == 1)
    }

    async fn list_deliveries(&self, scope: &Scope, event_id: Uuid) -> StoreResult<Vec<Delivery>> {
        let mut filter = scope_filter(scope);
        filter.insert("eventId", event_id.to_string());
        let docs = find_all(&self.deliveries(), filter, doc! { "deviceId": 1 }, None).await?;
        docs.iter().map(delivery_from_doc).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_bson_cannot_hold_round_trip_through_the_escape() {
        for key in [
            "plain",
            "a\0b",
            "\0",
            "\u{FFFF}",
            "\u{FFFF}0",
            "x\u{FFFF}1\0\u{FFFF}",
            "$ref",
            "a.b",
            "",
        ] {
            let stored = encode_key(key);
            assert!(!stored.contains('\0'), "{key:?} -> {stored:?}");
            assert_eq!(decode_key(&stored), key, "{key:?} -> {stored:?}");
        }
        assert_eq!(encode_key("plain"), "plain");
    }
}

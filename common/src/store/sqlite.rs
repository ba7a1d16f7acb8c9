//! The embedded store: one SQLite file, driven on its own thread by
//! tokio-rusqlite so no query ever blocks the async runtime. WAL mode and a
//! busy timeout let the admin CLI write keys while the server runs.

use std::{
    path::Path,
    sync::atomic::{AtomicI64, Ordering},
    time::Duration,
};

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{
    ApiKey, ApnsEnvironment, Delivery, DeliveryClaim, DeliveryState, Device, DeviceRegistration,
    Event, IdempotencyBegin, Identity, Inserted, NotificationState, Scope, SqliteSync, Store,
    StoreError, StoreResult, StoredResponse,
    lease::{self, ClaimRequest, Decision, Held},
    model::merge_identity_fields,
};

/// Schema migrations, applied in order; `PRAGMA user_version` records how
/// many have run. Append only.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT,
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    rate_limit INTEGER,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE TABLE channels (
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (org, project, name)
);
CREATE TABLE events (
    id TEXT PRIMARY KEY,
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    channel_name TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT,
    icon TEXT,
    tags TEXT NOT NULL,
    metadata TEXT NOT NULL,
    user_id TEXT,
    notify INTEGER NOT NULL,
    source TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX events_by_scope ON events (org, project, id);
CREATE TABLE identities (
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    user_id TEXT NOT NULL,
    properties TEXT NOT NULL,
    aliases TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (org, project, user_id)
);
CREATE TABLE idempotency (
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status INTEGER,
    content_type TEXT,
    body BLOB,
    created_at_ms INTEGER NOT NULL,
    locked_at_ms INTEGER NOT NULL,
    PRIMARY KEY (org, project, key)
);
CREATE INDEX idempotency_by_age ON idempotency (created_at_ms);
"#,
    r#"
ALTER TABLE events ADD COLUMN notification_state TEXT NOT NULL DEFAULT 'skipped';
ALTER TABLE events ADD COLUMN request_id TEXT;
CREATE INDEX events_by_notification ON events (notification_state, created_at);
CREATE TABLE devices (
    id TEXT PRIMARY KEY,
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    token TEXT NOT NULL,
    environment TEXT NOT NULL,
    name TEXT,
    channels TEXT,
    active INTEGER NOT NULL,
    deactivated_reason TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (org, project, token)
);
CREATE TABLE deliveries (
    event_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    error TEXT,
    apns_id TEXT,
    claimed_at_ms INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (event_id, device_id)
);
"#,
    // Leases: when an unsettled notification is next due for the relay,
    // when a delivery claim runs out, the id an idempotency key reserves.
    r#"
ALTER TABLE events ADD COLUMN notification_due_ms INTEGER;
UPDATE events SET notification_due_ms = 0 WHERE notification_state IN ('pending', 'queued');
CREATE INDEX events_by_relay ON events (notification_state, id);
ALTER TABLE deliveries ADD COLUMN lease_until_ms INTEGER NOT NULL DEFAULT 0;
UPDATE deliveries SET lease_until_ms = claimed_at_ms + 60000 WHERE state = 'sending';
ALTER TABLE idempotency ADD COLUMN resource_id TEXT;
"#,
];

/// How often expired idempotency rows are swept (SQLite has no TTL index).
const SWEEP_EVERY_MS: i64 = 60_000;

pub struct SqliteStore {
    conn: tokio_rusqlite::Connection,
    last_sweep_ms: AtomicI64,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and brings its schema
    /// up to date, with the default durability.
    pub async fn open(path: &Path) -> StoreResult<Self> {
        Self::open_with(path, SqliteSync::default()).await
    }

    /// Like [`SqliteStore::open`], syncing as `synchronous` says.
    pub async fn open_with(path: &Path, synchronous: SqliteSync) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Unavailable(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let conn = tokio_rusqlite::Connection::open(path)
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", path.display())))?;
        conn.call(move |c| {
            c.busy_timeout(Duration::from_secs(5))?;
            c.pragma_update(None, "journal_mode", "WAL")?;
            c.pragma_update(None, "synchronous", synchronous.as_str())?;
            migrate(c)
        })
        .await
        .map_err(backend)?;
        Ok(Self {
            conn,
            last_sweep_ms: AtomicI64::new(0),
        })
    }

    async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<R> + Send + 'static,
    ) -> StoreResult<R> {
        self.conn.call(f).await.map_err(backend)
    }
}

fn migrate(c: &mut rusqlite::Connection) -> rusqlite::Result<()> {
    let applied: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (i, sql) in (0i64..).zip(MIGRATIONS).skip_while(|(i, _)| *i < applied) {
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i + 1)?;
        tx.commit()?;
    }
    Ok(())
}

fn backend(e: tokio_rusqlite::Error<rusqlite::Error>) -> StoreError {
    match e {
        tokio_rusqlite::Error::Error(rusqlite::Error::SqliteFailure(f, msg))
            if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            StoreError::Unavailable(format!("database busy: {}", msg.unwrap_or_default()))
        }
        other => StoreError::Backend(anyhow::Error::new(other)),
    }
}

/// States as one JSON array parameter, matched with
/// `notification_state IN (SELECT value FROM json_each(?))`: one fixed,
/// cacheable statement whatever the number of states.
fn state_list(states: &[NotificationState]) -> String {
    let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    serde_json::to_string(&names).expect("a list of names serialises")
}

fn ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn parse_ts(s: &str) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

fn ms(t: &DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn from_ms(ms: i64) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| {
        rusqlite::Error::ToSqlConversionFailure(format!("timestamp {ms} out of range").into())
    })
}

fn parse_uuid(s: &str) -> rusqlite::Result<Uuid> {
    Uuid::parse_str(s).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

fn parse_json<T: serde::de::DeserializeOwned>(s: &str) -> rusqlite::Result<T> {
    serde_json::from_str(s).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

fn to_json<T: serde::Serialize>(v: &T) -> rusqlite::Result<String> {
    serde_json::to_string(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

const KEY_COLUMNS: &str =
    "id, name, org, project, hash, prefix, rate_limit, created_at, revoked_at";

fn key_from_row(r: &Row<'_>) -> rusqlite::Result<ApiKey> {
    Ok(ApiKey {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        name: r.get(1)?,
        scope: Scope::new(r.get::<_, String>(2)?, r.get::<_, String>(3)?),
        hash: r.get(4)?,
        prefix: r.get(5)?,
        rate_limit: r.get(6)?,
        created_at: parse_ts(&r.get::<_, String>(7)?)?,
        revoked_at: r
            .get::<_, Option<String>>(8)?
            .map(|s| parse_ts(&s))
            .transpose()?,
    })
}

const EVENT_COLUMNS: &str = "id, org, project, channel_name, title, description, icon, tags, \
                             metadata, user_id, notify, source, created_at, notification_state, request_id, \
                             notification_due_ms";

fn event_from_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        scope: Scope::new(r.get::<_, String>(1)?, r.get::<_, String>(2)?),
        channel_name: r.get(3)?,
        title: r.get(4)?,
        description: r.get(5)?,
        icon: r.get(6)?,
        tags: parse_json(&r.get::<_, String>(7)?)?,
        metadata: parse_json(&r.get::<_, String>(8)?)?,
        user_id: r.get(9)?,
        notify: r.get(10)?,
        source: r.get(11)?,
        created_at: parse_ts(&r.get::<_, String>(12)?)?,
        notification: parse_enum(&r.get::<_, String>(13)?, NotificationState::parse)?,
        request_id: r.get(14)?,
        notification_due_at: r.get::<_, Option<i64>>(15)?.map(from_ms).transpose()?,
    })
}

fn parse_enum<T>(s: &str, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    parse(s).ok_or_else(|| {
        rusqlite::Error::ToSqlConversionFailure(format!("unknown state {s:?}").into())
    })
}

const DEVICE_COLUMNS: &str = "id, org, project, token, environment, name, channels, active, \
                              deactivated_reason, created_at, updated_at";

fn device_from_row(r: &Row<'_>) -> rusqlite::Result<Device> {
    Ok(Device {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        scope: Scope::new(r.get::<_, String>(1)?, r.get::<_, String>(2)?),
        token: r.get(3)?,
        environment: parse_enum(&r.get::<_, String>(4)?, ApnsEnvironment::parse)?,
        name: r.get(5)?,
        channels: r
            .get::<_, Option<String>>(6)?
            .map(|c| parse_json(&c))
            .transpose()?,
        active: r.get(7)?,
        deactivated_reason: r.get(8)?,
        created_at: parse_ts(&r.get::<_, String>(9)?)?,
        updated_at: parse_ts(&r.get::<_, String>(10)?)?,
    })
}

const DELIVERY_COLUMNS: &str =
    "event_id, device_id, state, attempts, error, apns_id, updated_at, lease_until_ms";

fn delivery_from_row(r: &Row<'_>) -> rusqlite::Result<Delivery> {
    Ok(Delivery {
        event_id: parse_uuid(&r.get::<_, String>(0)?)?,
        device_id: parse_uuid(&r.get::<_, String>(1)?)?,
        state: parse_enum(&r.get::<_, String>(2)?, DeliveryState::parse)?,
        attempts: r.get(3)?,
        error: r.get(4)?,
        apns_id: r.get(5)?,
        updated_at: parse_ts(&r.get::<_, String>(6)?)?,
        lease_until: match r.get::<_, i64>(7)? {
            0 => None,
            ms => Some(from_ms(ms)?),
        },
    })
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        self.run(|c| c.query_row("SELECT 1", [], |_| Ok(()))).await
    }

    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        let key = key.clone();
        self.run(move |c| {
            c.execute(
                &format!(
                    "INSERT INTO api_keys ({KEY_COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)"
                ),
                params![
                    key.id.to_string(),
                    key.name,
                    key.scope.org,
                    key.scope.project,
                    key.hash,
                    key.prefix,
                    key.rate_limit,
                    ts(&key.created_at),
                    key.revoked_at.as_ref().map(ts),
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        let hash = hash.to_owned();
        self.run(move |c| {
            c.prepare_cached(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = ?1"
            ))?
            .query_row([hash], key_from_row)
            .optional()
        })
        .await
    }

    async fn list_api_keys(&self) -> StoreResult<Vec<ApiKey>> {
        self.run(|c| {
            c.prepare(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id"
            ))?
            .query_map([], key_from_row)?
            .collect()
        })
        .await
    }

    async fn revoke_api_key(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        self.run(move |c| {
            let n = c.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![id.to_string(), ts(&at)],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn insert_event(&self, event: &Event) -> StoreResult<Inserted> {
        let e = event.clone();
        self.run(move |c| {
            let tags = to_json(&e.tags)?;
            let metadata = to_json(&e.metadata)?;
            let created = ts(&e.created_at);
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let inserted = tx
                .prepare_cached(&format!(
                    "INSERT INTO events ({EVENT_COLUMNS}) \
                     VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16) \
                     ON CONFLICT (id) DO NOTHING"
                ))?
                .execute(params![
                    e.id.to_string(),
                    e.scope.org,
                    e.scope.project,
                    e.channel_name,
                    e.title,
                    e.description,
                    e.icon,
                    tags,
                    metadata,
                    e.user_id,
                    e.notify,
                    e.source,
                    created,
                    e.notification.as_str(),
                    e.request_id,
                    e.notification_due_at.as_ref().map(ms),
                ])?;
            if inserted == 0 {
                let existing = tx
                    .prepare_cached(&format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = ?1"))?
                    .query_row([e.id.to_string()], event_from_row)?;
                return Ok(Inserted::Existing(Box::new(existing)));
            }
            tx.prepare_cached(
                "INSERT OR IGNORE INTO channels (org, project, name, created_at) VALUES (?1,?2,?3,?4)",
            )?
            .execute(params![e.scope.org, e.scope.project, e.channel_name, created])?;
            tx.commit()?;
            Ok(Inserted::New)
        })
        .await
    }

    async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>> {
        let scope = scope.clone();
        self.run(move |c| {
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE id = ?1 AND org = ?2 AND project = ?3"
            ))?
            .query_row(
                params![id.to_string(), scope.org, scope.project],
                event_from_row,
            )
            .optional()
        })
        .await
    }

    async fn count_events(&self, scope: &Scope) -> StoreResult<u64> {
        let scope = scope.clone();
        self.run(move |c| {
            c.prepare_cached("SELECT COUNT(*) FROM events WHERE org = ?1 AND project = ?2")?
                .query_row(params![scope.org, scope.project], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
        })
        .await
    }

    async fn list_channels(&self, scope: &Scope) -> StoreResult<Vec<String>> {
        let scope = scope.clone();
        self.run(move |c| {
            c.prepare_cached(
                "SELECT name FROM channels WHERE org = ?1 AND project = ?2 ORDER BY created_at, name",
            )?
            .query_map(params![scope.org, scope.project], |r| r.get(0))?
            .collect()
        })
        .await
    }

    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity> {
        let scope = scope.clone();
        let user_id = user_id.to_owned();
        self.run(move |c| {
            // IMMEDIATE takes the write lock up front, so the read-merge-write
            // below cannot interleave with another writer.
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let existing = tx
                .query_row(
                    "SELECT properties, aliases, created_at FROM identities \
                     WHERE org = ?1 AND project = ?2 AND user_id = ?3",
                    params![scope.org, scope.project, user_id],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    },
                )
                .optional()?;
            let (mut props, mut all_aliases, created_at) = match existing {
                Some((p, a, created)) => (parse_json(&p)?, parse_json(&a)?, parse_ts(&created)?),
                None => (Map::new(), Vec::new(), now),
            };
            merge_identity_fields(&mut props, &mut all_aliases, properties, aliases);
            tx.execute(
                "INSERT INTO identities (org, project, user_id, properties, aliases, created_at, updated_at) \
                 VALUES (?1,?2,?3,?4,?5,?6,?7) \
                 ON CONFLICT (org, project, user_id) DO UPDATE SET \
                 properties = excluded.properties, aliases = excluded.aliases, updated_at = excluded.updated_at",
                params![
                    scope.org,
                    scope.project,
                    user_id,
                    to_json(&props)?,
                    to_json(&all_aliases)?,
                    ts(&created_at),
                    ts(&now),
                ],
            )?;
            tx.commit()?;
            Ok(Identity {
                user_id,
                properties: props,
                aliases: all_aliases,
                created_at,
                updated_at: now,
            })
        })
        .await
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
        let scope = scope.clone();
        let fresh = resource.to_string();
        let key = key.to_owned();
        let fingerprint = fingerprint.to_owned();
        let now_ms = now.timestamp_millis();
        let expired_before = now_ms - ttl.as_millis() as i64;
        let stale_before = now_ms - lock_timeout.as_millis() as i64;
        let sweep = now_ms - self.last_sweep_ms.load(Ordering::Relaxed) > SWEEP_EVERY_MS;
        if sweep {
            self.last_sweep_ms.store(now_ms, Ordering::Relaxed);
        }
        self.run(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if sweep {
                tx.execute(
                    "DELETE FROM idempotency WHERE created_at_ms < ?1",
                    [expired_before],
                )?;
            }
            let existing = tx
                .prepare_cached(
                    "SELECT fingerprint, status, content_type, body, created_at_ms, locked_at_ms, \
                     resource_id FROM idempotency WHERE org = ?1 AND project = ?2 AND key = ?3",
                )?
                .query_row(params![scope.org, scope.project, key], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<u16>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<Vec<u8>>>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, Option<String>>(6)?,
                    ))
                })
                .optional()?;
            let outcome = match existing {
                Some((fp, status, content_type, body, created, locked, reserved))
                    if created >= expired_before =>
                {
                    if fp != fingerprint {
                        IdempotencyBegin::Mismatch
                    } else if let Some(status) = status {
                        IdempotencyBegin::Replay(StoredResponse {
                            status,
                            content_type: content_type.unwrap_or_default(),
                            body: body.unwrap_or_default(),
                        })
                    } else if locked < stale_before {
                        // Taken over: the id reserved by the first try stays,
                        // so what it may have written is found, not doubled.
                        let resource = reserved.unwrap_or(fresh);
                        tx.execute(
                            "UPDATE idempotency SET locked_at_ms = ?4, resource_id = ?5 \
                             WHERE org = ?1 AND project = ?2 AND key = ?3",
                            params![scope.org, scope.project, key, now_ms, resource],
                        )?;
                        IdempotencyBegin::Started {
                            resource: parse_uuid(&resource)?,
                        }
                    } else {
                        IdempotencyBegin::InFlight
                    }
                }
                _ => {
                    tx.execute(
                        "INSERT OR REPLACE INTO idempotency \
                         (org, project, key, fingerprint, status, content_type, body, created_at_ms, \
                          locked_at_ms, resource_id) \
                         VALUES (?1,?2,?3,?4,NULL,NULL,NULL,?5,?5,?6)",
                        params![scope.org, scope.project, key, fingerprint, now_ms, fresh],
                    )?;
                    IdempotencyBegin::Started { resource }
                }
            };
            tx.commit()?;
            Ok(outcome)
        })
        .await
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()> {
        let scope = scope.clone();
        let key = key.to_owned();
        let response = response.clone();
        self.run(move |c| {
            c.execute(
                "UPDATE idempotency SET status = ?4, content_type = ?5, body = ?6 \
                 WHERE org = ?1 AND project = ?2 AND key = ?3",
                params![
                    scope.org,
                    scope.project,
                    key,
                    response.status,
                    response.content_type,
                    response.body
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn release_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        let scope = scope.clone();
        let key = key.to_owned();
        self.run(move |c| {
            c.execute(
                "DELETE FROM idempotency WHERE org = ?1 AND project = ?2 AND key = ?3 AND status IS NULL",
                params![scope.org, scope.project, key],
            )?;
            Ok(())
        })
        .await
    }

    async fn abandon_idempotent(&self, scope: &Scope, key: &str) -> StoreResult<()> {
        let scope = scope.clone();
        let key = key.to_owned();
        self.run(move |c| {
            c.execute(
                "UPDATE idempotency SET locked_at_ms = 0 \
                 WHERE org = ?1 AND project = ?2 AND key = ?3 AND status IS NULL",
                params![scope.org, scope.project, key],
            )?;
            Ok(())
        })
        .await
    }

    async fn set_notification_state(
        &self,
        scope: &Scope,
        event_id: Uuid,
        from: &[NotificationState],
        to: NotificationState,
        due: Option<DateTime<Utc>>,
    ) -> StoreResult<bool> {
        let scope = scope.clone();
        let from = state_list(from);
        self.run(move |c| {
            let n = c
                .prepare_cached(
                    "UPDATE events SET notification_state = ?4, notification_due_ms = ?6 \
                     WHERE id = ?1 AND org = ?2 AND project = ?3 \
                     AND notification_state IN (SELECT value FROM json_each(?5))",
                )?
                .execute(params![
                    event_id.to_string(),
                    scope.org,
                    scope.project,
                    to.as_str(),
                    from,
                    due.as_ref().map(ms),
                ])?;
            Ok(n == 1)
        })
        .await
    }

    async fn events_due(
        &self,
        states: &[NotificationState],
        due_before: DateTime<Utc>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        let states = state_list(states);
        // Every UUID's text sorts after the empty string.
        let after = after.map(|id| id.to_string()).unwrap_or_default();
        self.run(move |c| {
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events \
                 WHERE notification_state IN (SELECT value FROM json_each(?1)) \
                 AND coalesce(notification_due_ms, 0) <= ?2 AND id > ?3 \
                 ORDER BY id LIMIT ?4"
            ))?
            .query_map(
                params![states, ms(&due_before), after, limit],
                event_from_row,
            )?
            .collect()
        })
        .await
    }

    async fn count_in_notification_state(&self, state: NotificationState) -> StoreResult<u64> {
        self.run(move |c| {
            c.prepare_cached("SELECT COUNT(*) FROM events WHERE notification_state = ?1")?
                .query_row(params![state.as_str()], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
        })
        .await
    }

    async fn upsert_device(
        &self,
        scope: &Scope,
        registration: &DeviceRegistration,
        now: DateTime<Utc>,
    ) -> StoreResult<(Device, bool)> {
        let scope = scope.clone();
        let reg = registration.clone();
        self.run(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let existing = tx
                .query_row(
                    &format!("SELECT {DEVICE_COLUMNS} FROM devices WHERE org = ?1 AND project = ?2 AND token = ?3"),
                    params![scope.org, scope.project, reg.token],
                    device_from_row,
                )
                .optional()?;
            let created = existing.is_none();
            let device = Device {
                id: existing.as_ref().map_or_else(Uuid::now_v7, |d| d.id),
                scope: scope.clone(),
                token: reg.token,
                environment: reg.environment,
                name: reg.name,
                channels: reg.channels,
                active: true,
                deactivated_reason: None,
                created_at: existing.as_ref().map_or(now, |d| d.created_at),
                updated_at: now,
            };
            let channels = device.channels.as_ref().map(to_json).transpose()?;
            tx.execute(
                &format!(
                    "INSERT OR REPLACE INTO devices ({DEVICE_COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)"
                ),
                params![
                    device.id.to_string(),
                    device.scope.org,
                    device.scope.project,
                    device.token,
                    device.environment.as_str(),
                    device.name,
                    channels,
                    device.active,
                    device.deactivated_reason,
                    ts(&device.created_at),
                    ts(&device.updated_at),
                ],
            )?;
            tx.commit()?;
            Ok((device, created))
        })
        .await
    }

    async fn list_devices(&self, scope: &Scope) -> StoreResult<Vec<Device>> {
        let scope = scope.clone();
        self.run(move |c| {
            c.prepare_cached(&format!(
                "SELECT {DEVICE_COLUMNS} FROM devices WHERE org = ?1 AND project = ?2 ORDER BY created_at, id"
            ))?
            .query_map(params![scope.org, scope.project], device_from_row)?
            .collect()
        })
        .await
    }

    async fn delete_device(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
        let scope = scope.clone();
        self.run(move |c| {
            let n = c.execute(
                "DELETE FROM devices WHERE id = ?1 AND org = ?2 AND project = ?3",
                params![id.to_string(), scope.org, scope.project],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn deactivate_device(
        &self,
        scope: &Scope,
        id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let scope = scope.clone();
        let reason = reason.to_owned();
        self.run(move |c| {
            let n = c.execute(
                "UPDATE devices SET active = 0, deactivated_reason = ?4, updated_at = ?5 \
                 WHERE id = ?1 AND org = ?2 AND project = ?3",
                params![id.to_string(), scope.org, scope.project, reason, ts(&now)],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn claim_delivery(
        &self,
        scope: &Scope,
        event_id: Uuid,
        device_id: Uuid,
        request: &ClaimRequest,
    ) -> StoreResult<DeliveryClaim> {
        let scope = scope.clone();
        let request = *request;
        self.run(move |c| {
            let (event, device) = (event_id.to_string(), device_id.to_string());
            // IMMEDIATE: the read and the write below are one atomic step.
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let held = tx
                .prepare_cached(
                    "SELECT state, attempts, lease_until_ms FROM deliveries \
                     WHERE event_id = ?1 AND device_id = ?2",
                )?
                .query_row(params![event, device], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?, r.get::<_, i64>(2)?))
                })
                .optional()?
                .map(|(state, attempts, until)| {
                    Ok::<_, rusqlite::Error>(Held {
                        state: parse_enum(&state, DeliveryState::parse)?,
                        attempts,
                        lease_until: from_ms(until)?,
                    })
                })
                .transpose()?;
            let decision = lease::decide(held, &request);
            let now = ts(&request.now);
            match decision {
                Decision::Take { attempt, lease_until } => {
                    tx.prepare_cached(
                        "INSERT INTO deliveries (event_id, device_id, org, project, state, attempts, \
                         claimed_at_ms, lease_until_ms, updated_at) \
                         VALUES (?1, ?2, ?3, ?4, 'sending', ?5, ?6, ?7, ?8) \
                         ON CONFLICT (event_id, device_id) DO UPDATE SET state = 'sending', \
                         attempts = excluded.attempts, claimed_at_ms = excluded.claimed_at_ms, \
                         lease_until_ms = excluded.lease_until_ms, updated_at = excluded.updated_at",
                    )?
                    .execute(params![
                        event,
                        device,
                        scope.org,
                        scope.project,
                        attempt,
                        ms(&request.now),
                        ms(&lease_until),
                        now
                    ])?;
                }
                Decision::GiveUp { attempts } => {
                    tx.execute(
                        "UPDATE deliveries SET state = 'failed', error = ?3, lease_until_ms = 0, \
                         updated_at = ?4 WHERE event_id = ?1 AND device_id = ?2",
                        params![event, device, lease::gave_up_reason(attempts), now],
                    )?;
                }
                Decision::Answer(_) => {}
            }
            tx.commit()?;
            Ok(decision.claim())
        })
        .await
    }

    async fn finish_delivery(&self, scope: &Scope, delivery: &Delivery) -> StoreResult<bool> {
        let scope = scope.clone();
        let d = delivery.clone();
        self.run(move |c| {
            let n = c
                .prepare_cached(
                    "UPDATE deliveries SET state = ?5, error = ?7, apns_id = ?8, updated_at = ?9, \
                     lease_until_ms = ?10 \
                     WHERE event_id = ?1 AND device_id = ?2 AND org = ?3 AND project = ?4 \
                     AND state = 'sending' AND attempts = ?6",
                )?
                .execute(params![
                    d.event_id.to_string(),
                    d.device_id.to_string(),
                    scope.org,
                    scope.project,
                    d.state.as_str(),
                    d.attempts,
                    d.error,
                    d.apns_id,
                    ts(&d.updated_at),
                    d.lease_until.as_ref().map_or(0, ms),
                ])?;
            Ok(n == 1)
        })
        .await
    }

    async fn list_deliveries(&self, scope: &Scope, event_id: Uuid) -> StoreResult<Vec<Delivery>> {
        let scope = scope.clone();
        self.run(move |c| {
            c.prepare_cached(&format!(
                "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE event_id = ?1 AND org = ?2 AND project = ?3 ORDER BY device_id"
            ))?
            .query_map(params![event_id.to_string(), scope.org, scope.project], delivery_from_row)?
            .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_synchronous_setting_reaches_the_connection() {
        let dir = tempfile::tempdir().expect("temp dir");
        for (setting, pragma) in [(SqliteSync::Normal, 1), (SqliteSync::Full, 2)] {
            let store = SqliteStore::open_with(&dir.path().join("t.sqlite3"), setting)
                .await
                .expect("opens");
            let level: i64 = store
                .run(|c| c.pragma_query_value(None, "synchronous", |r| r.get(0)))
                .await
                .expect("read");
            assert_eq!(level, pragma, "{setting:?}");
        }
    }
}

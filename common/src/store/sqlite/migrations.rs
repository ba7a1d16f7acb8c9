//! The schema, as migrations applied in order at open; `PRAGMA user_version`
//! records how many have run.

use rusqlite::{TransactionBehavior, functions::FunctionFlags};

/// Append only: a database records how many it has applied, so an edited or
/// reordered migration would never run where the old one did.
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
    // The read side: listings newest first (per scope, per channel), the
    // tail every stream follows and retention (all scopes, by time). Every
    // index costs each insert a B-tree write: the two that nothing reads
    // any more go (counts use any index on their columns' prefix, and the
    // relay reads `events_by_relay`).
    r#"
CREATE INDEX events_by_scope_time ON events (org, project, created_at, id);
CREATE INDEX events_by_channel_time ON events (org, project, channel_name, created_at, id);
CREATE INDEX events_by_time ON events (created_at, id);
DROP INDEX events_by_scope;
DROP INDEX events_by_notification;
"#,
    // Key scopes: a JSON array of scope names. NULL (every key stored
    // before scopes existed) means every scope: those keys had full access.
    r#"
ALTER TABLE api_keys ADD COLUMN scopes TEXT;
"#,
    // Operators (issue 14): organizations and projects become records whose
    // slug is the scope string their data is tagged with; those that exist
    // only as strings are adopted (slug = name). Key rotation, last use,
    // admin tokens and the audit log.
    r#"
CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    slug TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
);
CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    name TEXT NOT NULL,
    slug TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (organization_id, name),
    UNIQUE (organization_id, slug)
);
CREATE TEMP TABLE adopted AS
    SELECT org, project, MIN(created_at) AS created_at FROM (
        SELECT org, project, created_at FROM api_keys
        UNION ALL SELECT org, project, created_at FROM devices
        UNION ALL SELECT org, project, MIN(created_at) FROM events GROUP BY org, project
    ) GROUP BY org, project;
INSERT INTO organizations (id, name, slug, created_at)
    SELECT uuid7(), org, org, MIN(created_at) FROM adopted GROUP BY org;
INSERT INTO projects (id, organization_id, name, slug, created_at)
    SELECT uuid7(), o.id, a.project, a.project, a.created_at
    FROM adopted a JOIN organizations o ON o.slug = a.org;
DROP TABLE adopted;
ALTER TABLE api_keys ADD COLUMN previous_hash TEXT;
ALTER TABLE api_keys ADD COLUMN previous_expires_at TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
CREATE INDEX api_keys_by_previous_hash ON api_keys (previous_hash);
CREATE TABLE admins (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE TABLE audit (
    id TEXT PRIMARY KEY,
    at TEXT NOT NULL,
    actor_kind TEXT NOT NULL,
    actor_id TEXT,
    actor_name TEXT NOT NULL,
    action TEXT NOT NULL,
    target_type TEXT NOT NULL,
    target_id TEXT NOT NULL,
    target_name TEXT,
    details TEXT NOT NULL,
    address TEXT
);
"#,
    // Device kinds (issue 13): every device stored before them is APNs'.
    // `token` keeps the unique address of every kind (a Web Push
    // subscription's is its endpoint). Deliveries say which provider
    // answered; NULL for those recorded before.
    r#"
ALTER TABLE devices ADD COLUMN kind TEXT NOT NULL DEFAULT 'apns';
ALTER TABLE devices ADD COLUMN p256dh TEXT;
ALTER TABLE devices ADD COLUMN auth TEXT;
ALTER TABLE deliveries ADD COLUMN provider TEXT;
"#,
    // Event priorities (issue 13): every event stored before them is
    // `normal`.
    r#"
ALTER TABLE events ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal';
"#,
    // The relay's index holds only the events it still has work for
    // (issue 16): every other event (most of them, and every one recorded
    // with `notify: false`) no longer costs each insert a B-tree write. Its
    // predicate is `events::UNSETTLED`, which the queries that use the
    // index repeat word for word: SQLite uses a partial index only for a
    // query whose WHERE clause contains its predicate. Its columns stay
    // the state and the id: counting one state (the backlog gauge, polled)
    // reads the index alone, not a table row per unsettled event.
    r#"
DROP INDEX events_by_relay;
CREATE INDEX events_by_relay ON events (notification_state, id)
    WHERE notification_state IN ('pending', 'queued');
"#,
    // Alert rules (issue 31): a device's rules but its channels, as JSON;
    // NULL (every device stored before them) lets every alert through.
    r#"
ALTER TABLE devices ADD COLUMN rules TEXT;
ALTER TABLE deliveries ADD COLUMN reason TEXT;
ALTER TABLE deliveries ADD COLUMN summary_id TEXT;
ALTER TABLE events ADD COLUMN alert_key TEXT;
CREATE TABLE burst_windows (
    device_id TEXT PRIMARY KEY,
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    count INTEGER NOT NULL
);
CREATE TABLE summaries (
    id TEXT PRIMARY KEY,
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    device_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    due_ms INTEGER NOT NULL,
    events TEXT NOT NULL,
    state TEXT NOT NULL,
    recheck_ms INTEGER NOT NULL
);
CREATE INDEX summaries_by_relay ON summaries (recheck_ms) WHERE state != 'done';
"#,
    // Destinations (issue 32): a project's webhook, Slack, Discord,
    // Telegram, ntfy and email recipients. Their settings are sealed
    // (`crate::sealed`); `masked` is what is shown of them.
    r#"
CREATE TABLE destinations (
    id TEXT PRIMARY KEY,
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    disabled_reason TEXT,
    channels TEXT,
    rules TEXT NOT NULL,
    masked TEXT NOT NULL,
    sealed TEXT NOT NULL,
    failures INTEGER NOT NULL,
    last_error TEXT,
    last_error_at TEXT,
    last_delivered_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX destinations_by_scope ON destinations (org, project, id);
"#,
    // Event fields (issue 33): how the description is written and where a
    // tap on the alert leads. Every event stored before them is text.
    r#"
ALTER TABLE events ADD COLUMN parser TEXT NOT NULL DEFAULT 'text';
ALTER TABLE events ADD COLUMN url TEXT;
"#,
    // User journeys (issue 33): a user's counters (how many events, first
    // and last seen), kept as events are written; the alias index an event
    // under an alias is counted for its user by (`identities.rs`); the
    // user listing's index (most recently seen first) and the timeline's
    // (a user's events, newest first: only events with a user take room in
    // it). Existing data is counted once, here: each existing alias goes to
    // the first user (by creation) that listed it, unless it is another
    // user's own id; every event with a user counts for the user it names
    // (through the aliases), and a user its events name but identify never
    // did gets a record. Identify calls counted as seen (`created_at`,
    // `updated_at`) widen first and last seen.
    r#"
ALTER TABLE identities ADD COLUMN first_seen_at TEXT;
ALTER TABLE identities ADD COLUMN last_seen_at TEXT;
ALTER TABLE identities ADD COLUMN event_count INTEGER NOT NULL DEFAULT 0;
CREATE TABLE user_aliases (
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    alias TEXT NOT NULL,
    user_id TEXT NOT NULL,
    PRIMARY KEY (org, project, alias)
);
CREATE INDEX user_aliases_by_user ON user_aliases (org, project, user_id);
INSERT OR IGNORE INTO user_aliases (org, project, alias, user_id)
    SELECT i.org, i.project, a.value, i.user_id
    FROM identities i, json_each(i.aliases) a
    WHERE a.type = 'text' AND a.value != i.user_id AND NOT EXISTS (
        SELECT 1 FROM identities o
        WHERE o.org = i.org AND o.project = i.project AND o.user_id = a.value)
    ORDER BY i.created_at, i.user_id;
CREATE INDEX events_by_user ON events (org, project, user_id, created_at, id)
    WHERE user_id IS NOT NULL;
CREATE TEMP TABLE seen AS
    SELECT e.org AS org, e.project AS project, coalesce(a.user_id, e.user_id) AS user_id,
        COUNT(*) AS n, MIN(e.created_at) AS first, MAX(e.created_at) AS last
    FROM events e LEFT JOIN user_aliases a
        ON a.org = e.org AND a.project = e.project AND a.alias = e.user_id
    WHERE e.user_id IS NOT NULL
    GROUP BY 1, 2, 3;
INSERT INTO identities (org, project, user_id, properties, aliases, created_at, updated_at,
        first_seen_at, last_seen_at, event_count)
    SELECT org, project, user_id, '{}', '[]', first, first, first, last, n FROM seen WHERE true
    ON CONFLICT (org, project, user_id) DO UPDATE SET
        event_count = excluded.event_count,
        first_seen_at = min(identities.created_at, excluded.first_seen_at),
        last_seen_at = max(identities.updated_at, excluded.last_seen_at);
UPDATE identities SET first_seen_at = created_at, last_seen_at = updated_at
    WHERE first_seen_at IS NULL;
DROP TABLE seen;
CREATE INDEX identities_by_last_seen ON identities (org, project, last_seen_at, user_id);
"#,
    // Insights (issue 33): a project's named live values, one row each.
    // `value` is JSON (a string, a number or a boolean), NULL once deleted:
    // a deleted insight is kept a while (`insight::DELETION_KEPT`) so that
    // every replica's stream, which follows changes by `updated_at`, sees
    // the deletion. `version` grows with every change, deletions included.
    r#"
CREATE TABLE insights (
    org TEXT NOT NULL,
    project TEXT NOT NULL,
    title TEXT NOT NULL,
    value TEXT,
    icon TEXT,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (org, project, title)
);
CREATE INDEX insights_by_change ON insights (updated_at);
"#,
];

/// Applies the migrations this database has not run yet, each in its own
/// transaction with the version it brings.
pub(super) fn migrate(c: &mut rusqlite::Connection) -> rusqlite::Result<()> {
    // Records adopted by a migration get the ids the code gives (UUIDv7).
    c.create_scalar_function("uuid7", 0, FunctionFlags::SQLITE_UTF8, |_| {
        Ok(uuid::Uuid::now_v7().to_string())
    })?;
    let applied: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (i, sql) in (0i64..).zip(MIGRATIONS).skip_while(|(i, _)| *i < applied) {
        let started = std::time::Instant::now();
        let before = c.total_changes();
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i + 1)?;
        tx.commit()?;
        // A migration that adopts existing data (counts the events stored,
        // say) takes time on a large file: the log says which one ran, how
        // many rows it wrote and for how long.
        tracing::info!(
            version = i + 1,
            rows = c.total_changes() - before,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "schema migration applied"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{
        KeyScope,
        sqlite::codec::{KEY_COLUMNS, key_from_row},
    };

    /// A database last opened by a version without scopes: its keys come
    /// back with every scope, as they had full access then.
    #[test]
    fn keys_stored_before_scopes_existed_get_every_scope() {
        let mut c = rusqlite::Connection::open_in_memory().expect("opens");
        let scopes_at = MIGRATIONS
            .iter()
            .position(|sql| sql.contains("ADD COLUMN scopes"))
            .expect("the scopes migration");
        for sql in &MIGRATIONS[..scopes_at] {
            c.execute_batch(sql).expect("older migration");
        }
        c.pragma_update(
            None,
            "user_version",
            i64::try_from(scopes_at).expect("few migrations"),
        )
        .expect("version");
        c.execute(
            "INSERT INTO api_keys (id, name, org, project, hash, prefix, rate_limit, \
             created_at, revoked_at) VALUES ('0195a1b2-0000-7000-8000-000000000001', NULL, \
             'acme', 'web', 'h', 'tocsin_abcdef', NULL, '2025-01-01T00:00:00Z', NULL)",
            [],
        )
        .expect("an old key");

        migrate(&mut c).expect("migrates");
        let key = c
            .query_row(
                &format!("SELECT {KEY_COLUMNS} FROM api_keys"),
                [],
                key_from_row,
            )
            .expect("reads back");
        assert_eq!(key.scopes, KeyScope::ALL.to_vec());
    }

    /// A database last opened before organizations and projects were
    /// records: the scopes its keys, devices and events carry become
    /// records, each named as its slug.
    #[test]
    fn scopes_that_exist_only_as_strings_are_adopted() {
        let mut c = rusqlite::Connection::open_in_memory().expect("opens");
        let records_at = MIGRATIONS
            .iter()
            .position(|sql| sql.contains("CREATE TABLE organizations"))
            .expect("the records migration");
        for sql in &MIGRATIONS[..records_at] {
            c.execute_batch(sql).expect("older migration");
        }
        c.pragma_update(None, "user_version", records_at as i64)
            .expect("version");
        c.execute_batch(
            "INSERT INTO api_keys (id, name, org, project, hash, prefix, rate_limit, created_at, \
             revoked_at) VALUES ('k1', NULL, 'acme', 'web', 'h', 'p', NULL, \
             '2025-01-01T00:00:00Z', NULL); \
             INSERT INTO devices (id, org, project, token, environment, active, created_at, \
             updated_at) VALUES ('d1', 'acme', 'ios', 't', 'sandbox', 1, \
             '2025-01-02T00:00:00Z', '2025-01-02T00:00:00Z'); \
             INSERT INTO events (id, org, project, channel_name, title, tags, metadata, notify, \
             created_at) VALUES ('e1', 'globex', 'api', 'c', 't', '[]', '{}', 0, \
             '2025-01-03T00:00:00Z');",
        )
        .expect("old data");

        migrate(&mut c).expect("migrates");
        let mut scopes: Vec<(String, String, String, String)> = c
            .prepare(
                "SELECT o.name, o.slug, p.name, p.slug FROM projects p \
                 JOIN organizations o ON o.id = p.organization_id ORDER BY o.name, p.name",
            )
            .expect("query")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .expect("rows")
            .collect::<rusqlite::Result<_>>()
            .expect("read");
        scopes.dedup();
        let pair = |o: &str, p: &str| (o.to_owned(), o.to_owned(), p.to_owned(), p.to_owned());
        assert_eq!(
            scopes,
            vec![
                pair("acme", "ios"),
                pair("acme", "web"),
                pair("globex", "api")
            ]
        );
        let id: String = c
            .query_row("SELECT id FROM organizations LIMIT 1", [], |r| r.get(0))
            .expect("an id");
        assert_eq!(
            uuid::Uuid::parse_str(&id)
                .expect("a UUID")
                .get_version_num(),
            7
        );
    }

    /// A database last opened before users had counters: each user gets
    /// the events already stored (under its id or an alias it listed) and
    /// its identify calls as first and last seen; a user only events named
    /// gets a record; an alias that is another user's own id stays that
    /// user's.
    #[test]
    fn users_get_their_counters_from_the_events_already_stored() {
        let mut c = rusqlite::Connection::open_in_memory().expect("opens");
        let users_at = MIGRATIONS
            .iter()
            .position(|sql| sql.contains("CREATE TABLE user_aliases"))
            .expect("the users migration");
        c.create_scalar_function("uuid7", 0, FunctionFlags::SQLITE_UTF8, |_| {
            Ok(uuid::Uuid::now_v7().to_string())
        })
        .expect("uuid7");
        for sql in &MIGRATIONS[..users_at] {
            c.execute_batch(sql).expect("older migration");
        }
        c.pragma_update(None, "user_version", users_at as i64)
            .expect("version");
        let at = |day: u32| format!("2025-01-{day:02}T00:00:00.000000Z");
        for (user, aliases, created, updated) in [
            ("ada", r#"["anon", "grace", "ada"]"#, at(10), at(12)),
            ("grace", "[]", at(11), at(11)),
        ] {
            c.execute(
                "INSERT INTO identities (org, project, user_id, properties, aliases, \
                 created_at, updated_at) VALUES ('o', 'p', ?1, '{}', ?2, ?3, ?4)",
                rusqlite::params![user, aliases, created, updated],
            )
            .expect("an old identity");
        }
        for (i, (user, day)) in [
            (Some("anon"), 1),
            (Some("ada"), 20),
            (Some("grace"), 5),
            (Some("linus"), 7),
            (Some("linus"), 9),
            (None, 30),
        ]
        .into_iter()
        .enumerate()
        {
            c.execute(
                "INSERT INTO events (id, org, project, channel_name, title, tags, metadata, \
                 user_id, notify, created_at) VALUES (?1, 'o', 'p', 'c', 't', '[]', '{}', ?2, 0, ?3)",
                rusqlite::params![format!("e{i}"), user, at(day)],
            )
            .expect("an old event");
        }

        migrate(&mut c).expect("migrates");
        let mut users: Vec<(String, i64, String, String)> = c
            .prepare(
                "SELECT user_id, event_count, first_seen_at, last_seen_at FROM identities \
                 ORDER BY user_id",
            )
            .expect("query")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .expect("rows")
            .collect::<rusqlite::Result<_>>()
            .expect("read");
        users.sort();
        let user =
            |id: &str, n: i64, first: u32, last: u32| (id.to_owned(), n, at(first), at(last));
        assert_eq!(
            users,
            [
                user("ada", 2, 1, 20),
                user("grace", 1, 5, 11),
                user("linus", 2, 7, 9),
            ]
        );
        let aliases: Vec<(String, String)> = c
            .prepare("SELECT alias, user_id FROM user_aliases ORDER BY alias")
            .expect("query")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("rows")
            .collect::<rusqlite::Result<_>>()
            .expect("read");
        assert_eq!(aliases, [("anon".to_owned(), "ada".to_owned())]);
    }
}

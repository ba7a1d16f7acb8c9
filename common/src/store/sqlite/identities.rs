//! Users (the rules are `store::user`'s): their records in `identities`,
//! the alias index `user_aliases` (alias → the user it names), and the
//! counters each event with a user adds to in the writer's transaction
//! that stores it (`count_event_in`: one indexed upsert). Identify reads,
//! merges and writes in one write-locked transaction, so it never
//! interleaves with an event's count.

use std::sync::LazyLock;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, ToSql, TransactionBehavior, params};
use serde_json::{Map, Value};

use super::{
    SqliteStore,
    codec::{parse_json, parse_ts, to_json, ts},
    history::TEXT_CONTAINS,
};
use crate::store::{
    Event, Identity, IdentityStore, Scope, StoreResult, UserFilter, UserPosition,
    model::merge_identity_fields,
};

const USER_COLUMNS: &str = "user_id, properties, aliases, created_at, updated_at, \
     first_seen_at, last_seen_at, event_count";

/// The user `?3` names in the scope `?1`, `?2`: the one it is an alias of,
/// or itself.
const OWNER: &str = "coalesce((SELECT user_id FROM user_aliases \
     WHERE org = ?1 AND project = ?2 AND alias = ?3), ?3)";

/// Counts an event for the user its id names (`?3`, through the alias
/// index), making the user if it is new: `?4` its time. Made once: the
/// statement cache finds a statement by its text.
static COUNT_EVENT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO identities ({USER_COLUMNS}, org, project) \
         VALUES ({OWNER}, '{{}}', '[]', ?4, ?4, ?4, ?4, 1, ?1, ?2) \
         ON CONFLICT (org, project, user_id) DO UPDATE SET \
         event_count = event_count + 1, \
         first_seen_at = min(first_seen_at, excluded.first_seen_at), \
         last_seen_at = max(last_seen_at, excluded.last_seen_at)"
    )
});

/// Counts `e` for its user, if it has one, inside the writer's transaction
/// that stores it: one upsert, by the alias index and the user's key.
pub(super) fn count_event_in(c: &Connection, e: &Event) -> rusqlite::Result<()> {
    let Some(user_id) = &e.user_id else {
        return Ok(());
    };
    c.prepare_cached(&COUNT_EVENT)?.execute(params![
        e.scope.org,
        e.scope.project,
        user_id,
        ts(&e.created_at),
    ])?;
    Ok(())
}

/// The ids a user's events are recorded under: the user `user_id` names,
/// then its aliases. Empty when it names nobody.
pub(super) fn event_user_ids(
    c: &Connection,
    scope: &Scope,
    user_id: &str,
) -> rusqlite::Result<Vec<String>> {
    let Some(owner) = get_in(c, scope, user_id)? else {
        return Ok(Vec::new());
    };
    let mut ids = vec![owner.user_id.clone()];
    let aliases = c
        .prepare_cached(
            "SELECT alias FROM user_aliases WHERE org = ?1 AND project = ?2 AND user_id = ?3 \
             ORDER BY alias",
        )?
        .query_map(params![scope.org, scope.project, owner.user_id], |r| {
            r.get::<_, String>(0)
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    ids.extend(aliases);
    Ok(ids)
}

fn user_from_row(r: &Row<'_>) -> rusqlite::Result<Identity> {
    let created_at = parse_ts(&r.get::<_, String>(3)?)?;
    let updated_at = parse_ts(&r.get::<_, String>(4)?)?;
    let seen = |i: usize, otherwise: DateTime<Utc>| -> rusqlite::Result<DateTime<Utc>> {
        r.get::<_, Option<String>>(i)?
            .map_or(Ok(otherwise), |s| parse_ts(&s))
    };
    Ok(Identity {
        user_id: r.get(0)?,
        properties: parse_json(&r.get::<_, String>(1)?)?,
        aliases: parse_json(&r.get::<_, String>(2)?)?,
        created_at,
        updated_at,
        first_seen_at: seen(5, created_at)?,
        last_seen_at: seen(6, updated_at)?,
        event_count: r.get::<_, i64>(7)?.max(0) as u64,
    })
}

/// The user `user_id` names in `scope` (through the alias index).
fn get_in(c: &Connection, scope: &Scope, user_id: &str) -> rusqlite::Result<Option<Identity>> {
    c.prepare_cached(&format!(
        "SELECT {USER_COLUMNS} FROM identities \
         WHERE org = ?1 AND project = ?2 AND user_id = {OWNER}"
    ))?
    .query_row(params![scope.org, scope.project, user_id], user_from_row)
    .optional()
}

/// The user whose own id is `user_id`, not following aliases.
fn own_in(c: &Connection, scope: &Scope, user_id: &str) -> rusqlite::Result<Option<Identity>> {
    c.prepare_cached(&format!(
        "SELECT {USER_COLUMNS} FROM identities WHERE org = ?1 AND project = ?2 AND user_id = ?3"
    ))?
    .query_row(params![scope.org, scope.project, user_id], user_from_row)
    .optional()
}

/// The user `alias` is an alias of, per the index.
fn alias_owner(c: &Connection, scope: &Scope, alias: &str) -> rusqlite::Result<Option<String>> {
    c.prepare_cached(
        "SELECT user_id FROM user_aliases WHERE org = ?1 AND project = ?2 AND alias = ?3",
    )?
    .query_row(params![scope.org, scope.project, alias], |r| r.get(0))
    .optional()
}

/// Makes `alias` name `user_id`.
fn point_alias(c: &Connection, scope: &Scope, alias: &str, user_id: &str) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO user_aliases (org, project, alias, user_id) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (org, project, alias) DO UPDATE SET user_id = excluded.user_id",
    )?
    .execute(params![scope.org, scope.project, alias, user_id])?;
    Ok(())
}

/// Merges the user `other` into `user`: its counters, aliases and
/// properties (`Identity::absorb`), its aliases and its own id now naming
/// `user`, its record gone.
fn merge_in(
    c: &Connection,
    scope: &Scope,
    user: &mut Identity,
    other: &Identity,
) -> rusqlite::Result<()> {
    user.absorb(other);
    c.prepare_cached(
        "UPDATE user_aliases SET user_id = ?4 WHERE org = ?1 AND project = ?2 AND user_id = ?3",
    )?
    .execute(params![
        scope.org,
        scope.project,
        other.user_id,
        user.user_id
    ])?;
    point_alias(c, scope, &other.user_id, &user.user_id)?;
    c.prepare_cached("DELETE FROM identities WHERE org = ?1 AND project = ?2 AND user_id = ?3")?
        .execute(params![scope.org, scope.project, other.user_id])?;
    Ok(())
}

fn write_in(c: &Connection, scope: &Scope, user: &Identity) -> rusqlite::Result<()> {
    c.prepare_cached(&format!(
        "INSERT INTO identities ({USER_COLUMNS}, org, project) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
         ON CONFLICT (org, project, user_id) DO UPDATE SET \
         properties = excluded.properties, aliases = excluded.aliases, \
         updated_at = excluded.updated_at, first_seen_at = excluded.first_seen_at, \
         last_seen_at = excluded.last_seen_at, event_count = excluded.event_count"
    ))?
    .execute(params![
        user.user_id,
        to_json(&user.properties)?,
        to_json(&user.aliases)?,
        ts(&user.created_at),
        ts(&user.updated_at),
        ts(&user.first_seen_at),
        ts(&user.last_seen_at),
        i64::try_from(user.event_count).unwrap_or(i64::MAX),
        scope.org,
        scope.project,
    ])?;
    Ok(())
}

#[async_trait]
impl IdentityStore for SqliteStore {
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
        self.run("merge_identity", move |c| {
            // IMMEDIATE takes the write lock up front, so the read-merge-write
            // below cannot interleave with another writer.
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut user = get_in(&tx, &scope, &user_id)?.unwrap_or_else(|| Identity {
                user_id: user_id.clone(),
                properties: Map::new(),
                aliases: Vec::new(),
                created_at: now,
                updated_at: now,
                first_seen_at: now,
                last_seen_at: now,
                event_count: 0,
            });
            merge_identity_fields(&mut user.properties, &mut user.aliases, properties, aliases);
            user.updated_at = now;
            user.seen(now);
            // Every alias names this user: whoever one named is merged in
            // (joining its aliases to the list, which this loop then
            // visits too, already naming this user).
            let mut i = 0;
            while let Some(alias) = user.aliases.get(i).cloned() {
                i += 1;
                if alias == user.user_id {
                    continue;
                }
                let named = match alias_owner(&tx, &scope, &alias)? {
                    Some(owner) if owner == user.user_id => continue,
                    Some(owner) => own_in(&tx, &scope, &owner)?,
                    None => own_in(&tx, &scope, &alias)?,
                };
                if let Some(other) = named {
                    merge_in(&tx, &scope, &mut user, &other)?;
                }
                point_alias(&tx, &scope, &alias, &user.user_id)?;
            }
            write_in(&tx, &scope, &user)?;
            tx.commit()?;
            Ok(user)
        })
        .await
    }

    async fn get_identity(&self, scope: &Scope, user_id: &str) -> StoreResult<Option<Identity>> {
        let scope = scope.clone();
        let user_id = user_id.to_owned();
        self.run("get_identity", move |c| get_in(c, &scope, &user_id))
            .await
    }

    async fn list_users(
        &self,
        scope: &Scope,
        filter: &UserFilter,
        after: Option<UserPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Identity>> {
        let (sql, values) = list_sql(scope, filter, after.as_ref(), limit);
        self.run("list_users", move |c| {
            let params: Vec<&dyn ToSql> = values.iter().map(|v| v.as_ref() as _).collect();
            c.prepare_cached(&sql)?
                .query_map(params.as_slice(), user_from_row)?
                .collect()
        })
        .await
    }
}

/// The listing's query and its parameters: the scope's users newest seen
/// first, read along `identities_by_last_seen` (migrations.rs), never
/// from events.
pub(super) fn list_sql(
    scope: &Scope,
    filter: &UserFilter,
    after: Option<&UserPosition>,
    limit: u32,
) -> (String, Vec<Box<dyn ToSql + Send>>) {
    let mut values: Vec<Box<dyn ToSql + Send>> =
        vec![Box::new(scope.org.clone()), Box::new(scope.project.clone())];
    let mut bind = |v: Box<dyn ToSql + Send>| {
        values.push(v);
        format!("?{}", values.len())
    };
    let mut conditions = vec!["org = ?1 AND project = ?2".to_owned()];
    if let Some(text) = &filter.text {
        let needle = bind(Box::new(text.to_lowercase()));
        conditions.push(format!(
            "({TEXT_CONTAINS}(user_id, {needle}) OR EXISTS (SELECT 1 FROM \
             json_each(identities.aliases) WHERE {TEXT_CONTAINS}(value, {needle})))"
        ));
    }
    if let Some(property) = &filter.property {
        let key = bind(Box::new(property.key.clone()));
        let text = bind(Box::new(property.value.clone()));
        let mut kinds = vec![format!("(type = 'text' AND value = {text})")];
        if let Some(n) = property.number() {
            let n = bind(Box::new(n));
            kinds.push(format!("(type IN ('integer', 'real') AND value = {n})"));
        }
        match property.boolean() {
            Some(true) => kinds.push("type = 'true'".into()),
            Some(false) => kinds.push("type = 'false'".into()),
            None => {}
        }
        conditions.push(format!(
            "EXISTS (SELECT 1 FROM json_each(identities.properties) WHERE key = {key} AND ({}))",
            kinds.join(" OR ")
        ));
    }
    if let Some(after) = after {
        let seen = bind(Box::new(ts(&after.last_seen_at)));
        let id = bind(Box::new(after.user_id.clone()));
        conditions.push(format!("(last_seen_at, user_id) < ({seen}, {id})"));
    }
    let limit = bind(Box::new(limit));
    let sql = format!(
        "SELECT {USER_COLUMNS} FROM identities WHERE {} \
         ORDER BY last_seen_at DESC, user_id DESC LIMIT {limit}",
        conditions.join(" AND ")
    );
    (sql, values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EventStore as _, PropertyMatch};

    /// The listing reads users alone, along their index: its cost does not
    /// grow with the events stored.
    #[tokio::test]
    async fn the_user_listing_reads_the_users_index_and_never_the_events() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(&dir.path().join("t.sqlite3"))
            .await
            .expect("opens");
        for i in 0..20 {
            let mut event = super::super::group_commit::tests::event("c");
            event.user_id = Some(format!("u{}", i % 4));
            store.insert_event(&event).await.expect("inserted");
        }
        let scope = Scope::new("acme", "batch");
        let filters = [
            UserFilter::default(),
            UserFilter {
                text: Some("U1".into()),
                property: PropertyMatch::parse("plan:3"),
            },
        ];
        let after = UserPosition {
            last_seen_at: crate::time::now(),
            user_id: "u2".into(),
        };
        for filter in filters {
            let (sql, values) = list_sql(&scope, &filter, Some(&after), 10);
            let plan = store
                .run("test", move |c| {
                    c.execute_batch("ANALYZE")?;
                    let params: Vec<&dyn ToSql> = values.iter().map(|v| v.as_ref() as _).collect();
                    c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?
                        .query_map(params.as_slice(), |r| r.get::<_, String>(3))?
                        .collect::<rusqlite::Result<Vec<_>>>()
                        .map(|details| details.join("; "))
                })
                .await
                .expect("planned");
            assert!(plan.contains("identities_by_last_seen"), "{plan}");
            assert!(!plan.contains("events"), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "sorted apart: {plan}");
        }
    }
}

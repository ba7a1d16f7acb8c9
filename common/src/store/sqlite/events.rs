//! Events, the channels their first event creates (in the same
//! transaction), the idempotency outcome of the request that created one
//! (in the same transaction too), its user's counters (`identities`, in
//! the same transaction), and the notification state the outbox
//! relay works from. Inserts and state moves go through the group-commit
//! writer.

use async_trait::async_trait;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{EVENT_COLUMNS, event_from_row, ms, state_list, to_json, ts},
    deliveries, idempotency, identities,
};
use crate::store::{
    Event, EventStore, IdempotentOutcome, Inserted, NotificationState, Scope, StoreResult,
    settled_state,
};

/// The states the outbox relay still has work in, as the predicate of its
/// partial index `events_by_relay` (migrations.rs): a query uses that index
/// only when its WHERE clause contains this very term.
pub(super) const UNSETTLED: &str = "notification_state IN ('pending', 'queued')";

/// The texts of statements run for every event (its insert, on the writer's
/// thread, and the notifier's read and settling of it) and of the look-up
/// of an event an insert collided with, made once: the statement cache
/// finds a statement by its text.
static INSERT_EVENT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO events ({EVENT_COLUMNS}) \
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20) \
         ON CONFLICT (id) DO NOTHING"
    )
});
static SELECT_EVENT: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = ?1"));
static SETTLE_EVENT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE events SET notification_state = ?4, notification_due_ms = NULL \
         WHERE id = ?1 AND org = ?2 AND project = ?3 AND {UNSETTLED}"
    )
});
static SELECT_SCOPED_EVENT: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = ?1 AND org = ?2 AND project = ?3")
});

#[async_trait]
impl EventStore for SqliteStore {
    async fn insert_event(&self, event: &Event) -> StoreResult<Inserted> {
        let e = event.clone();
        self.write("insert_event", move |c| insert_in(c, &e, None))
            .await
    }

    async fn insert_event_with_outcome(
        &self,
        event: &Event,
        outcome: &IdempotentOutcome,
    ) -> StoreResult<Inserted> {
        let e = event.clone();
        let outcome = outcome.clone();
        self.write("insert_event_with_outcome", move |c| {
            insert_in(c, &e, Some(&outcome))
        })
        .await
    }

    async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>> {
        let scope = scope.clone();
        self.run("get_event", move |c| get_in(c, &scope, id)).await
    }

    /// Many events in one trip to the connection's thread.
    async fn get_events(&self, keys: &[(Scope, Uuid)]) -> StoreResult<Vec<Option<Event>>> {
        let keys = keys.to_vec();
        self.run("get_events", move |c| {
            keys.iter()
                .map(|(scope, id)| get_in(c, scope, *id))
                .collect()
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
        self.write("set_notification_state", move |c| {
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

    /// Reads the event's deliveries and moves its notification in one write, so
    /// the notifier's last step for an event is one trip to the connection's
    /// thread. The move names the unsettled states as the relay's index does
    /// (`UNSETTLED`), with no list to bind.
    async fn settle_notification(
        &self,
        scope: &Scope,
        event_id: Uuid,
        eligible: &[Uuid],
    ) -> StoreResult<Option<NotificationState>> {
        let scope = scope.clone();
        let eligible = eligible.to_vec();
        self.write("settle_notification", move |c| {
            let deliveries = deliveries::list_in(c, &scope, event_id)?;
            let state = settled_state(&deliveries, &eligible);
            if let Some(state) = state {
                c.prepare_cached(&SETTLE_EVENT)?.execute(params![
                    event_id.to_string(),
                    scope.org,
                    scope.project,
                    state.as_str(),
                ])?;
            }
            Ok(state)
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
        self.run("events_due", move |c| {
            c.prepare_cached(&due_sql())?
                .query_map(
                    params![states, ms(&due_before), after, limit],
                    event_from_row,
                )?
                .collect()
        })
        .await
    }

    async fn count_in_notification_state(&self, state: NotificationState) -> StoreResult<u64> {
        self.run("count_in_notification_state", move |c| {
            c.prepare_cached(&count_sql(state))?
                .query_row(params![state.as_str()], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
        })
        .await
    }
}

/// Inserts `e` and its channel and, when it is new, records `outcome` on
/// its idempotency claim, inside the writer's transaction.
fn insert_in(
    c: &Connection,
    e: &Event,
    outcome: Option<&IdempotentOutcome>,
) -> rusqlite::Result<Inserted> {
    let tags = to_json(&e.tags)?;
    let metadata = to_json(&e.metadata)?;
    let created = ts(&e.created_at);
    let inserted = c.prepare_cached(&INSERT_EVENT)?.execute(params![
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
        e.priority.as_str(),
        e.alert_key,
        e.parser.as_str(),
        e.url,
    ])?;
    if inserted == 0 {
        let existing = c
            .prepare_cached(&SELECT_EVENT)?
            .query_row([e.id.to_string()], event_from_row)?;
        return Ok(Inserted::Existing(Box::new(existing)));
    }
    c.prepare_cached(
        "INSERT OR IGNORE INTO channels (org, project, name, created_at) VALUES (?1,?2,?3,?4)",
    )?
    .execute(params![
        e.scope.org,
        e.scope.project,
        e.channel_name,
        created
    ])?;
    identities::count_event_in(c, e)?;
    if let Some(outcome) = outcome {
        idempotency::complete_in(c, &e.scope, &outcome.key, &outcome.response)?;
    }
    Ok(Inserted::New)
}

fn get_in(c: &Connection, scope: &Scope, id: Uuid) -> rusqlite::Result<Option<Event>> {
    c.prepare_cached(&SELECT_SCOPED_EVENT)?
        .query_row(
            params![id.to_string(), scope.org, scope.project],
            event_from_row,
        )
        .optional()
}

/// The relay's page: `?1` the states (a JSON array), `?2` the due time in
/// Unix milliseconds, `?3` the id to read after, `?4` the page's size.
fn due_sql() -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM events \
         WHERE {UNSETTLED} AND notification_state IN (SELECT value FROM json_each(?1)) \
         AND coalesce(notification_due_ms, 0) <= ?2 AND id > ?3 \
         ORDER BY id LIMIT ?4"
    )
}

/// Counts the events in the state `?1`: an unsettled one in the relay's
/// index, not by reading every event.
fn count_sql(state: NotificationState) -> String {
    let unsettled = if state.is_settled() {
        String::new()
    } else {
        format!("{UNSETTLED} AND ")
    };
    format!("SELECT COUNT(*) FROM events WHERE {unsettled}notification_state = ?1")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the events the relay still has work for take room in its index
    /// (an insert of any other costs no write there), and both queries of
    /// unsettled events read that index rather than every event: a count
    /// of one state, the index alone.
    #[tokio::test]
    async fn the_relay_index_holds_unsettled_events_alone_and_the_relay_reads_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(&dir.path().join("t.sqlite3"))
            .await
            .expect("opens");
        for i in 0..22 {
            let mut event = super::super::group_commit::tests::event("c");
            if i % 10 == 0 {
                event.notify = true;
                event.notification = NotificationState::Pending;
                event.notification_due_at = Some(event.created_at);
            }
            store.insert_event(&event).await.expect("inserted");
        }
        let (stat, plans) = store
            .run("test", |c| {
                c.execute_batch("ANALYZE")?;
                let stat: String = c.query_row(
                    "SELECT stat FROM sqlite_stat1 WHERE idx = 'events_by_relay'",
                    [],
                    |r| r.get(0),
                )?;
                let plan = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
                    c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?
                        .query_map(params, |r| r.get::<_, String>(3))?
                        .collect::<rusqlite::Result<Vec<_>>>()
                        .map(|details| details.join("; "))
                };
                let plans = [
                    plan(&due_sql(), &[&"[\"pending\"]", &0, &"", &10])?,
                    plan(&count_sql(NotificationState::Pending), &[&"pending"])?,
                    plan(&count_sql(NotificationState::Queued), &[&"queued"])?,
                ];
                Ok((stat, plans))
            })
            .await
            .expect("analyzed");
        // sqlite_stat1's first figure is the number of entries in the index.
        assert_eq!(stat.split(' ').next(), Some("3"), "{stat}");
        let [due, counts @ ..] = plans;
        assert!(due.contains("INDEX events_by_relay"), "{due}");
        // A count reads the index alone: no table row per unsettled event.
        for count in counts {
            assert!(count.contains("COVERING INDEX events_by_relay"), "{count}");
        }
    }
}

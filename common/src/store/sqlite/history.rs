//! Events as they are read back: listings with filters and a cursor, the
//! tail streams follow, channel counts, per-bucket counts, and retention.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{ToSql, TransactionBehavior, params};

use super::{
    SqliteStore,
    codec::{EVENT_COLUMNS, event_from_row, parse_ts, state_list, ts},
    identities,
};
use crate::store::{
    Bucket, ChannelStats, Event, EventFilter, EventPosition, HistoryStore, NotificationState,
    Purged, Scope, StoreResult,
};

/// The SQL function `text_contains(haystack, needle)`, registered on the
/// connection at open: SQLite's own `lower()` and `LIKE` fold ASCII only,
/// and a search for "été" must find "ÉTÉ".
pub(super) const TEXT_CONTAINS: &str = "text_contains";

/// Registers [`TEXT_CONTAINS`]: true when `needle` (given lowercased) is in
/// `haystack` ignoring case; false for a NULL haystack.
pub(super) fn register_functions(c: &rusqlite::Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    c.create_scalar_function(
        TEXT_CONTAINS,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let haystack = ctx.get::<Option<String>>(0)?;
            let needle = ctx.get::<String>(1)?;
            Ok(haystack.is_some_and(|h| h.to_lowercase().contains(&needle)))
        },
    )
}

/// A WHERE clause built from the conditions that apply, with its parameters
/// in order (numbered `?1`, `?2`… as they are pushed).
#[derive(Default)]
struct Conditions {
    sql: Vec<String>,
    params: Vec<Box<dyn ToSql + Send>>,
}

impl Conditions {
    /// Adds `condition`, in which every `?` stands for the next parameter.
    fn push(&mut self, condition: &str, values: Vec<Box<dyn ToSql + Send>>) {
        let mut numbered = String::new();
        let mut next = self.params.len();
        for part in condition.split_inclusive('?') {
            numbered.push_str(part);
            if part.ends_with('?') {
                next += 1;
                numbered.push_str(&next.to_string());
            }
        }
        self.sql.push(numbered);
        self.params.extend(values);
    }

    /// A placeholder for `value` outside the WHERE clause (a LIMIT).
    fn bind(&mut self, value: Box<dyn ToSql + Send>) -> String {
        self.params.push(value);
        format!("?{}", self.params.len())
    }

    fn scope(&mut self, scope: &Scope) {
        self.push(
            "org = ? AND project = ?",
            vec![Box::new(scope.org.clone()), Box::new(scope.project.clone())],
        );
    }

    fn where_clause(&self) -> String {
        if self.sql.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", self.sql.join(" AND "))
        }
    }

    fn params(&self) -> Vec<&dyn ToSql> {
        self.params
            .iter()
            .map(|p| p.as_ref() as &dyn ToSql)
            .collect()
    }
}

fn position_params(p: EventPosition) -> Vec<Box<dyn ToSql + Send>> {
    vec![Box::new(ts(&p.created_at)), Box::new(p.id.to_string())]
}

#[async_trait]
impl HistoryStore for SqliteStore {
    async fn list_events(
        &self,
        scope: &Scope,
        filter: &EventFilter,
        before: Option<EventPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        let mut w = Conditions::default();
        w.scope(scope);
        if let Some(channel) = &filter.channel {
            w.push("channel_name = ?", vec![Box::new(channel.clone())]);
        }
        if let Some(tag) = &filter.tag {
            w.push(
                "EXISTS (SELECT 1 FROM json_each(events.tags) WHERE value = ?)",
                vec![Box::new(tag.clone())],
            );
        }
        // The user's own id for now: the read puts each of its ids there.
        let user = filter.user_id.as_ref().map(|user_id| {
            w.push("user_id = ?", vec![Box::new(user_id.clone())]);
            (w.params.len() - 1, user_id.clone())
        });
        if let Some(text) = &filter.text {
            let needle = text.to_lowercase();
            w.push(
                &format!("({TEXT_CONTAINS}(title, ?) OR {TEXT_CONTAINS}(description, ?))"),
                vec![Box::new(needle.clone()), Box::new(needle)],
            );
        }
        if let Some(since) = filter.since {
            w.push("created_at >= ?", vec![Box::new(ts(&since))]);
        }
        if let Some(until) = filter.until {
            w.push("created_at < ?", vec![Box::new(ts(&until))]);
        }
        if let Some(before) = before {
            w.push("(created_at, id) < (?, ?)", position_params(before));
        }
        match user {
            None => select_events(self, "list_events", w, "created_at DESC, id DESC", limit).await,
            Some((slot, user_id)) => {
                events_of_user(self, scope.clone(), w, slot, user_id, limit).await
            }
        }
    }

    async fn events_after(
        &self,
        scope: Option<&Scope>,
        channel: Option<&str>,
        after: EventPosition,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        let mut w = Conditions::default();
        if let Some(scope) = scope {
            w.scope(scope);
        }
        if let Some(channel) = channel {
            w.push("channel_name = ?", vec![Box::new(channel.to_owned())]);
        }
        w.push("(created_at, id) > (?, ?)", position_params(after));
        select_events(self, "events_after", w, "created_at, id", limit).await
    }

    async fn channel_stats(&self, scope: &Scope) -> StoreResult<Vec<ChannelStats>> {
        let scope = scope.clone();
        self.run("channel_stats", move |c| {
            c.prepare_cached(
                "SELECT c.name, COUNT(e.id), MAX(e.created_at) AS last FROM channels c \
                     LEFT JOIN events e \
                     ON e.org = c.org AND e.project = c.project AND e.channel_name = c.name \
                     WHERE c.org = ?1 AND c.project = ?2 \
                     GROUP BY c.name ORDER BY last IS NULL, last DESC, c.name",
            )?
            .query_map(params![scope.org, scope.project], |r| {
                Ok(ChannelStats {
                    name: r.get(0)?,
                    event_count: r.get::<_, i64>(1)?.max(0) as u64,
                    last_event_at: r
                        .get::<_, Option<String>>(2)?
                        .as_deref()
                        .map(parse_ts)
                        .transpose()?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn count_events_per_bucket(
        &self,
        scope: &Scope,
        channel: Option<&str>,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        bucket: Bucket,
    ) -> StoreResult<Vec<(DateTime<Utc>, u64)>> {
        // Timestamps are stored as fixed-width RFC 3339 in UTC
        // ("2026-11-23T06:40:00.123000Z"), so the hour is the first 13
        // characters and the day the first 10.
        let (prefix, completion) = match bucket {
            Bucket::Hour => (13, ":00:00Z"),
            Bucket::Day => (10, "T00:00:00Z"),
        };
        let mut w = Conditions::default();
        w.scope(scope);
        if let Some(channel) = channel {
            w.push("channel_name = ?", vec![Box::new(channel.to_owned())]);
        }
        w.push(
            "created_at >= ? AND created_at < ?",
            vec![Box::new(ts(&since)), Box::new(ts(&until))],
        );
        let sql = format!(
            "SELECT substr(created_at, 1, {prefix}) AS bucket, COUNT(*) FROM events {} \
             GROUP BY bucket ORDER BY bucket",
            w.where_clause()
        );
        self.run("count_events_per_bucket", move |c| {
            c.prepare_cached(&sql)?
                .query_map(w.params().as_slice(), |r| {
                    let start = parse_ts(&format!("{}{completion}", r.get::<_, String>(0)?))?;
                    Ok((start, r.get::<_, i64>(1)?.max(0) as u64))
                })?
                .collect()
        })
        .await
    }

    async fn purge_events(
        &self,
        recorded_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Purged> {
        let settled = state_list(&NotificationState::SETTLED);
        self.run("purge_events", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let ids: Vec<String> = tx
                .prepare_cached(
                    "SELECT id FROM events WHERE created_at < ?1 \
                         AND notification_state IN (SELECT value FROM json_each(?2)) \
                         ORDER BY created_at LIMIT ?3",
                )?
                .query_map(params![ts(&recorded_before), settled, limit], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            let ids = serde_json::to_string(&ids)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
            let deliveries = tx
                .prepare_cached(
                    "DELETE FROM deliveries WHERE event_id IN (SELECT value FROM json_each(?1))",
                )?
                .execute([&ids])?;
            let events = tx
                .prepare_cached("DELETE FROM events WHERE id IN (SELECT value FROM json_each(?1))")?
                .execute([&ids])?;
            tx.commit()?;
            Ok(Purged {
                events: events as u64,
                deliveries: deliveries as u64,
                summaries: 0,
            })
        })
        .await
    }
}

/// The newest `limit` events `w` selects about the user `user_id` names,
/// recorded under its own id or any of its aliases (`w`'s parameter `slot`
/// holds the id): one range of `events_by_user` per id, each read newest
/// first and at most `limit` long, merged. So a page costs `limit` events
/// per id the user has, however many events it has.
async fn events_of_user(
    store: &SqliteStore,
    scope: Scope,
    mut w: Conditions,
    slot: usize,
    user_id: String,
    limit: u32,
) -> StoreResult<Vec<Event>> {
    let limit_param = w.bind(Box::new(limit));
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events {} ORDER BY created_at DESC, id DESC LIMIT {limit_param}",
        w.where_clause()
    );
    store
        .run("list_events", move |c| {
            let mut events = Vec::new();
            let mut statement = c.prepare_cached(&sql)?;
            for id in identities::event_user_ids(c, &scope, &user_id)? {
                let mut params = w.params();
                params[slot] = &id;
                let page = statement.query_map(params.as_slice(), event_from_row)?;
                for event in page {
                    events.push(event?);
                }
            }
            events.sort_by_key(|e| std::cmp::Reverse(e.position()));
            events.truncate(limit as usize);
            Ok(events)
        })
        .await
}

/// The events `w` selects, in `order`, at most `limit` (for the store
/// method `method`).
async fn select_events(
    store: &SqliteStore,
    method: &'static str,
    mut w: Conditions,
    order: &'static str,
    limit: u32,
) -> StoreResult<Vec<Event>> {
    let limit = w.bind(Box::new(limit));
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events {} ORDER BY {order} LIMIT {limit}",
        w.where_clause()
    );
    store
        .run(method, move |c| {
            c.prepare_cached(&sql)?
                .query_map(w.params().as_slice(), event_from_row)?
                .collect()
        })
        .await
}

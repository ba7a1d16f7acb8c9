//! Events as they are read back: listings with filters and a cursor, the
//! tail streams follow, channel counts, per-bucket counts, and retention.
//!
//! Only operations the MongoDB-compatible test server also implements are
//! used (plain finds, `$group` with `$sum`/`$first`, `$in` deletes), so the
//! same code is tested there and runs on MongoDB.

use async_trait::async_trait;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, doc};

use super::{
    MongoStore, classify,
    codec::{corrupt, date, event_from_doc, scope_filter, state_names},
    find_all,
    identities::Users,
};
use crate::store::{
    Bucket, ChannelStats, Event, EventFilter, EventPosition, HistoryStore, NotificationState,
    Purged, Scope, StoreResult,
};

#[async_trait]
impl HistoryStore for MongoStore {
    async fn list_events(
        &self,
        scope: &Scope,
        filter: &EventFilter,
        before: Option<EventPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.guard
            .call("list_events", async {
                let mut query = scope_filter(scope);
                if let Some(channel) = &filter.channel {
                    query.insert("channelName", channel);
                }
                if let Some(tag) = &filter.tag {
                    // An array field equal to a value matches when any element does.
                    query.insert("tags", tag);
                }
                if let Some(user_id) = &filter.user_id {
                    // The user's events: under its id or any alias. The
                    // `$type` repeats the partial index's filter, which a
                    // query must state to be served by it.
                    let ids = Users::new(&self.db).event_user_ids(scope, user_id).await?;
                    query.insert("userId", doc! { "$in": ids, "$type": "string" });
                }
                let mut all_of = Vec::new();
                if let Some(text) = &filter.text {
                    let pattern = doc! { "$regex": escape_regex(text), "$options": "i" };
                    all_of.push(doc! { "$or": [
                        { "title": pattern.clone() },
                        { "description": pattern },
                    ]});
                }
                let mut recorded = Document::new();
                if let Some(since) = filter.since {
                    recorded.insert("$gte", date(&since));
                }
                if let Some(until) = filter.until {
                    recorded.insert("$lt", date(&until));
                }
                if !recorded.is_empty() {
                    query.insert("createdAt", recorded);
                }
                if let Some(before) = before {
                    all_of.push(beyond(before, "$lt"));
                }
                if !all_of.is_empty() {
                    query.insert("$and", all_of);
                }
                let docs = find_all(
                    &self.events(),
                    query,
                    doc! { "createdAt": -1, "_id": -1 },
                    Some(i64::from(limit)),
                )
                .await?;
                docs.iter().map(event_from_doc).collect()
            })
            .await
    }

    async fn events_after(
        &self,
        scope: Option<&Scope>,
        channel: Option<&str>,
        after: EventPosition,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.guard
            .call("events_after", async {
                let mut query = scope.map(scope_filter).unwrap_or_default();
                if let Some(channel) = channel {
                    query.insert("channelName", channel);
                }
                query.insert("$and", vec![beyond(after, "$gt")]);
                let docs = find_all(
                    &self.events(),
                    query,
                    doc! { "createdAt": 1, "_id": 1 },
                    Some(i64::from(limit)),
                )
                .await?;
                docs.iter().map(event_from_doc).collect()
            })
            .await
    }

    async fn channel_stats(&self, scope: &Scope) -> StoreResult<Vec<ChannelStats>> {
        self.guard
            .call("channel_stats", async {
                let counted: Vec<Document> = self
                    .events()
                    .aggregate([
                        doc! { "$match": scope_filter(scope) },
                        doc! { "$sort": { "createdAt": -1 } },
                        doc! { "$group": {
                            "_id": "$channelName",
                            "count": { "$sum": 1 },
                            "last": { "$first": "$createdAt" },
                        }},
                    ])
                    .await
                    .map_err(classify)?
                    .try_collect()
                    .await
                    .map_err(classify)?;
                let mut stats = BTreeMap::new();
                for d in &counted {
                    let parse = || -> anyhow::Result<ChannelStats> {
                        Ok(ChannelStats {
                            name: d.get_str("_id")?.to_owned(),
                            event_count: count_of(d.get("count"))?,
                            last_event_at: Some(d.get_datetime("last")?.to_chrono()),
                        })
                    };
                    let channel = parse().map_err(|e| corrupt("channel count", e))?;
                    stats.insert(channel.name.clone(), channel);
                }
                // Channels whose every event retention removed are still channels.
                let channels = find_all(
                    &self.channels(),
                    scope_filter(scope),
                    doc! { "name": 1 },
                    None,
                )
                .await?;
                for d in &channels {
                    if let Ok(name) = d.get_str("name") {
                        stats
                            .entry(name.to_owned())
                            .or_insert_with(|| ChannelStats {
                                name: name.to_owned(),
                                event_count: 0,
                                last_event_at: None,
                            });
                    }
                }
                let mut stats: Vec<ChannelStats> = stats.into_values().collect();
                stats.sort_by(|a, b| {
                    (b.last_event_at.is_some(), b.last_event_at)
                        .cmp(&(a.last_event_at.is_some(), a.last_event_at))
                        .then_with(|| a.name.cmp(&b.name))
                });
                Ok(stats)
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
        self.guard
            .call("count_events_per_bucket", async {
                let mut query = scope_filter(scope);
                if let Some(channel) = channel {
                    query.insert("channelName", channel);
                }
                query.insert(
                    "createdAt",
                    doc! { "$gte": date(&since), "$lt": date(&until) },
                );
                // Counted here from the times alone, streamed: grouping by a computed
                // date ($dateTrunc) is what MongoDB would do, but the test server does
                // not evaluate date expressions, and one code path must serve both.
                let mut cursor = self
                    .events()
                    .find(query)
                    .projection(doc! { "createdAt": 1, "_id": 0 })
                    .await
                    .map_err(classify)?;
                let mut counts = BTreeMap::new();
                while let Some(d) = cursor.try_next().await.map_err(classify)? {
                    let at = d
                        .get_datetime("createdAt")
                        .map_err(|e| corrupt("event", e))?
                        .to_chrono();
                    *counts.entry(bucket.floor(at)).or_insert(0) += 1;
                }
                Ok(counts.into_iter().collect())
            })
            .await
    }

    async fn purge_events(
        &self,
        recorded_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Purged> {
        self.guard
            .call("purge_events", async {
                let oldest = find_all(
                    &self.events(),
                    doc! {
                        "createdAt": { "$lt": date(&recorded_before) },
                        "notification": { "$in": state_names(&NotificationState::SETTLED) },
                    },
                    doc! { "createdAt": 1, "_id": 1 },
                    Some(i64::from(limit)),
                )
                .await?;
                let ids: Vec<&str> = oldest
                    .iter()
                    .filter_map(|d| d.get_str("_id").ok())
                    .collect();
                if ids.is_empty() {
                    return Ok(Purged::default());
                }
                let (events, deliveries) = self.purge_with_deliveries(&self.events(), &ids).await?;
                Ok(Purged {
                    events,
                    deliveries,
                    summaries: 0,
                })
            })
            .await
    }
}

/// Events on the `op` (`$lt` or `$gt`) side of `position` in recording order.
fn beyond(position: EventPosition, op: &str) -> Document {
    let at = date(&position.created_at);
    doc! { "$or": [
        { "createdAt": { op: at } },
        { "createdAt": at, "_id": { op: position.id.to_string() } },
    ]}
}

/// `text` as a regular expression matching itself: every character that is
/// not a letter, digit or space is escaped (a backslash before any other
/// character means that character, in PCRE and in every engine like it).
pub(super) fn escape_regex(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if !(c.is_alphanumeric() || c == ' ' || c == '_') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// A `$sum` result: an int32 or int64 depending on the server.
fn count_of(value: Option<&Bson>) -> anyhow::Result<u64> {
    match value {
        Some(Bson::Int32(n)) => Ok(u64::try_from(*n)?),
        Some(Bson::Int64(n)) => Ok(u64::try_from(*n)?),
        Some(Bson::Double(n)) if *n >= 0.0 => Ok(*n as u64),
        other => anyhow::bail!("not a count: {other:?}"),
    }
}

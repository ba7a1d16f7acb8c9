//! Users' counters on MongoDB: what each batch of the group commit adds
//! for the events it stored, and the one-time count of the events stored
//! before counters existed.
//!
//! A batch's counts are one `update` command (one round trip): per user
//! its events name, an upsert that adds their number (`$inc`) and makes
//! the user if it is new, and two conditional sets that widen its first
//! and last seen. A user is its id's document, whatever it is: an event
//! under an alias is counted on the alias's own document, and the batch
//! then asks which of its ids forward (one indexed find) and settles their
//! users (`identities::settle`), which adds those counts to them.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use futures::{StreamExt as _, TryStreamExt as _};
use mongodb::{
    Collection,
    bson::{Bson, Document, doc},
};
use uuid::Uuid;

use super::{
    classify,
    codec::{date, scope_filter},
    identities::{Users, forwarded},
    is_duplicate_key,
};
use crate::store::{Scope, StoreResult};

/// What a batch's events add to one user.
struct Added {
    events: i64,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
}

/// Sums `events` (scope, user id, time) by user.
fn by_user<'a>(
    events: impl IntoIterator<Item = (&'a Scope, &'a str, DateTime<Utc>)>,
) -> HashMap<(Scope, String), Added> {
    let mut added = HashMap::new();
    for (scope, user_id, at) in events {
        add(&mut added, scope, user_id, at);
    }
    added
}

/// Adds one event at `at` to what `user_id` gets.
fn add(
    added: &mut HashMap<(Scope, String), Added>,
    scope: &Scope,
    user_id: &str,
    at: DateTime<Utc>,
) {
    added
        .entry((scope.clone(), user_id.to_owned()))
        .and_modify(|a| {
            a.events += 1;
            a.first = a.first.min(at);
            a.last = a.last.max(at);
        })
        .or_insert(Added {
            events: 1,
            first: at,
            last: at,
        });
}

/// The statements that count `added` for `user_id`: an upsert adding the
/// events (and making the user), then its first and last seen widened.
fn count_statements(scope: &Scope, user_id: &str, added: &Added) -> [Document; 3] {
    let mut key = scope_filter(scope);
    key.insert("userId", user_id);
    let [last, first] = Users::seen_statements(scope, user_id, added.first, added.last);
    [
        doc! {
            "q": key,
            "u": {
                "$inc": { "eventCount": added.events },
                "$setOnInsert": {
                    "properties": {},
                    "aliases": [],
                    "createdAt": date(&added.first),
                    "updatedAt": date(&added.first),
                    "version": 0_i64,
                    "folded": [],
                    "firstSeenAt": date(&added.first),
                    "lastSeenAt": date(&added.last),
                },
            },
            "upsert": true,
        },
        last,
        first,
    ]
}

/// Counts a batch's new events that name a user (scope, user id, time):
/// one `update` command, then one find for the ids that forward. Returns
/// the users those forward to, which the caller settles.
pub(super) async fn count<'a>(
    users: &Users,
    events: impl IntoIterator<Item = (&'a Scope, &'a str, DateTime<Utc>)>,
) -> StoreResult<Vec<(Scope, String)>> {
    let added = by_user(events);
    if added.is_empty() {
        return Ok(Vec::new());
    }
    let statements = added
        .iter()
        .flat_map(|((scope, user_id), a)| count_statements(scope, user_id, a))
        .collect();
    users.update_all(statements).await?;
    let mut ids: HashMap<Scope, HashSet<String>> = HashMap::new();
    for (scope, user_id) in added.into_keys() {
        ids.entry(scope).or_default().insert(user_id);
    }
    forwarded(users, &ids).await
}

/// The record of the one-time count, in the `migrations` collection.
const MIGRATION: &str = "user-counters";
/// Users counted at once while migrating.
const CONCURRENT: usize = 32;

/// Counts, once per database, the events stored before counters existed:
/// their users get their counts, first and last seen, and their aliases
/// their forwarding documents. Events recorded since (by this version)
/// were counted as written: the count takes the events whose id (a
/// UUIDv7, time-ordered) is older than when it began, and it records, per
/// user, that it counted it (`migratedEvents`), so a count interrupted and
/// run again (or run by two replicas at once) counts no user twice. Its
/// cost is one pass over the events with a user, once; it says what it
/// did in the log.
pub(super) async fn migrate(
    users: &Users,
    events: &Collection<Document>,
    migrations: &Collection<Document>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let marker = doc! { "_id": MIGRATION };
    let cutoff = match migrations
        .find_one(marker.clone())
        .await
        .map_err(classify)?
    {
        Some(done) if done.get_bool("done").unwrap_or(false) => return Ok(()),
        Some(started) => started.get_str("cutoff").map(str::to_owned).ok(),
        None => None,
    };
    let cutoff = match cutoff {
        Some(cutoff) => cutoff,
        None => {
            let cutoff = Uuid::now_v7().to_string();
            let record = doc! { "_id": MIGRATION, "cutoff": &cutoff, "startedAt": date(&now) };
            match migrations.insert_one(record).await {
                Ok(_) => cutoff,
                // Another process began it: its cutoff is the one.
                Err(e) if is_duplicate_key(&e) => migrations
                    .find_one(marker.clone())
                    .await
                    .map_err(classify)?
                    .and_then(|m| m.get_str("cutoff").ok().map(str::to_owned))
                    .unwrap_or(cutoff),
                Err(e) => return Err(classify(e)),
            }
        }
    };
    let started = std::time::Instant::now();
    let identified = seen_as_identified(users).await?;
    let aliases = forward_old_aliases(users, now).await?;
    let (counted, events_counted) = count_old_events(users, events, &cutoff).await?;
    migrations
        .update_one(
            marker,
            doc! { "$set": { "done": true, "users": counted as i64, "events": events_counted } },
        )
        .await
        .map_err(classify)?;
    tracing::info!(
        identified,
        aliases,
        users = counted,
        events = events_counted,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "user counters: counted the events stored before them"
    );
    Ok(())
}

/// Gives the users identified before counters existed their first and
/// last seen: their identify calls'. Returns how many.
async fn seen_as_identified(users: &Users) -> StoreResult<u64> {
    let mut old = users
        .users
        .find(doc! { "lastSeenAt": { "$exists": false }, "mergedInto": { "$exists": false } })
        .projection(doc! { "createdAt": 1, "updatedAt": 1 })
        .await
        .map_err(classify)?;
    let mut n = 0;
    while let Some(d) = old.try_next().await.map_err(classify)? {
        let (Some(id), Ok(created), Ok(updated)) = (
            d.get("_id").cloned(),
            d.get_datetime("createdAt"),
            d.get_datetime("updatedAt"),
        ) else {
            continue;
        };
        users
            .users
            .update_one(
                doc! { "_id": id, "lastSeenAt": { "$exists": false } },
                doc! { "$set": { "firstSeenAt": created, "lastSeenAt": updated } },
            )
            .await
            .map_err(classify)?;
        n += 1;
    }
    Ok(n)
}

/// Gives each alias of a user identified before counters existed its
/// forwarding document: the first user (by creation) that listed it
/// keeps it, and an alias that is another user's own id stays that user.
/// Returns how many were made.
async fn forward_old_aliases(users: &Users, now: DateTime<Utc>) -> StoreResult<u64> {
    let mut listed = users
        .users
        .find(doc! { "mergedInto": { "$exists": false } })
        .sort(doc! { "createdAt": 1, "userId": 1 })
        .projection(doc! { "org": 1, "project": 1, "userId": 1, "aliases": 1 })
        .await
        .map_err(classify)?;
    let mut n = 0;
    while let Some(d) = listed.try_next().await.map_err(classify)? {
        let (Ok(org), Ok(project), Ok(user_id), Ok(aliases)) = (
            d.get_str("org"),
            d.get_str("project"),
            d.get_str("userId"),
            d.get_array("aliases"),
        ) else {
            continue;
        };
        let scope = Scope::new(org, project);
        for alias in aliases.iter().filter_map(Bson::as_str) {
            if alias != user_id && users.forward(&scope, alias, user_id, now).await? {
                n += 1;
            }
        }
    }
    Ok(n)
}

/// Counts the events with a user whose id is older than `cutoff`, per
/// user they name (through the forwarding documents), each user once:
/// one pass over those events, read in id order with only the fields it
/// needs (the test server's `$group` cannot key on several fields), and a
/// sum per user in memory. Returns how many users and events were counted.
async fn count_old_events(
    users: &Users,
    events: &Collection<Document>,
    cutoff: &str,
) -> StoreResult<(u64, i64)> {
    let mut old = events
        .find(doc! { "userId": { "$type": "string" }, "_id": { "$lt": cutoff } })
        .projection(doc! { "org": 1, "project": 1, "userId": 1, "createdAt": 1 })
        .await
        .map_err(classify)?;
    let mut by_raw: HashMap<(Scope, String), Added> = HashMap::new();
    let mut total = 0;
    while let Some(e) = old.try_next().await.map_err(classify)? {
        if let (Ok(org), Ok(project), Ok(user_id), Ok(at)) = (
            e.get_str("org"),
            e.get_str("project"),
            e.get_str("userId"),
            e.get_datetime("createdAt"),
        ) {
            total += 1;
            add(
                &mut by_raw,
                &Scope::new(org, project),
                user_id,
                at.to_chrono(),
            );
        }
    }
    // Each raw id to the user it names: its forwarding document's, or itself.
    let owners: Vec<((Scope, String), String)> = futures::stream::iter(by_raw.keys().cloned())
        .map(|(scope, raw)| async move {
            let owner = users.resolve(&scope, &raw).await?;
            let owner = owner.map_or_else(|| raw.clone(), |u| u.identity.user_id);
            StoreResult::Ok(((scope, raw), owner))
        })
        .buffer_unordered(CONCURRENT)
        .try_collect()
        .await?;
    let owners: HashMap<(Scope, String), String> = owners.into_iter().collect();
    let mut named: HashMap<(Scope, String), Added> = HashMap::new();
    for (key, added) in by_raw {
        let owner = owners.get(&key).cloned().unwrap_or_else(|| key.1.clone());
        named
            .entry((key.0, owner))
            .and_modify(|a| {
                a.events += added.events;
                a.first = a.first.min(added.first);
                a.last = a.last.max(added.last);
            })
            .or_insert(added);
    }
    let counted = named.len() as u64;
    futures::stream::iter(named)
        .map(|((scope, user_id), added)| async move {
            count_once(users, &scope, &user_id, &added).await
        })
        .buffer_unordered(CONCURRENT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok((counted, total))
}

/// Adds `added` to the user unless a count already did
/// (`migratedEvents`), then widens its seen times (idempotent).
async fn count_once(users: &Users, scope: &Scope, user_id: &str, added: &Added) -> StoreResult<()> {
    let mut guard = scope_filter(scope);
    guard.insert("userId", user_id);
    guard.insert("migratedEvents", doc! { "$exists": false });
    let counted = users
        .users
        .update_one(
            guard,
            doc! {
                "$inc": { "eventCount": added.events },
                "$set": { "migratedEvents": added.events },
                "$setOnInsert": {
                    "properties": {},
                    "aliases": [],
                    "createdAt": date(&added.first),
                    "updatedAt": date(&added.first),
                    "version": 0_i64,
                    "folded": [],
                    "firstSeenAt": date(&added.first),
                    "lastSeenAt": date(&added.last),
                },
            },
        )
        .upsert(true)
        .await;
    match counted {
        Ok(_) => {}
        // Counted already: its document carries `migratedEvents`.
        Err(e) if is_duplicate_key(&e) => return Ok(()),
        Err(e) => return Err(classify(e)),
    }
    users
        .update_all(Users::seen_statements(scope, user_id, added.first, added.last).to_vec())
        .await
}

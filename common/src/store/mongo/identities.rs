//! Users on MongoDB (the rules are `store::user`'s), in the `identities`
//! collection, with single-document atomicity only.
//!
//! A user is a document keyed by (scope, `userId`). Its counters are
//! written with `$inc` and conditional sets by the group commit of its
//! events (`user_counts`), never overwritten: identify writes the other
//! fields under a version check. An alias is a document of its own that
//! forwards to its user (`mergedInto`): its key is unique, so one alias
//! names one user, and a look-up by it is one indexed read (two, with the
//! user's). A user merged into another becomes such a forwarder too,
//! keeping its counters.
//!
//! Merging has no transaction to hide in, so it is a state that converges:
//! marking a document as forwarding is one atomic write, and **settling** a
//! user ([`settle`]) brings it in line with its forwarders, idempotently:
//! each alias of its list forwards to it (absent ones are made, users they
//! named are marked), forwarders of its forwarders are pointed at it, and
//! what each forwarder counted since it was last settled is added (the
//! user keeps, per forwarder, how much of it its count already holds).
//! Identify settles before it answers; an event recorded under a forwarder
//! (an alias, or a race with the merge) is counted there first and its
//! batch settles the user before answering. A crash in between leaves a
//! user whose next settling (its next identify, or its next aliased event)
//! finishes the merge.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::TryStreamExt as _;
use mongodb::{
    Collection, Database,
    bson::{self, Bson, Document, doc},
};
use serde_json::{Map, Value};

use super::{
    IDENTITIES, MAX_ATTEMPTS, MongoStore, classify,
    codec::{UserDoc, date, scope_filter, user_fields, user_from_doc, user_to_doc},
    find_all,
    history::escape_regex,
    is_duplicate_key,
};
use crate::store::{
    Identity, IdentityStore, PropertyMatch, Scope, StoreError, StoreResult, UserFilter,
    UserPosition, model::merge_identity_fields,
};

/// Forwarders followed to a user before a look-up gives up: a chain
/// longer than one exists only while a merge is being settled.
const MAX_HOPS: usize = 8;
/// Users read per round when a property filter is matched here (a key
/// MongoDB cannot name in a query: with a '.', a leading '$' or a NUL).
const SCAN_CHUNK: i64 = 200;

/// The users' collection and the database its multi-statement updates go
/// through (`update` commands: one round trip for many upserts).
#[derive(Clone)]
pub(super) struct Users {
    db: Database,
    pub(super) users: Collection<Document>,
}

impl Users {
    pub(super) fn new(db: &Database) -> Self {
        Self {
            db: db.clone(),
            users: db.collection(IDENTITIES),
        }
    }

    /// Runs `statements` (each `{ q, u, upsert }`) as one `update` command,
    /// in order, with the database's write concern.
    pub(super) async fn update_all(&self, statements: Vec<Document>) -> StoreResult<()> {
        if statements.is_empty() {
            return Ok(());
        }
        let mut command = doc! {
            "update": self.users.name(),
            "updates": statements,
            "ordered": true,
        };
        if let Some(concern) = self.db.write_concern() {
            let concern = bson::to_document(concern)
                .map_err(|e| StoreError::Backend(anyhow::Error::new(e)))?;
            command.insert("writeConcern", concern);
        }
        let reply = self.db.run_command(command).await.map_err(classify)?;
        if let Ok(errors) = reply.get_array("writeErrors")
            && !errors.is_empty()
        {
            return Err(StoreError::Backend(anyhow::anyhow!(
                "user counters not written: {errors:?}"
            )));
        }
        if let Ok(concern) = reply.get_document("writeConcernError") {
            return Err(StoreError::unavailable(format!(
                "user counters not confirmed: {concern}"
            )));
        }
        Ok(())
    }

    fn key(scope: &Scope, user_id: &str) -> Document {
        let mut key = scope_filter(scope);
        key.insert("userId", user_id);
        key
    }

    async fn own(&self, scope: &Scope, user_id: &str) -> StoreResult<Option<UserDoc>> {
        self.users
            .find_one(Self::key(scope, user_id))
            .await
            .map_err(classify)?
            .as_ref()
            .map(user_from_doc)
            .transpose()
    }

    /// The user `user_id` names: its own document, or the one its
    /// forwarders lead to.
    pub(super) async fn resolve(
        &self,
        scope: &Scope,
        user_id: &str,
    ) -> StoreResult<Option<UserDoc>> {
        let mut id = user_id.to_owned();
        for _ in 0..MAX_HOPS {
            let Some(user) = self.own(scope, &id).await? else {
                return Ok(None);
            };
            match user.merged_into.clone() {
                Some(next) => id = next,
                None => return Ok(Some(user)),
            }
        }
        Err(StoreError::unavailable(format!(
            "user {user_id} is being merged; try again"
        )))
    }

    /// The documents forwarding to `user_id`.
    async fn forwarders(&self, scope: &Scope, user_id: &str) -> StoreResult<Vec<UserDoc>> {
        let mut filter = scope_filter(scope);
        filter.insert("mergedInto", user_id);
        find_all(&self.users, filter, doc! { "userId": 1 }, None)
            .await?
            .iter()
            .map(user_from_doc)
            .collect()
    }

    /// The ids a user's events are recorded under: the user `user_id`
    /// names, then its forwarders (its aliases). Empty when it names nobody.
    pub(super) async fn event_user_ids(
        &self,
        scope: &Scope,
        user_id: &str,
    ) -> StoreResult<Vec<String>> {
        let Some(user) = self.resolve(scope, user_id).await? else {
            return Ok(Vec::new());
        };
        let owner = user.identity.user_id;
        let mut ids: Vec<String> = self
            .forwarders(scope, &owner)
            .await?
            .into_iter()
            .map(|f| f.identity.user_id)
            .collect();
        ids.insert(0, owner);
        Ok(ids)
    }

    /// Statements widening `user_id`'s first and last seen to `first` and
    /// `last` (conditional sets: the servers this runs on need not have
    /// `$min` and `$max`).
    pub(super) fn seen_statements(
        scope: &Scope,
        user_id: &str,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
    ) -> [Document; 2] {
        let widen = |field: &str, op: &str, at: DateTime<Utc>| {
            let mut q = Self::key(scope, user_id);
            q.insert(
                "$or",
                vec![
                    doc! { field: { op: date(&at) } },
                    doc! { field: { "$exists": false } },
                ],
            );
            doc! { "q": q, "u": { "$set": { field: date(&at) } } }
        };
        [
            widen("lastSeenAt", "$lt", last),
            widen("firstSeenAt", "$gt", first),
        ]
    }

    /// Marks the live user `user_id` as merged into `into`; false when it
    /// is not a live user (any more).
    async fn mark(&self, scope: &Scope, user_id: &str, into: &str) -> StoreResult<bool> {
        let mut filter = Self::key(scope, user_id);
        filter.insert("mergedInto", doc! { "$exists": false });
        let marked = self
            .users
            .update_one(filter, doc! { "$set": { "mergedInto": into } })
            .await
            .map_err(classify)?;
        Ok(marked.modified_count == 1)
    }

    /// Makes `alias`, which has no document, forward to `into`. False when
    /// it has one (it appeared meanwhile).
    pub(super) async fn forward(
        &self,
        scope: &Scope,
        alias: &str,
        into: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut forwarder = Self::key(scope, alias);
        forwarder.extend(doc! {
            "mergedInto": into,
            "properties": {},
            "aliases": [],
            "createdAt": date(&now),
            "updatedAt": date(&now),
            "version": 0_i64,
            "eventCount": 0_i64,
        });
        match self.users.insert_one(forwarder).await {
            Ok(_) => Ok(true),
            Err(e) if is_duplicate_key(&e) => Ok(false),
            Err(e) => Err(classify(e)),
        }
    }
}

/// Brings the live user `user_id` in line with its aliases and forwarders
/// (the module's doc says how); nothing when it is not a live user.
pub(super) async fn settle(
    users: &Users,
    scope: &Scope,
    user_id: &str,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    for _ in 0..MAX_ATTEMPTS {
        let Some(user) = users.own(scope, user_id).await? else {
            return Ok(());
        };
        if user.merged_into.is_some() {
            // Merged away meanwhile: its new user settles it.
            return Ok(());
        }
        if !claim_aliases(users, scope, &user, now).await? {
            continue;
        }
        let forwarders = gather_forwarders(users, scope, user_id).await?;
        if fold(users, scope, user, &forwarders).await? {
            return Ok(());
        }
    }
    Err(StoreError::unavailable(format!(
        "user {user_id} is being updated too often; try again"
    )))
}

/// Makes each alias of `user` forward to it: an alias without a document
/// gets one; a live user an alias names (its own id, or one of its
/// aliases) is marked as merged into `user`. False when the documents
/// changed under it (settling starts over).
async fn claim_aliases(
    users: &Users,
    scope: &Scope,
    user: &UserDoc,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let own = &user.identity.user_id;
    let aliases: Vec<&String> = user.identity.aliases.iter().filter(|a| *a != own).collect();
    if aliases.is_empty() {
        return Ok(true);
    }
    let mut filter = scope_filter(scope);
    filter.insert("userId", doc! { "$in": aliases.clone() });
    let found: HashMap<String, UserDoc> =
        find_all(&users.users, filter, doc! { "userId": 1 }, None)
            .await?
            .iter()
            .map(|d| user_from_doc(d).map(|u| (u.identity.user_id.clone(), u)))
            .collect::<StoreResult<_>>()?;
    for alias in aliases {
        match found.get(alias.as_str()) {
            None => {
                if !users.forward(scope, alias, own, now).await? {
                    return Ok(false);
                }
            }
            Some(doc) if doc.merged_into.as_ref() == Some(own) => {}
            Some(doc) => {
                // It names another user: the same person, merged in.
                let named = match &doc.merged_into {
                    None => Some(doc.identity.user_id.clone()),
                    Some(_) => users
                        .resolve(scope, alias)
                        .await?
                        .map(|u| u.identity.user_id),
                };
                if let Some(named) = named.filter(|n| n != own)
                    && !users.mark(scope, &named, own).await?
                {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Points the forwarders of `user_id`'s forwarders (a merged user's
/// aliases) at it, until there are none, and returns its forwarders.
async fn gather_forwarders(
    users: &Users,
    scope: &Scope,
    user_id: &str,
) -> StoreResult<Vec<UserDoc>> {
    for _ in 0..MAX_HOPS {
        let forwarders = users.forwarders(scope, user_id).await?;
        if forwarders.is_empty() {
            return Ok(forwarders);
        }
        let ids: Vec<&str> = forwarders
            .iter()
            .map(|f| f.identity.user_id.as_str())
            .collect();
        let mut filter = scope_filter(scope);
        filter.insert("mergedInto", doc! { "$in": ids });
        let moved = users
            .users
            .update_many(filter, doc! { "$set": { "mergedInto": user_id } })
            .await
            .map_err(classify)?;
        if moved.modified_count == 0 {
            return Ok(forwarders);
        }
    }
    Err(StoreError::unavailable(format!(
        "user {user_id} is being merged; try again"
    )))
}

/// Adds to `user` what each forwarder counted since it was last folded,
/// and joins the aliases and properties of those folded for the first
/// time: one write under the user's version, counters by `$inc`. False
/// when another write of the user came first (settling starts over).
async fn fold(
    users: &Users,
    scope: &Scope,
    user: UserDoc,
    forwarders: &[UserDoc],
) -> StoreResult<bool> {
    let user_id = user.identity.user_id.clone();
    let mut next = user.clone();
    let mut folded: HashMap<String, u64> = user.folded.iter().cloned().collect();
    let new: Vec<&UserDoc> = forwarders
        .iter()
        .filter(|f| !folded.contains_key(&f.identity.user_id))
        .collect();
    // A merged user brings what its own count already holds of the
    // forwarders it had, which forward here now.
    for f in &new {
        for (id, n) in &f.folded {
            folded.entry(id.clone()).or_insert(*n);
        }
        next.identity.join(&f.identity);
    }
    let mut added: i64 = 0;
    let mut seen: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
    for f in forwarders {
        let count = f.identity.event_count;
        let before = folded
            .insert(f.identity.user_id.clone(), count)
            .unwrap_or(0);
        added += i64::try_from(count).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(0);
        if f.seen {
            let (first, last) = (f.identity.first_seen_at, f.identity.last_seen_at);
            seen = Some(seen.map_or((first, last), |(a, b)| (a.min(first), b.max(last))));
        }
    }
    let mut folded: Vec<(String, u64)> = folded.into_iter().collect();
    folded.sort();
    let mut before = user.folded.clone();
    before.sort();
    if added != 0 || folded != before || next.identity != user.identity {
        next.folded = folded;
        next.version = user.version + 1;
        let mut guard = Users::key(scope, &user_id);
        guard.insert("version", user.version);
        guard.insert("mergedInto", doc! { "$exists": false });
        let written = users
            .users
            .update_one(
                guard,
                doc! { "$set": user_fields(&next), "$inc": { "eventCount": added } },
            )
            .await
            .map_err(classify)?;
        if written.matched_count != 1 {
            return Ok(false);
        }
    }
    if let Some((first, last)) = seen {
        users
            .update_all(Users::seen_statements(scope, &user_id, first, last).to_vec())
            .await?;
    }
    Ok(true)
}

#[async_trait]
impl IdentityStore for MongoStore {
    /// Writes the user's fields under a version check (an event's count in
    /// between is never overwritten: counters are not among them), counts
    /// it as seen, then settles it, which merges whoever its aliases named.
    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity> {
        self.guard
            .call("merge_identity", async {
                let users = Users::new(&self.db);
                for _ in 0..MAX_ATTEMPTS {
                    let existing = users.resolve(scope, user_id).await?;
                    let fresh = existing.is_none();
                    let mut user = existing.unwrap_or_else(|| UserDoc {
                        identity: Identity {
                            user_id: user_id.to_owned(),
                            properties: Map::new(),
                            aliases: Vec::new(),
                            created_at: now,
                            updated_at: now,
                            first_seen_at: now,
                            last_seen_at: now,
                            event_count: 0,
                        },
                        version: 0,
                        merged_into: None,
                        folded: Vec::new(),
                        seen: true,
                    });
                    let version = user.version;
                    merge_identity_fields(
                        &mut user.identity.properties,
                        &mut user.identity.aliases,
                        properties.clone(),
                        aliases.clone(),
                    );
                    user.identity.updated_at = now;
                    user.version = version + 1;
                    let target = user.identity.user_id.clone();
                    let written = if fresh {
                        match users.users.insert_one(user_to_doc(scope, &user)).await {
                            Ok(_) => true,
                            Err(e) if is_duplicate_key(&e) => false,
                            Err(e) => return Err(classify(e)),
                        }
                    } else {
                        let mut guard = Users::key(scope, &target);
                        guard.insert("version", version);
                        guard.insert("mergedInto", doc! { "$exists": false });
                        users
                            .users
                            .update_one(guard, doc! { "$set": user_fields(&user) })
                            .await
                            .map_err(classify)?
                            .matched_count
                            == 1
                    };
                    if !written {
                        continue;
                    }
                    users
                        .update_all(Users::seen_statements(scope, &target, now, now).to_vec())
                        .await?;
                    settle(&users, scope, &target, now).await?;
                    return users
                        .resolve(scope, &target)
                        .await?
                        .map(|u| u.identity)
                        .ok_or_else(|| {
                            StoreError::unavailable(format!(
                                "user {target} is being merged; try again"
                            ))
                        });
                }
                Err(StoreError::unavailable(format!(
                    "identity {user_id} is being updated too often; try again"
                )))
            })
            .await
    }

    async fn get_identity(&self, scope: &Scope, user_id: &str) -> StoreResult<Option<Identity>> {
        self.guard
            .call("get_identity", async {
                Ok(Users::new(&self.db)
                    .resolve(scope, user_id)
                    .await?
                    .map(|u| u.identity))
            })
            .await
    }

    async fn list_users(
        &self,
        scope: &Scope,
        filter: &UserFilter,
        after: Option<UserPosition>,
        limit: u32,
    ) -> StoreResult<Vec<Identity>> {
        self.guard
            .call("list_users", async {
                let mut query = scope_filter(scope);
                query.insert("mergedInto", doc! { "$exists": false });
                let mut all_of = Vec::new();
                if let Some(text) = &filter.text {
                    let pattern = doc! { "$regex": escape_regex(text), "$options": "i" };
                    all_of.push(doc! { "$or": [
                        { "userId": pattern.clone() },
                        { "aliases": pattern },
                    ]});
                }
                // A key MongoDB can name in a query is matched there; any
                // other is matched here, on the users read.
                let here = match &filter.property {
                    Some(p) if addressable(&p.key) => {
                        query.insert(
                            format!("properties.{}", p.key),
                            doc! { "$in": candidates(p) },
                        );
                        None
                    }
                    other => other.clone(),
                };
                let users = Users::new(&self.db);
                let mut found = Vec::new();
                let mut from = after;
                loop {
                    let mut round = query.clone();
                    let mut conditions = all_of.clone();
                    if let Some(from) = &from {
                        conditions.push(after_position(from));
                    }
                    if !conditions.is_empty() {
                        round.insert("$and", conditions);
                    }
                    let chunk = if here.is_some() {
                        SCAN_CHUNK
                    } else {
                        i64::from(limit)
                    };
                    let docs = find_all(
                        &users.users,
                        round,
                        doc! { "lastSeenAt": -1, "userId": -1 },
                        Some(chunk),
                    )
                    .await?;
                    let read = docs.len() as i64;
                    for d in &docs {
                        let user = user_from_doc(d)?.identity;
                        from = Some(user.position());
                        if here.as_ref().is_none_or(|p| p.matches(&user.properties)) {
                            found.push(user);
                        }
                    }
                    if here.is_none() || read < chunk || found.len() >= limit as usize {
                        break;
                    }
                }
                found.truncate(limit as usize);
                Ok(found)
            })
            .await
    }
}

/// Whether MongoDB can name the property `key` in a query path.
fn addressable(key: &str) -> bool {
    !key.is_empty() && !key.contains(['.', '\0', '\u{FFFF}']) && !key.starts_with('$')
}

/// The stored values a property filter matches: the text, and the number
/// or boolean it writes (a whole number both as an integer and a double:
/// servers need not compare the two).
fn candidates(p: &PropertyMatch) -> Vec<Bson> {
    let mut values = vec![Bson::String(p.value.clone())];
    if let Some(n) = p.number() {
        values.push(Bson::Double(n));
        if n.fract() == 0.0 && n.abs() < 9.0e15 {
            values.push(Bson::Int64(n as i64));
        }
    }
    if let Some(b) = p.boolean() {
        values.push(Bson::Boolean(b));
    }
    values
}

/// The users listed after `p`, most recently seen first.
fn after_position(p: &UserPosition) -> Document {
    let at = date(&p.last_seen_at);
    doc! { "$or": [
        { "lastSeenAt": { "$lt": at } },
        { "lastSeenAt": at, "userId": { "$lt": &p.user_id } },
    ]}
}

/// The ids of `forwarders` among `ids` of each scope, with the user each
/// forwards to: the users a batch's events under aliases must settle.
pub(super) async fn forwarded(
    users: &Users,
    ids: &HashMap<Scope, HashSet<String>>,
) -> StoreResult<Vec<(Scope, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let any_of: Vec<Document> = ids
        .iter()
        .map(|(scope, ids)| {
            let mut q = scope_filter(scope);
            q.insert("userId", doc! { "$in": ids.iter().collect::<Vec<_>>() });
            q.insert("mergedInto", doc! { "$exists": true });
            q
        })
        .collect();
    let mut found = users
        .users
        .find(doc! { "$or": any_of })
        .projection(doc! { "org": 1, "project": 1, "mergedInto": 1 })
        .await
        .map_err(classify)?;
    let mut owners = HashSet::new();
    while let Some(d) = found.try_next().await.map_err(classify)? {
        if let (Ok(org), Ok(project), Ok(into)) = (
            d.get_str("org"),
            d.get_str("project"),
            d.get_str("mergedInto"),
        ) {
            owners.insert((Scope::new(org, project), into.to_owned()));
        }
    }
    Ok(owners.into_iter().collect())
}

//! Insights: one document each under a unique (scope, title), with single-
//! document atomicity and no transaction. An increment is one
//! `findAndModify` with `$inc`, conditional on the value being a number
//! with room for the increment (`InsightNumber::room_for`), so concurrent
//! increments from any number of processes each apply exactly once. When
//! that condition fails, the document is read to say why: absent (it is
//! created, under the unique index, and a lost race tries again), not a
//! number, or out of range (refused, nothing written).
//!
//! A deletion marks the document deleted rather than removing it, so
//! streams following changes by `updatedAt` see it; such documents are
//! removed once older than `insight::DELETION_KEPT`, by the next deletion
//! in the project. The per-project limit is counted before a creation:
//! two creations racing for a project's last place may both succeed
//! (there is no transaction to count and insert in).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mongodb::{
    bson::{Bson, Document, doc},
    options::ReturnDocument,
};

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{corrupt, date, scope_filter},
    find_all, is_duplicate_key,
};
use crate::store::{
    Insight, InsightChange, InsightNumber, InsightRefusal, InsightStore, InsightValue, Scope,
    StoreError, StoreResult,
    insight::{DELETION_KEPT, MAX_INSIGHTS},
};

/// What a set or an increment answers.
type Written = Result<(Insight, bool), InsightRefusal>;

/// The `kind` field increments are conditional on.
const NUMBER: &str = "number";

fn number_bson(n: InsightNumber) -> Bson {
    match n {
        InsightNumber::Integer(i) => Bson::Int64(i),
        InsightNumber::Float(f) => Bson::Double(f),
    }
}

/// A value as stored, and its kind.
fn value_bson(value: &InsightValue) -> (Bson, &'static str) {
    match value {
        InsightValue::Text(text) => (Bson::String(text.clone()), "string"),
        InsightValue::Number(n) => (number_bson(*n), NUMBER),
        InsightValue::Flag(flag) => (Bson::Boolean(*flag), "boolean"),
    }
}

fn value_from_bson(value: &Bson) -> anyhow::Result<InsightValue> {
    Ok(match value {
        Bson::String(text) => InsightValue::Text(text.clone()),
        Bson::Boolean(flag) => InsightValue::Flag(*flag),
        Bson::Int64(i) => InsightValue::Number(InsightNumber::Integer(*i)),
        Bson::Int32(i) => InsightValue::Number(InsightNumber::Integer(i64::from(*i))),
        Bson::Double(f) => InsightValue::Number(InsightNumber::Float(*f)),
        other => anyhow::bail!("a value of type {:?}", other.element_type()),
    })
}

/// A stored document as a change: the insight, or `None` if deleted.
fn change_from_doc(d: &Document) -> StoreResult<InsightChange> {
    let parse = || -> anyhow::Result<InsightChange> {
        let title = d.get_str("title")?.to_owned();
        let updated_at = d.get_datetime("updatedAt")?.to_chrono();
        let insight = if d.get_bool("deleted")? {
            None
        } else {
            Some(Insight {
                title: title.clone(),
                value: value_from_bson(d.get("value").unwrap_or(&Bson::Null))?,
                icon: d.get_str("icon").ok().map(str::to_owned),
                created_at: d.get_datetime("createdAt")?.to_chrono(),
                updated_at,
            })
        };
        Ok(InsightChange {
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            title,
            version: d.get_i64("version")?,
            changed_at: updated_at,
            insight,
        })
    };
    parse().map_err(|e| corrupt("insight", e))
}

/// The fields of `insight` a creation writes, over any deleted one.
fn fields(insight: &Insight) -> Document {
    let (value, kind) = value_bson(&insight.value);
    doc! {
        "value": value,
        "kind": kind,
        "icon": insight.icon.as_deref().map_or(Bson::Null, |i| Bson::String(i.to_owned())),
        "deleted": false,
        "createdAt": date(&insight.created_at),
        "updatedAt": date(&insight.updated_at),
    }
}

/// What a set or an increment also sets: the time, and the icon if given.
fn touched(icon: Option<&str>, now: DateTime<Utc>) -> Document {
    let mut set = doc! { "updatedAt": date(&now) };
    if let Some(icon) = icon {
        set.insert("icon", icon);
    }
    set
}

impl MongoStore {
    fn insight_filter(scope: &Scope, title: &str) -> Document {
        let mut filter = scope_filter(scope);
        filter.insert("title", title);
        filter
    }

    /// Creates `insight`, or brings back a deleted one by its title, unless
    /// the scope is full. `None`: another writer got there first (a live
    /// insight by that title exists now), and the caller starts again.
    async fn create_insight(
        &self,
        scope: &Scope,
        insight: Insight,
    ) -> StoreResult<Option<Written>> {
        let mut live = scope_filter(scope);
        live.insert("deleted", false);
        let count = self
            .insights()
            .count_documents(live)
            .await
            .map_err(classify)?;
        if usize::try_from(count).unwrap_or(usize::MAX) >= MAX_INSIGHTS {
            return Ok(Some(Err(InsightRefusal::Full)));
        }
        let key = Self::insight_filter(scope, &insight.title);
        let stored = self
            .insights()
            .find_one(key.clone())
            .await
            .map_err(classify)?;
        let written = match stored {
            None => {
                let mut document = key;
                document.extend(fields(&insight));
                document.insert("version", 1_i64);
                self.insights().insert_one(document).await.map(|_| true)
            }
            Some(d) if d.get_bool("deleted").unwrap_or(false) => {
                // Over the deletion read, and only it: its version moves on.
                let mut deleted = key;
                deleted.insert("deleted", true);
                deleted.insert("version", d.get_i64("version").unwrap_or_default());
                self.insights()
                    .update_one(
                        deleted,
                        doc! { "$set": fields(&insight), "$inc": { "version": 1_i64 } },
                    )
                    .await
                    .map(|r| r.matched_count == 1)
            }
            Some(_) => Ok(false),
        };
        match written {
            Ok(true) => Ok(Some(Ok((insight, true)))),
            Ok(false) => Ok(None),
            Err(e) if is_duplicate_key(&e) => Ok(None),
            Err(e) => Err(classify(e)),
        }
    }

    /// `update` on the scope's live insight by that title, answering it as
    /// it stands afterwards; `None` when no live insight matches `filter`.
    async fn update_insight(
        &self,
        filter: Document,
        update: Document,
    ) -> StoreResult<Option<Insight>> {
        let updated = self
            .insights()
            .find_one_and_update(filter, update)
            .return_document(ReturnDocument::After)
            .await
            .map_err(classify)?;
        Ok(updated
            .as_ref()
            .map(change_from_doc)
            .transpose()?
            .and_then(|change| change.insight))
    }
}

fn contended(title: &str) -> StoreError {
    StoreError::unavailable(format!(
        "insight {title:?} is being created and deleted too often; try again"
    ))
}

#[async_trait]
impl InsightStore for MongoStore {
    async fn list_insights(&self, scope: &Scope) -> StoreResult<Vec<Insight>> {
        self.guard
            .call("list_insights", async {
                let mut filter = scope_filter(scope);
                filter.insert("deleted", false);
                let found = find_all(
                    &self.insights(),
                    filter,
                    doc! { "createdAt": 1, "title": 1 },
                    None,
                )
                .await?;
                let mut insights = Vec::with_capacity(found.len());
                for d in &found {
                    insights.extend(change_from_doc(d)?.insight);
                }
                Ok(insights)
            })
            .await
    }

    async fn set_insight(
        &self,
        scope: &Scope,
        title: &str,
        value: &InsightValue,
        icon: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Written> {
        self.guard
            .call("set_insight", async {
                let (stored, kind) = value_bson(value);
                let mut set = touched(icon, now);
                set.insert("value", stored);
                set.insert("kind", kind);
                for _ in 0..MAX_ATTEMPTS {
                    let mut live = Self::insight_filter(scope, title);
                    live.insert("deleted", false);
                    let update = doc! { "$set": set.clone(), "$inc": { "version": 1_i64 } };
                    if let Some(insight) = self.update_insight(live, update).await? {
                        return Ok(Ok((insight, false)));
                    }
                    let new = Insight::new(title, value.clone(), icon, now);
                    if let Some(written) = self.create_insight(scope, new).await? {
                        return Ok(written);
                    }
                }
                Err(contended(title))
            })
            .await
    }

    async fn increment_insight(
        &self,
        scope: &Scope,
        title: &str,
        by: InsightNumber,
        icon: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Written> {
        self.guard
            .call("increment_insight", async {
                let (lowest, highest) = InsightNumber::room_for(by);
                for _ in 0..MAX_ATTEMPTS {
                    let mut room = Self::insight_filter(scope, title);
                    room.insert("deleted", false);
                    room.insert("kind", NUMBER);
                    room.insert(
                        "value",
                        doc! { "$gte": number_bson(lowest), "$lte": number_bson(highest) },
                    );
                    let update = doc! {
                        "$inc": { "value": number_bson(by), "version": 1_i64 },
                        "$set": touched(icon, now),
                    };
                    if let Some(insight) = self.update_insight(room, update).await? {
                        return Ok(Ok((insight, false)));
                    }
                    // Why not: read what is there.
                    let stored = self
                        .insights()
                        .find_one(Self::insight_filter(scope, title))
                        .await
                        .map_err(classify)?;
                    let live = stored
                        .as_ref()
                        .map(change_from_doc)
                        .transpose()?
                        .and_then(|change| change.insight);
                    if let Some(mut insight) = live {
                        // The rule refuses it, or it changed in between.
                        if let Err(refused) = insight.increment(by, icon, now) {
                            return Ok(Err(refused));
                        }
                        continue;
                    }
                    let new = Insight::new(title, InsightValue::Number(by), icon, now);
                    if let Some(written) = self.create_insight(scope, new).await? {
                        return Ok(written);
                    }
                }
                Err(contended(title))
            })
            .await
    }

    async fn delete_insight(
        &self,
        scope: &Scope,
        title: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.guard
            .call("delete_insight", async {
                let forgotten = now - chrono::Duration::from_std(DELETION_KEPT).unwrap_or_default();
                let mut old = scope_filter(scope);
                old.insert("deleted", true);
                old.insert("updatedAt", doc! { "$lt": date(&forgotten) });
                self.insights().delete_many(old).await.map_err(classify)?;
                let mut live = Self::insight_filter(scope, title);
                live.insert("deleted", false);
                let deleted = self
                    .insights()
                    .update_one(
                        live,
                        doc! {
                            "$set": {
                                "deleted": true,
                                "value": Bson::Null,
                                "kind": Bson::Null,
                                "updatedAt": date(&now),
                            },
                            "$inc": { "version": 1_i64 },
                        },
                    )
                    .await
                    .map_err(classify)?;
                Ok(deleted.matched_count == 1)
            })
            .await
    }

    async fn insights_changed(
        &self,
        since: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<InsightChange>> {
        self.guard
            .call("insights_changed", async {
                let found = find_all(
                    &self.insights(),
                    doc! { "updatedAt": { "$gte": date(&since) } },
                    doc! { "updatedAt": 1 },
                    Some(i64::from(limit)),
                )
                .await?;
                found.iter().map(change_from_doc).collect()
            })
            .await
    }
}

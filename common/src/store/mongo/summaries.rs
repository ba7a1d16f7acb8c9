//! What devices' rules held back: burst windows (a document per device)
//! and summaries (a document per device and window, `_id` its
//! [`Summary::id_for`], with the events held for it). Every change is a
//! single-document update conditional on what it needs (a window still
//! running and under its limit, a summary still open), so of two racing
//! notifiers one wins and the other reads again.

use async_trait::async_trait;

use chrono::{DateTime, Utc};
use mongodb::bson::{Bson, Document, doc};
use uuid::Uuid;

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{corrupt, date, scope_filter},
    find_all, is_duplicate_key,
};
use crate::{
    rules::{Burst, HoldReason},
    store::{
        Admission, Holding, Purged, Scope, StoreError, StoreResult, Summary, SummaryState,
        SummaryStore,
    },
};

fn summary_from_doc(d: &Document) -> StoreResult<Summary> {
    let parse = || -> anyhow::Result<Summary> {
        Ok(Summary {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            device_id: Uuid::parse_str(d.get_str("deviceId")?)?,
            reason: HoldReason::parse(d.get_str("reason")?)
                .ok_or_else(|| anyhow::anyhow!("unknown reason"))?,
            due_at: d.get_datetime("dueAt")?.to_chrono(),
            events: d
                .get_array("events")?
                .iter()
                .map(|e| Ok(Uuid::parse_str(e.as_str().unwrap_or_default())?))
                .collect::<anyhow::Result<_>>()?,
            state: SummaryState::parse(d.get_str("state")?)
                .ok_or_else(|| anyhow::anyhow!("unknown state"))?,
        })
    };
    parse().map_err(|e| corrupt("summary", e))
}

fn by_id(scope: &Scope, id: Uuid) -> Document {
    let mut filter = scope_filter(scope);
    filter.insert("_id", id.to_string());
    filter
}

#[async_trait]
impl SummaryStore for MongoStore {
    async fn admit_alert(
        &self,
        scope: &Scope,
        device_id: Uuid,
        burst: &Burst,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission> {
        self.guard
            .call("admit_alert", async {
                let windows = self.db.collection::<Document>("burstWindows");
                let id = device_id.to_string();
                let cutoff = date(&(now - burst.window()));
                for _ in 0..MAX_ATTEMPTS {
                    // A running window with room: count this alert.
                    let counted = windows
                        .update_one(
                            doc! { "_id": &id, "start": { "$gt": cutoff }, "count": { "$lt": i64::from(burst.max) } },
                            doc! { "$inc": { "count": 1_i64 } },
                        )
                        .await
                        .map_err(classify)?;
                    if counted.matched_count == 1 {
                        return Ok(Admission::Admitted);
                    }
                    // An ended window: this alert opens the next.
                    let opened = windows
                        .update_one(
                            doc! { "_id": &id, "start": { "$lte": cutoff } },
                            doc! { "$set": { "start": date(&now), "count": 1_i64 } },
                        )
                        .await
                        .map_err(classify)?;
                    if opened.matched_count == 1 {
                        return Ok(Admission::Admitted);
                    }
                    match windows.find_one(doc! { "_id": &id }).await.map_err(classify)? {
                        None => {
                            let first = doc! {
                                "_id": &id,
                                "org": &scope.org,
                                "project": &scope.project,
                                "start": date(&now),
                                "count": 1_i64,
                            };
                            match windows.insert_one(first).await {
                                Ok(_) => return Ok(Admission::Admitted),
                                Err(e) if is_duplicate_key(&e) => continue,
                                Err(e) => return Err(classify(e)),
                            }
                        }
                        Some(window) => {
                            let start = window
                                .get_datetime("start")
                                .map_err(|e| corrupt("burst window", e))?
                                .to_chrono();
                            let count = window.get_i64("count").unwrap_or_default();
                            if now < start + burst.window() && count >= i64::from(burst.max) {
                                return Ok(Admission::Over {
                                    window_ends: start + burst.window(),
                                });
                            }
                            // Changed between the looks: look again.
                        }
                    }
                }
                Err(StoreError::unavailable("the burst window is contended; try again"))
            })
            .await
    }

    async fn hold_alert(
        &self,
        scope: &Scope,
        device_id: Uuid,
        reason: HoldReason,
        due_at: DateTime<Utc>,
        event_id: Uuid,
    ) -> StoreResult<Holding> {
        self.guard
            .call("hold_alert", async {
                let id = Summary::id_for(scope, device_id, reason, due_at);
                let summaries = self.summaries();
                let event = event_id.to_string();
                let held = Holding::Held { summary_id: id };
                for _ in 0..MAX_ATTEMPTS {
                    let mut open = by_id(scope, id);
                    open.insert("state", SummaryState::Open.as_str());
                    let joined = summaries
                        .update_one(open, doc! { "$addToSet": { "events": &event } })
                        .await
                        .map_err(classify)?;
                    if joined.matched_count == 1 {
                        return Ok(held);
                    }
                    match summaries
                        .find_one(by_id(scope, id))
                        .await
                        .map_err(classify)?
                    {
                        // Already held there (a job redelivered), or it
                        // went out without this alert.
                        Some(found) => {
                            let summary = summary_from_doc(&found)?;
                            if summary.events.contains(&event_id) {
                                return Ok(held);
                            }
                            if summary.state != SummaryState::Open {
                                return Ok(Holding::Closed);
                            }
                        }
                        None => {
                            let first = doc! {
                                "_id": id.to_string(),
                                "org": &scope.org,
                                "project": &scope.project,
                                "deviceId": device_id.to_string(),
                                "reason": reason.as_str(),
                                "dueAt": date(&due_at),
                                "events": [&event],
                                "state": SummaryState::Open.as_str(),
                                "recheckAt": date(&due_at),
                            };
                            match summaries.insert_one(first).await {
                                Ok(_) => return Ok(held),
                                Err(e) if is_duplicate_key(&e) => continue,
                                Err(e) => return Err(classify(e)),
                            }
                        }
                    }
                }
                Err(StoreError::unavailable(
                    "the summary is contended; try again",
                ))
            })
            .await
    }

    async fn summaries_due(
        &self,
        ended_by: DateTime<Utc>,
        due_before: DateTime<Utc>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Summary>> {
        self.guard
            .call("summaries_due", async {
                let mut filter = doc! {
                    "state": { "$ne": SummaryState::Done.as_str() },
                    "recheckAt": { "$lte": date(&due_before) },
                    "dueAt": { "$lte": date(&ended_by) },
                };
                if let Some(after) = after {
                    filter.insert("_id", doc! { "$gt": after.to_string() });
                }
                let docs = find_all(
                    &self.summaries(),
                    filter,
                    doc! { "_id": 1 },
                    Some(i64::from(limit)),
                )
                .await?;
                docs.iter().map(summary_from_doc).collect()
            })
            .await
    }

    async fn set_summary_recheck(
        &self,
        scope: &Scope,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.guard
            .call("set_summary_recheck", async {
                self.summaries()
                    .update_one(
                        by_id(scope, id),
                        doc! { "$set": { "recheckAt": date(&at) } },
                    )
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }

    async fn close_summary(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Summary>> {
        self.guard
            .call("close_summary", async {
                let mut open = by_id(scope, id);
                open.insert("state", SummaryState::Open.as_str());
                self.summaries()
                    .update_one(
                        open,
                        doc! { "$set": { "state": SummaryState::Closed.as_str() } },
                    )
                    .await
                    .map_err(classify)?;
                self.summaries()
                    .find_one(by_id(scope, id))
                    .await
                    .map_err(classify)?
                    .as_ref()
                    .map(summary_from_doc)
                    .transpose()
            })
            .await
    }

    async fn purge_summaries(
        &self,
        ended_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Purged> {
        self.guard
            .call("purge_summaries", async {
                let oldest = find_all(
                    &self.summaries(),
                    doc! {
                        "state": SummaryState::Done.as_str(),
                        "dueAt": { "$lt": date(&ended_before) },
                    },
                    doc! { "_id": 1 },
                    Some(i64::from(limit)),
                )
                .await?;
                let ids: Vec<&str> = oldest
                    .iter()
                    .filter_map(|d| d.get_str("_id").ok())
                    .collect();
                // A window is over once it started before the cutoff by
                // more than any window lasts (a day).
                let stale = date(&(ended_before - chrono::Duration::days(1)));
                self.db
                    .collection::<Document>("burstWindows")
                    .delete_many(doc! { "start": { "$lt": stale } })
                    .await
                    .map_err(classify)?;
                if ids.is_empty() {
                    return Ok(Purged::default());
                }
                let (summaries, deliveries) =
                    self.purge_with_deliveries(&self.summaries(), &ids).await?;
                Ok(Purged {
                    events: 0,
                    deliveries,
                    summaries,
                })
            })
            .await
    }

    async fn finish_summary(&self, summary: &Summary, sent: bool) -> StoreResult<()> {
        self.guard
            .call("finish_summary", async {
                let id = summary.id.to_string();
                let events: Vec<Bson> = summary
                    .events
                    .iter()
                    .map(|e| Bson::String(e.to_string()))
                    .collect();
                // The held deliveries first: once the summary is done, the
                // relay never brings it back to mark them.
                if sent {
                    self.deliveries()
                        .update_many(
                            doc! {
                                "eventId": { "$in": events },
                                "deviceId": summary.device_id.to_string(),
                                "state": "held",
                            },
                            doc! { "$set": { "summaryId": &id } },
                        )
                        .await
                        .map_err(classify)?;
                }
                self.summaries()
                    .update_one(
                        by_id(&summary.scope, summary.id),
                        doc! { "$set": { "state": SummaryState::Done.as_str() } },
                    )
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }
}

//! Events, the channels their first event creates, and the notification
//! state the outbox relay works from. Inserts go through the group-commit
//! writer (`group_commit`), which also creates the channels.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mongodb::bson::{Bson, doc};
use uuid::Uuid;

use super::{
    MongoStore, classify,
    codec::{date, event_from_doc, event_to_doc, scope_filter, state_names},
    deliveries, find_all, idempotency,
};
use crate::store::{
    Event, EventStore, IdempotentOutcome, Inserted, NotificationState, Scope, StoreResult,
    settled_state,
};

#[async_trait]
impl EventStore for MongoStore {
    async fn insert_event(&self, event: &Event) -> StoreResult<Inserted> {
        self.guard
            .call("insert_event", async {
                self.writer.insert(event, event_to_doc(event), None).await
            })
            .await
    }

    /// Inserts the event carrying `outcome` in its own document (one document:
    /// atomic without a transaction), then copies it to the idempotency
    /// record. If that copy is lost (a crash, a deadline), the claim's
    /// take-over finds the outcome in the event (`idempotency::begin`), so the
    /// event is never without its outcome either way.
    async fn insert_event_with_outcome(
        &self,
        event: &Event,
        outcome: &IdempotentOutcome,
    ) -> StoreResult<Inserted> {
        self.guard
            .call("insert_event_with_outcome", async {
                let mut document = event_to_doc(event);
                document.insert(
                    idempotency::OUTCOME_FIELD,
                    idempotency::outcome_to_doc(outcome),
                );
                self.writer
                    .insert(event, document, Some(outcome.clone()))
                    .await
            })
            .await
    }

    async fn get_event(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>> {
        self.guard
            .call("get_event", async {
                let mut filter = scope_filter(scope);
                filter.insert("_id", id.to_string());
                self.events()
                    .find_one(filter)
                    .await
                    .map_err(classify)?
                    .as_ref()
                    .map(event_from_doc)
                    .transpose()
            })
            .await
    }

    /// Many events in one query by id; each is answered only in its own scope.
    async fn get_events(&self, keys: &[(Scope, Uuid)]) -> StoreResult<Vec<Option<Event>>> {
        self.guard
            .call("get_events", async {
                if keys.is_empty() {
                    return Ok(Vec::new());
                }
                let ids: Vec<String> = keys.iter().map(|(_, id)| id.to_string()).collect();
                let docs = find_all(
                    &self.events(),
                    doc! { "_id": { "$in": ids } },
                    doc! { "_id": 1 },
                    None,
                )
                .await?;
                let found = docs
                    .iter()
                    .map(event_from_doc)
                    .collect::<StoreResult<Vec<Event>>>()?;
                Ok(keys
                    .iter()
                    .map(|(scope, id)| {
                        found
                            .iter()
                            .find(|e| e.id == *id && e.scope == *scope)
                            .cloned()
                    })
                    .collect())
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
        self.guard
            .call("set_notification_state", async {
                let mut filter = scope_filter(scope);
                filter.insert("_id", event_id.to_string());
                filter.insert("notification", doc! { "$in": state_names(from) });
                let result = self
                    .events()
                    .update_one(
                        filter,
                        doc! { "$set": {
                            "notification": to.as_str(),
                            "notificationDueAt": due.as_ref().map(date),
                        }},
                    )
                    .await
                    .map_err(classify)?;
                Ok(result.matched_count == 1)
            })
            .await
    }

    /// Reads the event's deliveries, then moves its notification: two round
    /// trips, not a transaction. Nothing between them can make the move wrong:
    /// a final delivery stays final, and the move is conditional, so it never
    /// overwrites a notification another worker settled meanwhile.
    async fn settle_notification(
        &self,
        scope: &Scope,
        event_id: Uuid,
        eligible: &[Uuid],
    ) -> StoreResult<Option<NotificationState>> {
        self.guard
            .call("settle_notification", async {
                let deliveries = deliveries::of_event(self, scope, event_id).await?;
                let state = settled_state(&deliveries, eligible);
                if let Some(state) = state {
                    self.set_notification_state(
                        scope,
                        event_id,
                        &NotificationState::UNSETTLED,
                        state,
                        None,
                    )
                    .await?;
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
        self.guard
            .call("events_due", async {
                // As the trait says: settled states have no work list.
                let unsettled: Vec<_> =
                    states.iter().copied().filter(|s| !s.is_settled()).collect();
                let mut filter = doc! {
                    "notification": { "$in": state_names(&unsettled) },
                    // Events written before due times existed have none: due now.
                    "$or": [
                        { "notificationDueAt": { "$lte": date(&due_before) } },
                        { "notificationDueAt": Bson::Null },
                    ],
                };
                if let Some(after) = after {
                    filter.insert("_id", doc! { "$gt": after.to_string() });
                }
                let docs = find_all(
                    &self.events(),
                    filter,
                    doc! { "_id": 1 },
                    Some(i64::from(limit)),
                )
                .await?;
                docs.iter().map(event_from_doc).collect()
            })
            .await
    }

    async fn count_in_notification_state(&self, state: NotificationState) -> StoreResult<u64> {
        self.guard
            .call("count_in_notification_state", async {
                self.events()
                    .count_documents(doc! { "notification": state.as_str() })
                    .await
                    .map_err(classify)
            })
            .await
    }
}

//! Events, the channels their first event creates, and the notification
//! state the outbox relay works from. Inserts go through the group-commit
//! writer (`group_commit`), which also creates the channels.

use chrono::{DateTime, Utc};
use mongodb::bson::{Bson, doc};
use uuid::Uuid;

use super::{
    MongoStore, classify,
    codec::{date, event_from_doc, event_to_doc, opt_str, scope_filter, state_names},
    deliveries, find_all, idempotency,
};
use crate::store::{
    Event, IdempotentOutcome, Inserted, NotificationState, Scope, StoreResult, settled_state,
};

pub(super) async fn insert(store: &MongoStore, event: &Event) -> StoreResult<Inserted> {
    store.writer.insert(event, event_to_doc(event), None).await
}

/// Inserts the event carrying `outcome` in its own document (one document:
/// atomic without a transaction), then copies it to the idempotency
/// record. If that copy is lost (a crash, a deadline), the claim's
/// take-over finds the outcome in the event (`idempotency::begin`), so the
/// event is never without its outcome either way.
pub(super) async fn insert_with_outcome(
    store: &MongoStore,
    event: &Event,
    outcome: &IdempotentOutcome,
) -> StoreResult<Inserted> {
    let mut document = event_to_doc(event);
    document.insert(
        idempotency::OUTCOME_FIELD,
        idempotency::outcome_to_doc(outcome),
    );
    store
        .writer
        .insert(event, document, Some(outcome.clone()))
        .await
}

pub(super) async fn get(store: &MongoStore, scope: &Scope, id: Uuid) -> StoreResult<Option<Event>> {
    let mut filter = scope_filter(scope);
    filter.insert("_id", id.to_string());
    store
        .events()
        .find_one(filter)
        .await
        .map_err(classify)?
        .as_ref()
        .map(event_from_doc)
        .transpose()
}

/// Many events in one query by id; each is answered only in its own scope.
pub(super) async fn get_many(
    store: &MongoStore,
    keys: &[(Scope, Uuid)],
) -> StoreResult<Vec<Option<Event>>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = keys.iter().map(|(_, id)| id.to_string()).collect();
    let docs = find_all(
        &store.events(),
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
}

pub(super) async fn count(store: &MongoStore, scope: &Scope) -> StoreResult<u64> {
    store
        .events()
        .count_documents(scope_filter(scope))
        .await
        .map_err(classify)
}

pub(super) async fn list_channels(store: &MongoStore, scope: &Scope) -> StoreResult<Vec<String>> {
    let docs = find_all(
        &store.channels(),
        scope_filter(scope),
        doc! { "createdAt": 1, "name": 1 },
        None,
    )
    .await?;
    Ok(docs.iter().filter_map(|d| opt_str(d, "name")).collect())
}

pub(super) async fn set_notification_state(
    store: &MongoStore,
    scope: &Scope,
    event_id: Uuid,
    from: &[NotificationState],
    to: NotificationState,
    due: Option<DateTime<Utc>>,
) -> StoreResult<bool> {
    let mut filter = scope_filter(scope);
    filter.insert("_id", event_id.to_string());
    filter.insert("notification", doc! { "$in": state_names(from) });
    let result = store
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
}

/// Reads the event's deliveries, then moves its notification: two round
/// trips, not a transaction. Nothing between them can make the move wrong:
/// a final delivery stays final, and the move is conditional, so it never
/// overwrites a notification another worker settled meanwhile.
pub(super) async fn settle(
    store: &MongoStore,
    scope: &Scope,
    event_id: Uuid,
    eligible: &[Uuid],
) -> StoreResult<Option<NotificationState>> {
    let deliveries = deliveries::list(store, scope, event_id).await?;
    let state = settled_state(&deliveries, eligible);
    if let Some(state) = state {
        set_notification_state(
            store,
            scope,
            event_id,
            &NotificationState::UNSETTLED,
            state,
            None,
        )
        .await?;
    }
    Ok(state)
}

pub(super) async fn due(
    store: &MongoStore,
    states: &[NotificationState],
    due_before: DateTime<Utc>,
    after: Option<Uuid>,
    limit: u32,
) -> StoreResult<Vec<Event>> {
    // As the trait says: settled states have no work list.
    let unsettled: Vec<_> = states.iter().copied().filter(|s| !s.is_settled()).collect();
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
        &store.events(),
        filter,
        doc! { "_id": 1 },
        Some(i64::from(limit)),
    )
    .await?;
    docs.iter().map(event_from_doc).collect()
}

pub(super) async fn count_in_notification_state(
    store: &MongoStore,
    state: NotificationState,
) -> StoreResult<u64> {
    store
        .events()
        .count_documents(doc! { "notification": state.as_str() })
        .await
        .map_err(classify)
}

//! What `GET /v1/events` answers (its handler is with the other event
//! routes, in `events`): a page of the project's events, newest first,
//! filtered, continued with a cursor; and the faults of its parameters.

use common::store::{EventFilter, Scope, Store};
use poem_openapi::{ApiResponse, Object, payload::Json};

use super::{Success, cursor, events::EventOut};
use crate::{
    error::{ApiError, FieldError},
    types::Nullable,
};

/// Page size when the request names none.
const DEFAULT_LIMIT: u32 = 50;

/// One page of events.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct EventPage {
    /// Newest first.
    pub items: Vec<EventOut>,
    /// Pass as `cursor` to get the next (older) page; null on the last page.
    pub next_cursor: Nullable<String>,
}

#[derive(ApiResponse)]
pub enum ListEventsResponse {
    /// A page of events.
    #[oai(status = 200)]
    Ok(Json<Success<EventPage>>),
}

/// A fault in a query parameter, at `["query", name]`.
pub fn query_fault(name: &str, message: impl Into<String>) -> ApiError {
    ApiError::Validation(vec![FieldError::new(
        vec!["query".into(), name.into()],
        message,
    )])
}

/// The page of `scope`'s events matching `filter` that follows `cursor`.
pub async fn page(
    store: &dyn Store,
    scope: &Scope,
    filter: &EventFilter,
    cursor: Option<&str>,
    limit: Option<u32>,
) -> Result<EventPage, ApiError> {
    let before = cursor
        .map(|c| {
            cursor::decode(c).ok_or_else(|| {
                query_fault(
                    "cursor",
                    "is not a cursor this API gave out: pass nextCursor unchanged",
                )
            })
        })
        .transpose()?;
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    // One more than asked: whether it comes says if there is a next page.
    let mut events = store
        .list_events(scope, filter, before, limit + 1)
        .await
        .map_err(ApiError::from)?;
    let more = events.len() > limit as usize;
    events.truncate(limit as usize);
    let next_cursor = more
        .then(|| events.last().map(|e| cursor::encode(e.position())))
        .flatten();
    Ok(EventPage {
        items: events.into_iter().map(EventOut::listed).collect(),
        next_cursor: Nullable(next_cursor),
    })
}

//! `POST /v1/events`: record a product moment on a channel.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use common::store::Event;
use poem::web::Data;
use poem_openapi::{ApiResponse, Object, OpenApi, payload::Json};
use serde_json::Value;
use uuid::Uuid;

use super::{ApiTags, Success};
use crate::{
    auth::AuthContext,
    error::ApiError,
    request_id::RequestId,
    state::AppState,
    types::{Icon, Nullable},
    validation::ValidatedJson,
};

/// An event to record. Strings must not be empty; unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventIn {
    /// Channel the event belongs to; created on first use.
    #[oai(validator(min_length = 1, max_length = 100))]
    pub channel_name: String,
    /// Event title.
    #[oai(validator(min_length = 1, max_length = 200))]
    pub title: String,
    /// Event description.
    #[oai(validator(min_length = 1, max_length = 4000))]
    pub description: Option<String>,
    /// A single emoji.
    pub icon: Option<Icon>,
    /// Tags: at most 20, each 1 to 64 characters.
    #[oai(validator(max_items = 20, min_length = 1, max_length = 64))]
    pub tags: Option<Vec<String>>,
    /// Custom JSON metadata: at most 50 top-level keys, nested at most 16
    /// levels; the whole body is limited to 64 KiB by default.
    #[oai(validator(max_properties = 50))]
    pub metadata: Option<BTreeMap<String, Value>>,
    /// The caller's user this event is about, or null.
    #[oai(validator(min_length = 1, max_length = 255))]
    pub user_id: Option<Nullable<String>>,
    /// Send a push notification to connected devices. Default true.
    pub notify: Option<bool>,
    /// Where the event comes from (a service, a script).
    #[oai(validator(min_length = 1, max_length = 100))]
    pub source: Option<String>,
}

/// A recorded event.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct EventOut {
    /// Event id: a time-ordered UUID (v7).
    pub id: Uuid,
    pub channel_name: String,
    pub title: String,
    pub description: Nullable<String>,
    pub icon: Nullable<String>,
    pub tags: Vec<String>,
    pub metadata: BTreeMap<String, Value>,
    pub user_id: Nullable<String>,
    pub notify: bool,
    pub source: Nullable<String>,
    /// When the event was recorded (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
}

impl From<Event> for EventOut {
    fn from(e: Event) -> Self {
        Self {
            id: e.id,
            channel_name: e.channel_name,
            title: e.title,
            description: Nullable(e.description),
            icon: Nullable(e.icon),
            tags: e.tags,
            metadata: e.metadata.into_iter().collect(),
            user_id: Nullable(e.user_id),
            notify: e.notify,
            source: Nullable(e.source),
            created_at: e.created_at,
        }
    }
}

#[derive(ApiResponse)]
pub enum CreateEventResponse {
    /// The event was recorded.
    #[oai(status = 201)]
    Created(Json<Success<EventOut>>),
}

pub struct EventsApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Events")]
impl EventsApi {
    /// Record an event
    ///
    /// Stores the event on its channel (creating the channel on first use)
    /// and, unless `notify` is false, sends a push notification to the
    /// project's connected devices.
    #[oai(path = "/v1/events", method = "post", operation_id = "createEvent")]
    async fn create(
        &self,
        body: ValidatedJson<EventIn>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<CreateEventResponse> {
        let input = body.0;
        let event = Event {
            id: Uuid::now_v7(),
            scope: auth.scope.clone(),
            channel_name: input.channel_name,
            title: input.title,
            description: input.description,
            icon: input.icon.map(|i| i.0),
            tags: input.tags.unwrap_or_default(),
            metadata: input.metadata.unwrap_or_default().into_iter().collect(),
            user_id: input.user_id.and_then(|u| u.0),
            notify: input.notify.unwrap_or(true),
            source: input.source,
            created_at: common::time::now(),
        };
        self.state
            .store
            .insert_event(&event)
            .await
            .map_err(ApiError::from)?;
        tracing::info!(event_id = %event.id, channel = %event.channel_name, "event recorded");
        Ok(CreateEventResponse::Created(Json(Success::new(
            event.into(),
            **request_id,
        ))))
    }
}

//! `POST /v1/events`: record a product moment on a channel;
//! `GET /v1/events/{id}`: look one up; `GET /v1/events`: list them.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use common::store::{Delivery, Event, EventFilter, Parser};
use poem::{Request, web::Data};
use poem_openapi::{
    ApiResponse, Object, OpenApi,
    param::{Path, Query},
    payload::Json,
    types::Example,
};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::notification::NotificationOut;
use super::parser::EventParser;
use super::priority::EventPriority;
use super::rendered::{Rendered, rfc3339};
use super::{
    ApiTags, Success,
    listing::{self, ListEventsResponse},
};
use crate::{
    auth::AuthContext,
    error::{ApiError, FieldError},
    idempotency::Claim,
    record::NewEvent,
    request_id::RequestId,
    state::AppState,
    types::{EventTime, Icon, Metadata, Nullable},
    validation::ValidatedJson,
};

/// An event to record. Strings must not be empty; unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields, example)]
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
    /// A single emoji, or its shortcode (`:moneybag:`), stored as the emoji.
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
    /// How insistently the push alerts; default `normal`.
    pub priority: Option<EventPriority>,
    /// 1 to 64 characters. The event's push replaces, on each device, the
    /// notification of any earlier event of the project with the same key
    /// (APNs `apns-collapse-id`, Web Push `Topic` and notification tag,
    /// FCM `collapse_key` and tag), so "deploy 42 started" becomes "deploy
    /// 42 succeeded" instead of stacking. Without it, each event's push is
    /// its own notification.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub alert_key: Option<String>,
    /// How `description` is written: `text` (the default) or `markdown`.
    pub parser: Option<EventParser>,
    /// Where tapping the alert leads: an http(s) URL, up to 2000
    /// characters. Pushes open it, the feed links it.
    #[oai(validator(max_length = 2000, pattern = "^[hH][tT][tT][pP][sS]?://"))]
    pub url: Option<String>,
    /// An RFC 3339 time or Unix seconds. When the event happened, to
    /// record history: not in the future and, when retention is on, not
    /// older than it. Such an event is stored at that time and never
    /// pushed, whatever `notify` says (the answer shows `notify: false`).
    /// Without it, the event happens now.
    #[oai(skip_serializing_if_is_none)]
    pub timestamp: Option<EventTime>,
}

/// The sample body the docs show and their "Test Request" sends: every
/// field set, every value valid.
impl Example for EventIn {
    fn example() -> Self {
        Self {
            channel_name: "payments".into(),
            title: "Payment failed".into(),
            description: Some("Card declined for order #1042".into()),
            icon: Some(Icon("💸".into())),
            tags: Some(vec!["eu".into(), "card".into()]),
            metadata: Some(BTreeMap::from([
                ("orderId".into(), Value::from(1042)),
                ("amount".into(), Value::from(1999)),
            ])),
            user_id: Some(Nullable(Some("user_7".into()))),
            notify: Some(true),
            source: Some("billing".into()),
            priority: Some(EventPriority::High),
            alert_key: Some("payment-1042".into()),
            parser: Some(EventParser::Markdown),
            url: Some("https://billing.example.com/orders/1042".into()),
            timestamp: None,
        }
    }
}

/// A recorded event.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct EventOut {
    /// Event id: a time-ordered UUID (v7).
    pub id: Uuid,
    pub channel_name: String,
    pub title: String,
    pub description: Nullable<String>,
    pub icon: Nullable<String>,
    pub tags: Vec<String>,
    pub metadata: Metadata,
    pub user_id: Nullable<String>,
    pub notify: bool,
    pub source: Nullable<String>,
    pub priority: EventPriority,
    /// The key its push replaces earlier pushes of on the device, if any.
    pub alert_key: Nullable<String>,
    /// How `description` is written: `text` or `markdown`.
    pub parser: EventParser,
    /// The description rendered as HTML when it is markdown, sanitised:
    /// no raw HTML, no scripts or event handlers, links to http(s) and
    /// mailto only, each with `rel="noopener noreferrer"`, images as links;
    /// null for a text description.
    pub description_html: Nullable<String>,
    /// Where tapping the alert leads, if anywhere.
    pub url: Nullable<String>,
    /// When the event happened (RFC 3339, UTC): when it was recorded, or
    /// the `timestamp` it was recorded at.
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    /// Where the event's push notification stands.
    pub notification: NotificationOut,
}

impl EventOut {
    /// The event as listings and streams show it: without deliveries.
    pub fn listed(e: Event) -> Self {
        Self::new(e, None)
    }

    fn new(e: Event, deliveries: Option<Vec<Delivery>>) -> Self {
        Self {
            id: e.id,
            channel_name: e.channel_name,
            title: e.title,
            description: Nullable(e.description.clone()),
            icon: Nullable(e.icon),
            tags: e.tags,
            metadata: Metadata(e.metadata),
            user_id: Nullable(e.user_id),
            notify: e.notify,
            source: Nullable(e.source),
            priority: e.priority.into(),
            alert_key: Nullable(e.alert_key),
            parser: e.parser.into(),
            description_html: Nullable(match e.parser {
                Parser::Markdown => e.description.as_deref().map(common::markdown::to_html),
                Parser::Text => None,
            }),
            url: Nullable(e.url),
            created_at: e.created_at,
            notification: NotificationOut {
                state: e.notification.into(),
                deliveries: deliveries.map(|d| d.into_iter().map(Into::into).collect()),
            },
        }
    }
}

#[derive(ApiResponse)]
pub enum CreateEventResponse {
    /// The event was recorded.
    #[oai(status = 201)]
    Created(Rendered<Success<EventOut>>),
}

#[derive(ApiResponse)]
pub enum GetEventResponse {
    /// The event, its notification state and its deliveries.
    #[oai(status = 200)]
    Ok(Rendered<Success<EventOut>>),
}

pub struct EventsApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Events")]
impl EventsApi {
    /// Record an event
    ///
    /// Stores the event on its channel (creating the channel on first use)
    /// and, unless `notify` is false or the event is history recorded at a
    /// past `timestamp`, sends a push notification to the project's
    /// connected devices.
    #[oai(path = "/v1/events", method = "post", operation_id = "createEvent")]
    async fn create(
        &self,
        req: &Request,
        body: ValidatedJson<EventIn>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<CreateEventResponse> {
        let input = body.0;
        let happened_at = input
            .timestamp
            .map(|t| self.check_history(t.0))
            .transpose()?;
        let new = NewEvent {
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
            priority: input.priority.map(Into::into).unwrap_or_default(),
            alert_key: input.alert_key,
            parser: input.parser.map(Into::into).unwrap_or_default(),
            url: input
                .url
                .map(|url| check_url(&url).map(|()| url))
                .transpose()?,
            happened_at,
            request_id: **request_id,
        };
        let claim = req.extensions().get::<Claim>();
        let answer = |event: &Event| {
            Rendered::new(&Success::new(
                EventOut::new(event.clone(), None),
                **request_id,
            ))
        };
        let recorded = self.state.recorder.record(new, claim, answer).await?;
        Ok(CreateEventResponse::Created(recorded))
    }

    /// Look up an event
    ///
    /// The event with its notification state and the result of each push.
    #[oai(path = "/v1/events/:id", method = "get", operation_id = "getEvent")]
    async fn get(
        &self,
        /// The event's id.
        id: Path<String>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<GetEventResponse> {
        let not_found = || ApiError::NotFound("no event with this id".into());
        // An id that is not a UUID names no event: 404, like any unknown id.
        let id = Uuid::parse_str(&id.0).map_err(|_| not_found())?;
        let store = &self.state.store;
        let event = store
            .get_event(&auth.scope, id)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(not_found)?;
        let deliveries = store
            .list_deliveries(&auth.scope, id)
            .await
            .map_err(ApiError::from)?;
        Ok(GetEventResponse::Ok(Rendered::new(&Success::new(
            EventOut::new(event, Some(deliveries)),
            **request_id,
        ))?))
    }

    /// List events
    ///
    /// The project's events, newest first, narrowed by any of the filters.
    /// Follow `nextCursor` for older events: paging visits every event once,
    /// also while new ones are recorded.
    #[oai(path = "/v1/events", method = "get", operation_id = "listEvents")]
    #[allow(clippy::too_many_arguments)]
    async fn list(
        &self,
        /// Only events of this channel.
        #[oai(validator(min_length = 1, max_length = 100))]
        channel: Query<Option<String>>,
        /// Only events carrying this tag.
        #[oai(validator(min_length = 1, max_length = 64))]
        tag: Query<Option<String>>,
        /// Only events about this user.
        #[oai(name = "userId", validator(min_length = 1, max_length = 255))]
        user_id: Query<Option<String>>,
        /// Only events whose title or description contains this text,
        /// ignoring case.
        #[oai(validator(min_length = 1, max_length = 200))]
        q: Query<Option<String>>,
        /// Only events recorded at or after this time (RFC 3339).
        since: Query<Option<DateTime<Utc>>>,
        /// Only events recorded before this time (RFC 3339).
        until: Query<Option<DateTime<Utc>>>,
        /// Events per page, 1 to 100; 50 when absent.
        #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
        limit: Query<Option<u32>>,
        /// Where to continue: the `nextCursor` of the previous page, passed
        /// unchanged (`<unix ms>.<event id>`: the events older than that
        /// position).
        #[oai(validator(
            pattern = "^-?[0-9]{1,15}\\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
        ))]
        cursor: Query<Option<String>>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ListEventsResponse> {
        let filter = EventFilter {
            channel: channel.0,
            tag: tag.0,
            user_id: user_id.0,
            text: q.0,
            since: since.0,
            until: until.0,
        };
        let page = listing::page(
            self.state.store.as_ref(),
            &auth.scope,
            &filter,
            cursor.0.as_deref(),
            limit.0,
        )
        .await?;
        Ok(ListEventsResponse::Ok(Json(Success::new(
            page,
            **request_id,
        ))))
    }
}

impl EventsApi {
    /// `at`, if an event may be recorded at it: not in the future, and not
    /// before what retention keeps (it would be deleted at its next pass).
    fn check_history(&self, at: DateTime<Utc>) -> Result<DateTime<Utc>, ApiError> {
        let refuse = |message: String| {
            ApiError::Validation(vec![FieldError::new(vec!["timestamp".into()], message)])
        };
        let now = common::time::now();
        if at > now {
            return Err(refuse(
                "must not be in the future: an event recorded at a time to come would \
                 sit above every later one"
                    .into(),
            ));
        }
        if let Some(days) = self.state.config.retention_days {
            let kept_from = now - chrono::Duration::days(i64::from(days.get()));
            if at < kept_from {
                return Err(refuse(format!(
                    "must not be older than the retention period ({days} days): it \
                     would be deleted at once"
                )));
            }
        }
        Ok(at)
    }
}

/// Whether `url` is a link a tap can open: an absolute http(s) URL with a
/// host (the schema's pattern checks the scheme's spelling only).
pub(crate) fn check_url(url: &str) -> Result<(), ApiError> {
    if common::store::web_link(url).is_some() {
        Ok(())
    } else {
        Err(ApiError::Validation(vec![FieldError::new(
            vec!["url".into()],
            "must be an absolute http(s) URL, such as https://example.com/orders/1042",
        )]))
    }
}

//! `GET /v1/stream`: the project's events as they are recorded, and its
//! insights as they change, as Server-Sent Events, resumable with
//! `Last-Event-ID` (which only events' messages carry: an insight's
//! message has no `id:` line, so a client's last id stays its last
//! event's).

use std::{
    collections::{HashSet, VecDeque},
    sync::Arc,
};

use chrono::{DateTime, Utc};
use common::store::{Event, EventPosition, InsightChange, Scope, Store};
use dashmap::DashMap;
use futures::{Stream, stream::BoxStream};
use poem::web::Data;
use poem_openapi::{
    ApiResponse, OpenApi, Union,
    param::{Header, Query},
    payload::EventStream,
    types::ToJSON as _,
};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{broadcast, watch};
use uuid::Uuid;

use super::{
    ApiTags,
    events::EventOut,
    insights::{DeletedInsight, InsightOut},
};
use crate::{
    auth::AuthContext,
    error::{ApiError, FieldError},
    state::AppState,
    tail::{Subscription, Tailed},
};

/// Events read per replay query.
const REPLAY_PAGE: u32 = 200;

/// The messages a stream sends: each one's SSE type (`event:`), the schema
/// of its data, whether it has an `id:` line, and what it means. The
/// published document describes the stream from this table.
pub const MESSAGES: [MessageKind; 3] = [
    MessageKind {
        event: "event",
        data: "EventOut",
        has_id: true,
        meaning: "an event recorded, as `GET /v1/events` lists it",
    },
    MessageKind {
        event: "insight",
        data: "InsightOut",
        has_id: false,
        meaning: "an insight set or incremented, as `GET /v1/insights` lists it",
    },
    MessageKind {
        event: "insight-deleted",
        data: "DeletedInsight",
        has_id: false,
        meaning: "an insight deleted, as `DELETE /v1/insights/{title}` answers",
    },
];

/// One kind of message of the stream.
pub struct MessageKind {
    /// Its `event:` line.
    pub event: &'static str,
    /// The name of its data's schema.
    pub data: &'static str,
    /// Whether it has an `id:` line (the event's id).
    pub has_id: bool,
    pub meaning: &'static str,
}

/// The data of one message of the stream.
#[derive(Debug, Clone, Union)]
#[oai(one_of)]
pub enum StreamMessage {
    /// Boxed: an event is several times the size of the others.
    Event(Box<EventOut>),
    Insight(InsightOut),
    InsightDeleted(DeletedInsight),
}

impl StreamMessage {
    /// The message as it goes out: its type, its data and, for an event,
    /// its id.
    fn sse(&self) -> poem::web::sse::Event {
        let [event, insight, deleted] = &MESSAGES;
        let (kind, data, id) = match self {
            Self::Event(e) => (event, e.to_json_string(), Some(e.id.to_string())),
            Self::Insight(i) => (insight, i.to_json_string(), None),
            Self::InsightDeleted(d) => (deleted, d.to_json_string(), None),
        };
        let message = poem::web::sse::Event::message(data).event_type(kind.event);
        match id {
            Some(id) => message.id(id),
            None => message,
        }
    }
}

impl From<&InsightChange> for StreamMessage {
    fn from(change: &InsightChange) -> Self {
        match &change.insight {
            Some(insight) => Self::Insight(insight.clone().into()),
            None => Self::InsightDeleted(DeletedInsight {
                title: change.title.clone(),
                deleted: true,
                deleted_at: change.changed_at,
            }),
        }
    }
}

#[derive(ApiResponse)]
pub enum StreamResponse {
    /// `text/event-stream`: each event as `id: <event id>`, `event: event`,
    /// `data: <the event, as GET /v1/events lists it>`; each change of an
    /// insight as `event: insight`, `data: <the insight, as GET
    /// /v1/insights lists it>`, or `event: insight-deleted`, `data:
    /// <what DELETE /v1/insights/{title} answers>`, without an `id:` line;
    /// a comment line (`:`) at least every 15 seconds while nothing
    /// happens.
    #[oai(status = 200)]
    Ok(EventStream<BoxStream<'static, StreamMessage>>),
}

pub struct StreamApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Events")]
impl StreamApi {
    /// Follow events live
    ///
    /// Every event recorded in the project from now on, as Server-Sent
    /// Events, including those recorded through other replicas. With
    /// `Last-Event-ID` (sent by browsers' EventSource when they reconnect)
    /// or `lastEventId`, the events recorded after that one are sent first.
    /// Every change of the project's insights from now on comes too (an
    /// `insight` or `insight-deleted` message, whatever `channel` says),
    /// through whichever replica it was made; insights are not replayed:
    /// after reconnecting, `GET /v1/insights` has them as they stand.
    /// A key may hold a limited number of streams open at once (429 beyond).
    #[oai(path = "/v1/stream", method = "get", operation_id = "streamEvents")]
    async fn stream(
        &self,
        /// Only events of this channel.
        #[oai(validator(min_length = 1, max_length = 100))]
        channel: Query<Option<String>>,
        /// Resume after this event: its id (a UUIDv7, as the stream's `id:`
        /// lines give it); the same as `Last-Event-ID`.
        #[oai(
            name = "lastEventId",
            validator(
                pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
            )
        )]
        last_event_id: Query<Option<String>>,
        /// Resume after this event: its id (a UUIDv7, as the stream's `id:`
        /// lines give it).
        #[oai(
            name = "Last-Event-ID",
            validator(
                pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
            )
        )]
        last_event_id_header: Header<Option<String>>,
        auth: Data<&AuthContext>,
    ) -> poem::Result<StreamResponse> {
        let state = &self.state;
        let resume = match (&last_event_id_header.0, &last_event_id.0) {
            (Some(id), _) => Some((id, vec!["headers".into(), "Last-Event-ID".into()])),
            (None, Some(id)) => Some((id, vec!["query".into(), "lastEventId".into()])),
            (None, None) => None,
        };
        let replay_from = match resume {
            Some((id, path)) => {
                Some(resume_position(state.store.as_ref(), &auth.scope, id, path).await?)
            }
            None => None,
        };
        let slot = state
            .streams
            .acquire(auth.key_id)
            .ok_or(ApiError::TooManyStreams {
                limit: state.streams.limit,
            })?;
        let Subscription { changes, horizon } =
            state.tail.subscribe().await.map_err(ApiError::from)?;
        let follow = Follow {
            store: Arc::clone(&state.store),
            scope: auth.scope.clone(),
            channel: channel.0,
            replay_from,
            resumed_at: replay_from,
            pending: VecDeque::new(),
            replayed: HashSet::new(),
            horizon,
            changes,
            closing: state.tail.closing(),
            _slot: slot,
        };
        let keep_alive = state.config.stream_keepalive();
        Ok(StreamResponse::Ok(
            EventStream::new(Box::pin(follow.into_stream()) as BoxStream<'static, StreamMessage>)
                .keep_alive(keep_alive)
                .to_event(|message| message.sse()),
        ))
    }
}

/// Where a stream resumes: after the event named by a `Last-Event-ID`.
/// Any id of the published form names a position: one of an event this
/// project still has is that event's, and any other UUIDv7 (an event gone
/// with retention, or never seen here) still has its time in it, which is
/// all a position needs.
async fn resume_position(
    store: &dyn Store,
    scope: &Scope,
    id: &str,
    path: Vec<String>,
) -> Result<EventPosition, ApiError> {
    let refuse = |message: &str| ApiError::Validation(vec![FieldError::new(path.clone(), message)]);
    let id = Uuid::parse_str(id.trim()).map_err(|_| refuse("must be an event id"))?;
    if let Some(event) = store.get_event(scope, id).await.map_err(ApiError::from)? {
        return Ok(event.position());
    }
    let created_at = id
        .get_timestamp()
        .and_then(|t| {
            let (secs, nanos) = t.to_unix();
            DateTime::<Utc>::from_timestamp(i64::try_from(secs).ok()?, nanos)
        })
        .ok_or_else(|| refuse("is not the id of an event of this project"))?;
    Ok(EventPosition { created_at, id })
}

/// One stream: the replay (if resuming), then the live events of its
/// project (and channel) and the changes of its project's insights.
struct Follow {
    store: Arc<dyn Store>,
    scope: Scope,
    channel: Option<String>,
    /// While replaying: the position of the last event replayed.
    replay_from: Option<EventPosition>,
    /// The event the client resumes after: the tail may still broadcast
    /// it, and those before it, if it had not polled them yet.
    resumed_at: Option<EventPosition>,
    pending: VecDeque<Event>,
    /// Replayed events the tail may still broadcast (recorded after its
    /// horizon): each is skipped once when it comes.
    replayed: HashSet<Uuid>,
    horizon: DateTime<Utc>,
    changes: broadcast::Receiver<Tailed>,
    closing: watch::Receiver<bool>,
    _slot: StreamSlot,
}

impl Follow {
    fn into_stream(self) -> impl Stream<Item = StreamMessage> + Send + 'static {
        futures::stream::unfold(self, |mut follow| async move {
            let message = match follow.next().await? {
                Tailed::Event(event) => {
                    StreamMessage::Event(Box::new(EventOut::listed(Event::clone(&event))))
                }
                Tailed::Insight(change) => StreamMessage::from(change.as_ref()),
            };
            Some((message, follow))
        })
    }

    /// The next event or insight change to send; `None` ends the stream
    /// (shutdown, a store failure during replay, or falling too far
    /// behind): the client reconnects with the last id it got and loses no
    /// event (and lists the insights again).
    async fn next(&mut self) -> Option<Tailed> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Tailed::Event(Arc::new(event)));
            }
            if let Some(from) = self.replay_from {
                let page = match self
                    .store
                    .events_after(
                        Some(&self.scope),
                        self.channel.as_deref(),
                        from,
                        REPLAY_PAGE,
                    )
                    .await
                {
                    Ok(page) => page,
                    Err(e) => {
                        tracing::warn!(error = %e, "replaying a stream failed; closing it");
                        return None;
                    }
                };
                self.replay_from = (page.len() == REPLAY_PAGE as usize)
                    .then(|| page.last().map(Event::position))
                    .flatten();
                for event in &page {
                    if event.created_at >= self.horizon {
                        self.replayed.insert(event.id);
                    }
                }
                self.pending.extend(page);
                continue;
            }
            let received = tokio::select! {
                _ = self.closing.wait_for(|closing| *closing) => return None,
                received = self.changes.recv() => received,
            };
            match received {
                // Every channel's: an insight belongs to the project.
                Ok(Tailed::Insight(change)) => {
                    if change.scope == self.scope {
                        return Some(Tailed::Insight(change));
                    }
                }
                Ok(Tailed::Event(event)) => {
                    let ours = event.scope == self.scope
                        && self
                            .channel
                            .as_ref()
                            .is_none_or(|c| *c == event.channel_name);
                    let already_had = self
                        .resumed_at
                        .is_some_and(|resumed| event.position() <= resumed);
                    if ours && !already_had && !self.replayed.remove(&event.id) {
                        return Some(Tailed::Event(event));
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::info!(missed, "a stream fell behind; closing it so it resumes");
                    return None;
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// How many streams each key holds open, within a limit.
pub struct StreamSlots {
    pub limit: usize,
    open: Arc<DashMap<Uuid, usize>>,
    gauge: Gauge,
}

impl StreamSlots {
    pub fn new(limit: usize, gauge: Gauge) -> Self {
        Self {
            limit,
            open: Arc::default(),
            gauge,
        }
    }

    /// A slot for one more stream of `key`, unless it has `limit` open.
    fn acquire(&self, key: Uuid) -> Option<StreamSlot> {
        let mut open = self.open.entry(key).or_insert(0);
        if *open >= self.limit {
            return None;
        }
        *open += 1;
        self.gauge.inc();
        Some(StreamSlot {
            key,
            open: Arc::clone(&self.open),
            gauge: self.gauge.clone(),
        })
    }
}

/// One open stream; closing it (dropping the slot) frees its place.
struct StreamSlot {
    key: Uuid,
    open: Arc<DashMap<Uuid, usize>>,
    gauge: Gauge,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.gauge.dec();
        self.open.remove_if_mut(&self.key, |_, open| {
            *open -= 1;
            *open == 0
        });
    }
}

#[cfg(test)]
mod tests {
    use poem_openapi::types::Type;

    use super::*;

    /// The document describes each kind of message by the name of its
    /// data's schema: the names are the types' own.
    #[test]
    fn each_kind_of_message_names_the_schema_of_its_data() {
        assert_eq!(
            MESSAGES.map(|kind| kind.data),
            [
                EventOut::name().as_ref(),
                InsightOut::name().as_ref(),
                DeletedInsight::name().as_ref(),
            ]
        );
    }
}

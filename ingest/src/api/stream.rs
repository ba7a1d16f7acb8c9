//! `GET /v1/stream`: the project's events as they are recorded, as
//! Server-Sent Events, resumable with `Last-Event-ID`.

use std::{
    collections::{HashSet, VecDeque},
    sync::Arc,
};

use chrono::{DateTime, Utc};
use common::store::{Event, EventPosition, Scope, Store};
use dashmap::DashMap;
use futures::{Stream, stream::BoxStream};
use poem::web::Data;
use poem_openapi::{
    ApiResponse, OpenApi,
    param::{Header, Query},
    payload::EventStream,
};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{broadcast, watch};
use uuid::Uuid;

use super::{ApiTags, events::EventOut};
use crate::{
    auth::AuthContext,
    error::{ApiError, FieldError},
    state::AppState,
    tail::Subscription,
};

/// Events read per replay query.
const REPLAY_PAGE: u32 = 200;

#[derive(ApiResponse)]
pub enum StreamResponse {
    /// `text/event-stream`: each event as `id: <event id>`, `event: event`,
    /// `data: <the event, as GET /v1/events lists it>`; a comment line
    /// (`:`) at least every 15 seconds while nothing happens.
    #[oai(status = 200)]
    Ok(EventStream<BoxStream<'static, EventOut>>),
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
        let Subscription { events, horizon } =
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
            events,
            closing: state.tail.closing(),
            _slot: slot,
        };
        let keep_alive = state.config.stream_keepalive();
        Ok(StreamResponse::Ok(
            EventStream::new(Box::pin(follow.into_stream()) as BoxStream<'static, EventOut>)
                .keep_alive(keep_alive)
                .to_event(|event| {
                    let id = event.id.to_string();
                    poem::web::sse::Event::message(poem_openapi::types::ToJSON::to_json_string(
                        &event,
                    ))
                    .id(id)
                    .event_type("event")
                }),
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
/// project (and channel).
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
    events: broadcast::Receiver<Arc<Event>>,
    closing: watch::Receiver<bool>,
    _slot: StreamSlot,
}

impl Follow {
    fn into_stream(self) -> impl Stream<Item = EventOut> + Send + 'static {
        futures::stream::unfold(self, |mut follow| async move {
            let event = follow.next().await?;
            Some((EventOut::listed(event), follow))
        })
    }

    /// The next event to send; `None` ends the stream (shutdown, a store
    /// failure during replay, or falling too far behind): the client
    /// reconnects with the last id it got and loses nothing.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
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
                received = self.events.recv() => received,
            };
            match received {
                Ok(event) => {
                    let ours = event.scope == self.scope
                        && self
                            .channel
                            .as_ref()
                            .is_none_or(|c| *c == event.channel_name);
                    let already_had = self
                        .resumed_at
                        .is_some_and(|resumed| event.position() <= resumed);
                    if ours && !already_had && !self.replayed.remove(&event.id) {
                        return Some(Event::clone(&event));
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

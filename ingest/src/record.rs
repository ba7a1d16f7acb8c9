//! Recording an event: the one way an event enters Tocsin.
//!
//! [`Recorder::record`] owns every step after the request was parsed: the
//! state the event is stored in (the outbox's rule), the write, together
//! with its replayable answer when the request holds an Idempotency-Key
//! ([`Claim`]), telling live streams, and the hand-over of its job to the
//! queue. `POST /v1/events` parses, calls it once and sends what it
//! returns; nothing else writes events.
//!
//! Under a claim the event and its answer are one write (either both are
//! stored or neither), so a retry can never find the event without the
//! answer it must replay. The answer a retry replays is byte for byte the
//! one the first try sent: when the hand-over moves the event on after the
//! write (with a broker, `pending` becomes `queued`), the stored answer is
//! replaced by the one sent. The answer comes back marked
//! ([`Rendered::stored_as_outcome`]) so the idempotency layer writes nothing
//! more.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::store::{
    Event, IdempotentOutcome, Inserted, NotificationState, Parser, Priority, Scope, Store,
    StoredResponse,
};
use poem::http::StatusCode;
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::{
    api::rendered::{CONTENT_TYPE, Rendered},
    error::ApiError,
    idempotency::Claim,
    outbox::Outbox,
    request_id::RequestId,
    tail::Tail,
};

/// An event as its request describes it: what is left to decide (its id,
/// time and notification state) is the recorder's.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub scope: Scope,
    pub channel_name: String,
    pub title: String,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub tags: Vec<String>,
    pub metadata: Map<String, Value>,
    pub user_id: Option<String>,
    /// Whether the event asks for a push.
    pub notify: bool,
    pub source: Option<String>,
    pub priority: Priority,
    /// What its push replaces on the device (see [`Event::alert_key`]).
    pub alert_key: Option<String>,
    pub parser: Parser,
    pub url: Option<String>,
    /// The past time a backfilled event happened at: it is stored at that
    /// time and never pushed. `None`: it happens now.
    pub happened_at: Option<DateTime<Utc>>,
    /// The request that records it, carried with its job to the notifier.
    pub request_id: RequestId,
}

/// Records events: the store they are written to, the outbox their jobs go
/// through, and the tail live streams follow.
pub struct Recorder {
    store: Arc<dyn Store>,
    outbox: Arc<Outbox>,
    tail: Arc<Tail>,
}

impl Recorder {
    pub fn new(store: Arc<dyn Store>, outbox: Arc<Outbox>, tail: Arc<Tail>) -> Self {
        Self {
            store,
            outbox,
            tail,
        }
    }

    /// Stores `new` and hands its job over; returns the answer `answer`
    /// renders of the event as it stands afterwards.
    ///
    /// Under `claim`, the event takes the id the claim reserved, so a retry
    /// whose first try timed out after writing finds that event instead of
    /// recording a second one; and a new event's answer is stored with it
    /// as the claim's outcome.
    pub async fn record<T: Serialize>(
        &self,
        new: NewEvent,
        claim: Option<&Claim>,
        answer: impl Fn(&Event) -> Result<Rendered<T>, ApiError>,
    ) -> Result<Rendered<T>, ApiError> {
        let event = self.stored_form(new, claim.map(Claim::resource));
        let (inserted, stored) = match claim {
            None => (self.store.insert_event(&event).await?, None),
            Some(claim) => {
                let rendered = answer(&event)?;
                let outcome = outcome(claim, &rendered);
                let inserted = self
                    .store
                    .insert_event_with_outcome(&event, &outcome)
                    .await?;
                // An event an earlier try stored has that try's answer
                // stored, or none yet: the idempotency layer stores this one.
                let stored = (inserted == Inserted::New).then_some((rendered, claim));
                (inserted, stored)
            }
        };
        let mut event = match inserted {
            Inserted::New => {
                tracing::info!(eventId = %event.id, channel = %event.channel_name, "event recorded");
                // Streams open on this replica see it now, not at the next tick.
                self.tail.nudge();
                event
            }
            Inserted::Existing(stored) => {
                tracing::info!(eventId = %stored.id, "event was recorded by an earlier try of this request");
                *stored
            }
        };
        let written_state = event.notification;
        event.notification = self.outbox.hand_over(&event).await;
        match stored {
            Some((stored, _)) if event.notification == written_state => {
                Ok(stored.stored_as_outcome())
            }
            Some((_, claim)) => {
                let rendered = answer(&event)?;
                self.replace_outcome(&event.scope, claim, &rendered).await;
                Ok(rendered.stored_as_outcome())
            }
            None => answer(&event),
        }
    }

    /// The event `new` describes, as it is written now: with the claim's
    /// reserved id or a new one, and the notification state the outbox
    /// gives an event asking for a push. History (an event at a past
    /// time) is never pushed: a push about what happened last month is
    /// noise, and an import of a year of history would be a flood.
    fn stored_form(&self, new: NewEvent, reserved: Option<Uuid>) -> Event {
        let now = common::time::now();
        let notify = new.notify && new.happened_at.is_none();
        let (notification, due) = if notify {
            let (state, due) = self.outbox.stored_state(now);
            (state, Some(due))
        } else {
            (NotificationState::Skipped, None)
        };
        Event {
            id: reserved.unwrap_or_else(Uuid::now_v7),
            scope: new.scope,
            channel_name: new.channel_name,
            title: new.title,
            description: new.description,
            icon: new.icon,
            tags: new.tags,
            metadata: new.metadata,
            user_id: new.user_id,
            notify,
            source: new.source,
            priority: new.priority,
            alert_key: new.alert_key,
            parser: new.parser,
            url: new.url,
            created_at: new.happened_at.unwrap_or(now),
            notification,
            request_id: Some(new.request_id.to_string()),
            notification_due_at: due,
        }
    }

    /// Stores `rendered` as the claim's outcome instead of the one written
    /// with the event. A failure is logged, not answered: the event is
    /// recorded and its job handed over; only a later replay would show
    /// the earlier notification state.
    async fn replace_outcome<T>(&self, scope: &Scope, claim: &Claim, rendered: &Rendered<T>) {
        let response = outcome(claim, rendered).response;
        if let Err(e) = self
            .store
            .complete_idempotent(scope, claim.key(), &response)
            .await
        {
            tracing::error!(error = %e, "could not record idempotent response");
        }
    }
}

/// `rendered`, sent as a 201, as the claim's stored outcome.
fn outcome<T>(claim: &Claim, rendered: &Rendered<T>) -> IdempotentOutcome {
    IdempotentOutcome {
        key: claim.key().to_owned(),
        response: StoredResponse {
            status: StatusCode::CREATED.as_u16(),
            content_type: CONTENT_TYPE.to_owned(),
            body: rendered.body().to_vec(),
        },
    }
}

//! The JSON payload of the event answers, rendered with serde straight into
//! bytes. poem-openapi's `Json` renders a value by building a
//! `serde_json::Value` tree first (`ToJSON`) and then writing that out: two
//! passes and an allocation per field, about a tenth of the request
//! threads' time on `POST /v1/events` (measured with `perf`). The types
//! rendered here derive `Serialize` beside `Object`, with the same names,
//! order and formats; the tests hold the two renderings byte for byte
//! equal, so the published document still describes exactly what is sent.
//!
//! The bytes are made in the handler, before the answer leaves it: a
//! failure is then an error the middleware renders as the envelope, and a
//! request under an Idempotency-Key stores the very bytes it answers with.
//! An answer already stored as its claim's outcome says so on the response
//! ([`Rendered::stored_as_outcome`]), so the idempotency layer does not
//! write it a second time.

use std::marker::PhantomData;

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use poem::{IntoResponse, Response};
use poem_openapi::{
    payload::Payload,
    registry::{MetaSchemaRef, Registry},
    types::Type,
};
use serde::{Serialize, Serializer};

use crate::{error::ApiError, idempotency::OutcomeStored};

/// The media type of every rendered answer, as poem-openapi's `Json` sends.
pub const CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// A JSON answer whose schema is `T`'s and whose bytes are serde's.
pub struct Rendered<T> {
    body: Bytes,
    /// Whether these bytes are already stored as the outcome of the
    /// request's Idempotency-Key.
    stored_as_outcome: bool,
    schema: PhantomData<fn() -> T>,
}

impl<T: Serialize> Rendered<T> {
    pub fn new(value: &T) -> Result<Self, ApiError> {
        let body = serde_json::to_vec(value)
            .map_err(|e| ApiError::Internal(anyhow::anyhow!("rendering the answer: {e}")))?;
        Ok(Self {
            body: body.into(),
            stored_as_outcome: false,
            schema: PhantomData,
        })
    }
}

impl<T> Rendered<T> {
    /// The rendered JSON.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Marks the answer as stored already as the outcome of the request's
    /// Idempotency-Key (by the write that made what it describes).
    pub fn stored_as_outcome(self) -> Self {
        Self {
            stored_as_outcome: true,
            ..self
        }
    }
}

impl<T: Type> Payload for Rendered<T> {
    const CONTENT_TYPE: &'static str = CONTENT_TYPE;

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

impl<T: Send> IntoResponse for Rendered<T> {
    fn into_response(self) -> Response {
        let mut response = Response::builder()
            .content_type(CONTENT_TYPE)
            .body(self.body);
        if self.stored_as_outcome {
            response.extensions_mut().insert(OutcomeStored);
        }
        response
    }
}

/// A time as poem-openapi's `ToJSON` writes it, `to_rfc3339` (serde's
/// chrono format would write `Z` for `+00:00`).
pub fn rfc3339<S: Serializer>(time: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&time.to_rfc3339_opts(SecondsFormat::AutoSi, false))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;
    use poem_openapi::types::ToJSON;
    use serde_json::{Value, json};
    use uuid::Uuid;

    use super::*;
    use crate::{
        api::{
            Success,
            events::EventOut,
            notification::{
                DeliveryOut, DeliveryReasonOut, DeliveryStateOut, NotificationOut,
                NotificationStateOut,
            },
            parser::EventParser,
            priority::EventPriority,
        },
        request_id::RequestId,
        types::{Metadata, Nullable},
    };

    fn event(created_at: DateTime<Utc>) -> EventOut {
        EventOut {
            id: Uuid::now_v7(),
            channel_name: "payments".into(),
            title: "Payment \"failed\" — ünïcødé\n\u{1}".into(),
            description: Nullable(Some("Card declined for order #1042".into())),
            icon: Nullable(Some("💸".into())),
            tags: vec!["eu".into(), "card".into()],
            metadata: Metadata(serde_json::Map::from_iter([
                ("orderId".into(), json!(1042)),
                ("amount".into(), json!(19.99)),
                ("big".into(), json!(u64::MAX)),
                ("negative".into(), json!(-7)),
                (
                    "nested".into(),
                    json!({"z": [1, null, true, "x"], "a": {"b": {}}}),
                ),
                ("empty".into(), json!("")),
            ])),
            user_id: Nullable(Some("user_7".into())),
            notify: true,
            source: Nullable(Some("billing".into())),
            priority: EventPriority::High,
            alert_key: Nullable(Some("deploy-42".into())),
            parser: EventParser::Markdown,
            description_html: Nullable(Some("<p>Card <em>declined</em></p>".into())),
            url: Nullable(Some("https://billing.example.com/orders/1042".into())),
            created_at,
            notification: NotificationOut {
                state: NotificationStateOut::Queued,
                deliveries: None,
            },
        }
    }

    /// What poem-openapi's `Json` sends for `value`.
    fn via_to_json<T: ToJSON>(value: &T) -> Vec<u8> {
        serde_json::to_vec(&value.to_json().unwrap_or(Value::Null)).expect("a Value renders")
    }

    fn assert_same(answer: &Success<EventOut>) {
        let rendered = Rendered::new(answer).expect("renders");
        let expected = via_to_json(answer);
        assert_eq!(
            String::from_utf8_lossy(rendered.body()),
            String::from_utf8_lossy(&expected)
        );
    }

    #[test]
    fn an_event_renders_byte_for_byte_as_its_published_schema_does() {
        let request_id = RequestId(Uuid::new_v4());
        let with_nanos = Utc.timestamp_opt(1_795_000_000, 123_456_789).unwrap();
        let whole_second = Utc.timestamp_opt(1_795_000_000, 0).unwrap();
        let millis = Utc.timestamp_opt(1_795_000_000, 120_000_000).unwrap();
        for created_at in [with_nanos, whole_second, millis] {
            assert_same(&Success::new(event(created_at), request_id));
        }
    }

    #[test]
    fn nulls_empty_fields_and_every_state_render_as_their_published_schema_does() {
        let request_id = RequestId(Uuid::new_v4());
        let states = [
            NotificationStateOut::Pending,
            NotificationStateOut::Queued,
            NotificationStateOut::Delivered,
            NotificationStateOut::Failed,
            NotificationStateOut::Skipped,
        ];
        let priorities = [
            EventPriority::Low,
            EventPriority::Normal,
            EventPriority::High,
        ];
        for (state, priority) in states.into_iter().zip(priorities.into_iter().cycle()) {
            let mut bare = event(Utc::now());
            bare.description = Nullable(None);
            bare.icon = Nullable(None);
            bare.tags = vec![];
            bare.metadata = Metadata::default();
            bare.user_id = Nullable(None);
            bare.source = Nullable(None);
            bare.notify = false;
            bare.priority = priority;
            bare.notification.state = state;
            assert_same(&Success::new(bare, request_id));
        }
    }

    #[test]
    fn an_event_with_its_deliveries_renders_as_its_published_schema_does() {
        let delivery = |state, error: Option<&str>, provider: Option<&str>| DeliveryOut {
            device_id: Some(Uuid::new_v4()),
            destination_id: None,
            state,
            attempts: 3,
            reason: Nullable(None),
            summary_id: Nullable(None),
            error: Nullable(error.map(Into::into)),
            provider: Nullable(provider.map(Into::into)),
            updated_at: Utc::now(),
        };
        let mut filtered = delivery(DeliveryStateOut::Filtered, None, None);
        filtered.reason = Nullable(Some(DeliveryReasonOut::Tag));
        let mut held = delivery(DeliveryStateOut::Held, None, None);
        held.reason = Nullable(Some(DeliveryReasonOut::QuietHours));
        held.summary_id = Nullable(Some(Uuid::now_v7()));
        let mut looked_up = event(Utc::now());
        looked_up.notification = NotificationOut {
            state: NotificationStateOut::Delivered,
            deliveries: Some(vec![
                delivery(DeliveryStateOut::Sending, None, None),
                delivery(DeliveryStateOut::Retrying, Some("timed out"), Some("apns")),
                delivery(DeliveryStateOut::Delivered, None, Some("webpush")),
                delivery(
                    DeliveryStateOut::Failed,
                    Some("BadDeviceToken"),
                    Some("fcm"),
                ),
                filtered,
                held,
            ]),
        };
        assert_same(&Success::new(looked_up.clone(), RequestId(Uuid::new_v4())));
        looked_up.notification.deliveries = Some(vec![]);
        assert_same(&Success::new(looked_up, RequestId(Uuid::new_v4())));
    }
}

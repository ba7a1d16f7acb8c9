//! What a destination is sent: one alert (an event, a summary of held
//! ones, or an admin's test), in the terms every kind renders from.

use chrono::{DateTime, Utc};
use common::store::{Event, Priority, Summary};
use serde::Serialize;
use uuid::Uuid;

use crate::push::Alert;

/// One alert for a destination.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The event's id, the summary's, or the test's: with the
    /// destination's id, what names the delivery (a webhook's
    /// `webhook-id`, the same on every retry).
    pub id: Uuid,
    /// The event's title, without its icon.
    pub title: String,
    pub icon: Option<String>,
    pub description: Option<String>,
    pub channel: String,
    pub tags: Vec<String>,
    pub priority: Priority,
    /// Where a click on the alert leads: the event's `metadata.url` when
    /// that is an http(s) URL.
    pub url: Option<String>,
    /// When it happened (the event's `createdAt`).
    pub created_at: DateTime<Utc>,
    /// A webhook's `type` (`event.created`, `summary.created`,
    /// `destination.test`).
    pub event_type: &'static str,
    /// A webhook's `data`: the event as the API shows it (without its
    /// notification), the summary, or the test.
    pub data: serde_json::Value,
}

impl Message {
    /// The title shown: the icon, a space, the title.
    pub fn display_title(&self) -> String {
        match self.icon.as_deref().filter(|icon| !icon.is_empty()) {
            Some(icon) if !self.title.starts_with(&format!("{icon} ")) => {
                format!("{icon} {}", self.title)
            }
            _ => self.title.clone(),
        }
    }
}

/// The event as a webhook's `data` carries it: the fields
/// `GET /v1/events/{id}` shows, without its notification (which is still
/// being decided while it is sent).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventData<'a> {
    id: Uuid,
    channel_name: &'a str,
    title: &'a str,
    description: Option<&'a str>,
    icon: Option<&'a str>,
    tags: &'a [String],
    metadata: &'a serde_json::Map<String, serde_json::Value>,
    user_id: Option<&'a str>,
    notify: bool,
    source: Option<&'a str>,
    priority: &'static str,
    alert_key: Option<&'a str>,
    #[serde(serialize_with = "millis")]
    created_at: DateTime<Utc>,
}

/// RFC 3339 in UTC to the millisecond, as the API writes times
/// (`+00:00`), so `data` reads as `GET /v1/events/{id}` does.
fn millis<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::Millis, false))
}

/// An http(s) URL in the event's `metadata.url`: where a click leads.
fn click_url(event: &Event) -> Option<String> {
    let url = event.metadata.get("url")?.as_str()?;
    let parsed = url::Url::parse(url).ok()?;
    matches!(parsed.scheme(), "http" | "https").then(|| url.to_owned())
}

impl Message {
    /// The alert of `event`.
    pub fn of_event(event: &Event) -> Self {
        let data = EventData {
            id: event.id,
            channel_name: &event.channel_name,
            title: &event.title,
            description: event.description.as_deref(),
            icon: event.icon.as_deref(),
            tags: &event.tags,
            metadata: &event.metadata,
            user_id: event.user_id.as_deref(),
            notify: event.notify,
            source: event.source.as_deref(),
            priority: event.priority.as_str(),
            alert_key: event.alert_key.as_deref(),
            created_at: event.created_at,
        };
        Self {
            id: event.id,
            title: event.title.clone(),
            icon: event.icon.clone(),
            description: event.description.clone(),
            channel: event.channel_name.clone(),
            tags: event.tags.clone(),
            priority: event.priority,
            url: click_url(event),
            created_at: event.created_at,
            event_type: "event.created",
            data: serde_json::to_value(data).unwrap_or_default(),
        }
    }

    /// The alert summarising what `summary` held, as `alert` words it for
    /// a device (`events`: the held events still stored).
    pub fn of_summary(
        summary: &Summary,
        alert: &Alert,
        events: &[Event],
        now: DateTime<Utc>,
    ) -> Self {
        let data = serde_json::json!({
            "id": summary.id,
            "reason": summary.reason.as_str(),
            "channelName": alert.channel,
            "title": alert.title,
            "description": alert.body,
            "count": events.len(),
            "eventIds": events.iter().map(|e| e.id).collect::<Vec<_>>(),
        });
        Self {
            id: summary.id,
            title: alert.title.clone(),
            icon: None,
            description: alert.body.clone(),
            channel: alert.channel.clone(),
            tags: Vec::new(),
            priority: alert.priority,
            url: None,
            created_at: now,
            event_type: "summary.created",
            data,
        }
    }

    /// An admin's test of destination `id` of `project`.
    pub fn test(id: Uuid, name: &str, project: &str, now: DateTime<Utc>) -> Self {
        let title = "Test alert from Tocsin".to_owned();
        let description = format!("If you can read this, \"{name}\" of {project} gets its alerts.");
        Self {
            id: Uuid::now_v7(),
            data: serde_json::json!({
                "destinationId": id,
                "title": title,
                "description": description,
            }),
            title,
            icon: Some("🔔".into()),
            description: Some(description),
            channel: "tocsin".into(),
            tags: vec!["test".into()],
            priority: Priority::Normal,
            url: None,
            created_at: now,
            event_type: "destination.test",
        }
    }
}

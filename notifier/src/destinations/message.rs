//! What a destination is sent: one alert (an event, a summary of held
//! ones, or an admin's test), in the terms every kind renders from: its
//! description as plain text, and the markdown it was written in for the
//! kinds that can show it (Discord, email's HTML); its link.

use chrono::{DateTime, Utc};
use common::store::{Event, Parser, Priority, Summary};
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
    /// The description as plain text: as written, or, for a markdown
    /// one, reduced to its words (`common::markdown::to_text`).
    pub description: Option<String>,
    /// The description's markdown, for an event written in it: what the
    /// kinds that render markdown safely show instead of `description`.
    pub markdown: Option<String>,
    pub channel: String,
    pub tags: Vec<String>,
    pub priority: Priority,
    /// Where a click on the alert leads: the event's `url`; for an event
    /// without one, its `metadata.url` when that is an http(s) URL (how a
    /// link was given before events had `url`, which existing callers
    /// still rely on).
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
    parser: &'static str,
    /// The markdown description rendered and sanitised, as the API shows
    /// it (null for a text description).
    description_html: Option<String>,
    url: Option<&'a str>,
    #[serde(serialize_with = "millis")]
    created_at: DateTime<Utc>,
}

/// RFC 3339 in UTC to the millisecond, as the API writes times
/// (`+00:00`), so `data` reads as `GET /v1/events/{id}` does.
fn millis<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::Millis, false))
}

/// Where a click leads: the event's `url`, else an http(s) URL in its
/// `metadata.url` (both checked again here: an event may have been stored
/// by another way than the API). As written; each kind writes it as its
/// service needs.
fn click_url(event: &Event) -> Option<String> {
    let is_web = |url: &str| common::store::web_link(url).is_some();
    if let Some(url) = event.url.as_deref().filter(|url| is_web(url)) {
        return Some(url.to_owned());
    }
    let url = event.metadata.get("url")?.as_str()?;
    is_web(url).then(|| url.to_owned())
}

impl Message {
    /// The alert of `event`.
    pub fn of_event(event: &Event) -> Self {
        let markdown = match event.parser {
            Parser::Markdown => event.description.clone(),
            Parser::Text => None,
        };
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
            parser: event.parser.as_str(),
            description_html: markdown.as_deref().map(common::markdown::to_html),
            url: event.url.as_deref(),
            created_at: event.created_at,
        };
        let description = match &markdown {
            Some(markdown) => {
                Some(common::markdown::to_text(markdown)).filter(|text| !text.is_empty())
            }
            None => event.description.clone(),
        };
        Self {
            id: event.id,
            title: event.title.clone(),
            icon: event.icon.clone(),
            description,
            markdown,
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
            markdown: None,
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
            markdown: None,
            channel: "tocsin".into(),
            tags: vec!["test".into()],
            priority: Priority::Normal,
            url: None,
            created_at: now,
            event_type: "destination.test",
        }
    }
}

#[cfg(test)]
mod tests {
    use common::store::{Event, Priority};
    use serde_json::json;

    use super::*;
    use crate::{
        destinations::{EVENT_URL, markdown_event},
        push::{MARKDOWN, MARKDOWN_AS_TEXT},
    };

    fn event(url: Option<&str>, metadata_url: Option<&str>) -> Event {
        let metadata = json!({ "url": metadata_url });
        Event {
            url: url.map(str::to_owned),
            metadata: metadata.as_object().cloned().unwrap_or_default(),
            ..crate::deliver::sample_event("payments", "Payment failed", Priority::Normal)
        }
    }

    #[test]
    fn a_markdown_event_is_plain_text_with_its_markdown_beside() {
        let message = markdown_event();
        assert_eq!(message.description.as_deref(), Some(MARKDOWN_AS_TEXT));
        assert_eq!(message.markdown.as_deref(), Some(MARKDOWN));
        let text = Message::of_event(&Event {
            description: Some(MARKDOWN.into()),
            ..event(None, None)
        });
        assert_eq!(text.description.as_deref(), Some(MARKDOWN), "as written");
        assert_eq!(text.markdown, None);
    }

    #[test]
    fn the_events_url_comes_first_then_its_metadata_url() {
        assert_eq!(markdown_event().url.as_deref(), Some(EVENT_URL));
        let old = "https://old.example.com/orders/42";
        assert_eq!(
            Message::of_event(&event(None, Some(old))).url.as_deref(),
            Some(old),
            "the metadata's, for the callers that still give it so"
        );
        assert_eq!(
            Message::of_event(&event(Some("javascript:alert(1)"), Some(old)))
                .url
                .as_deref(),
            Some(old)
        );
        assert_eq!(
            Message::of_event(&event(None, Some("ftp://x.example/f"))).url,
            None
        );
    }

    /// `data` is the event as `GET /v1/events/{id}` shows it, `parser`,
    /// `descriptionHtml` and `url` included.
    #[test]
    fn the_webhooks_data_shows_the_parser_the_html_and_the_url() {
        let data = markdown_event().data;
        assert_eq!(data["description"], MARKDOWN, "as written");
        assert_eq!(data["parser"], "markdown");
        assert_eq!(data["descriptionHtml"], common::markdown::to_html(MARKDOWN));
        assert_eq!(data["url"], EVENT_URL);
        let text = Message::of_event(&event(None, None)).data;
        assert_eq!(text["parser"], "text");
        assert_eq!(text["descriptionHtml"], serde_json::Value::Null);
        assert_eq!(text["url"], serde_json::Value::Null);
    }
}

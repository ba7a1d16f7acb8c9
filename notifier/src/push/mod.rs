//! Sending one push to one device, behind a small trait: APNs through a2
//! ([`apns::ApnsProvider`]), Web Push ([`webpush::WebPushProvider`]), FCM
//! ([`fcm::FcmProvider`]), a logging provider for a kind whose credentials
//! are not configured ([`logging::LoggingProvider`]), and recording
//! providers in tests (a2 cannot be pointed at a local server). [`Router`]
//! picks the provider of each device's kind. A provider reads its
//! service's answer into a [`PushOutcome`], of the class the retry policy
//! (`crate::retry::classify`) gives it.

pub mod apns;
pub mod fcm;
pub mod logging;
pub mod router;
pub mod webpush;

use std::time::Duration;

use async_trait::async_trait;
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use common::store::{Event, Parser, Scope};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

pub use common::store::{ApnsEnvironment, DeviceKind, Priority, PushTarget, WebPushSubscription};
pub use router::Router;

/// The alert shown on the device, built from the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// The event's title (the provider prefixes the icon).
    pub title: String,
    /// The event's description as plain text (a markdown description is
    /// reduced to its words: no push service renders markdown), cut by
    /// each provider to fit its limit.
    pub body: Option<String>,
    pub icon: Option<String>,
    pub channel: String,
    pub event_id: Uuid,
    /// How insistently it alerts; each provider maps it to its own terms.
    pub priority: Priority,
    /// The event's `alertKey`, carried in the payload for the app.
    pub alert_key: Option<String>,
    /// What the device replaces a notification by ([`collapse_id`]).
    pub collapse_id: String,
    /// It summarises alerts held back: `event_id` is the summary's id, and
    /// the payloads say `summaryId` instead of `eventId`, so a tap opens
    /// the channel rather than an event.
    pub summary: bool,
    /// Where tapping it leads: the event's `url` ([`web_link`]); a
    /// summary has none.
    pub url: Option<String>,
}

impl Alert {
    /// The alert of `event`.
    pub fn of(event: &Event) -> Self {
        Self {
            title: event.title.clone(),
            body: plain_description(event),
            icon: event.icon.clone(),
            channel: event.channel_name.clone(),
            event_id: event.id,
            priority: event.priority,
            alert_key: event.alert_key.clone(),
            collapse_id: collapse_id(&event.scope, event.id, event.alert_key.as_deref()),
            summary: false,
            url: event.url.as_deref().and_then(web_link),
        }
    }

    /// The title shown: the icon, a space, the title.
    pub fn display_title(&self) -> String {
        match self.icon.as_deref().filter(|icon| !icon.is_empty()) {
            // `title` may carry its icon already; whichever side adds the
            // icon, it must show once.
            Some(icon) if !self.title.starts_with(&format!("{icon} ")) => {
                format!("{icon} {}", self.title)
            }
            _ => self.title.clone(),
        }
    }
}

/// `event`'s description as text a notification shows: a markdown one
/// reduced to its words (none left: no body), a text one as it is.
fn plain_description(event: &Event) -> Option<String> {
    let description = event.description.as_deref()?;
    match event.parser {
        Parser::Text => Some(description.to_owned()),
        Parser::Markdown => {
            Some(common::markdown::to_text(description)).filter(|text| !text.is_empty())
        }
    }
}

/// `url` as a push carries it when it is an http(s) URL with a host (the
/// API checked that; an event stored some other way is checked again
/// here): written as the URL standard serialises it, so ASCII only
/// (a non-ASCII host in punycode, other characters percent-encoded),
/// which every app's URL parser takes. `None` for anything else.
pub fn web_link(url: &str) -> Option<String> {
    common::store::web_link(url).map(Into::into)
}

/// What a device replaces a notification by (APNs `apns-collapse-id`, Web
/// Push `Topic` and notification tag, FCM `collapse_key` and Android tag):
/// the event's id, so a push sent twice (a retaken lease) shows once; or,
/// for an event with an `alertKey`, a digest of its project and key, so a
/// later event of the project with the same key replaces it and another
/// project's (a device registered in two) does not. The digest is `k` and
/// 31 base64url characters: within APNs' 64 bytes and Web Push's 32
/// characters, and the same for every provider.
pub fn collapse_id(scope: &Scope, event_id: Uuid, alert_key: Option<&str>) -> String {
    let Some(key) = alert_key else {
        return event_id.to_string();
    };
    let digest = Sha256::new()
        .chain_update(scope.org.as_bytes())
        .chain_update([0])
        .chain_update(scope.project.as_bytes())
        .chain_update([0])
        .chain_update(key.as_bytes())
        .finalize();
    let mut id = String::from("k");
    id.push_str(&URL_SAFE_NO_PAD.encode(digest)[..31]);
    id
}

/// `render(body)` at most `max` bytes long: the body is cut (at a character
/// boundary, ending in `…`), or dropped, until it fits. For the providers
/// whose whole message has a byte limit (Web Push, FCM).
pub(crate) fn fit_body(
    body: Option<String>,
    max: usize,
    render: impl Fn(Option<&str>) -> Vec<u8>,
) -> Vec<u8> {
    let mut body = body;
    loop {
        let bytes = render(body.as_deref());
        match body.as_mut() {
            Some(text) if bytes.len() > max => {
                // Cut by bytes, leaving room for `…` (JSON escapes may cost
                // more: the loop cuts again).
                let excess = bytes.len() - max + '…'.len_utf8();
                let mut keep = text.len().saturating_sub(excess);
                while !text.is_char_boundary(keep) {
                    keep -= 1;
                }
                if keep == 0 {
                    body = None;
                } else {
                    text.truncate(keep);
                    text.push('…');
                }
            }
            _ => return bytes,
        }
    }
}

/// [`fit_body`] for a message that also carries the alert's `url`: the URL
/// is never cut (a cut link leads somewhere else), so it is kept whole when
/// the message fits with it and without a body, and left out otherwise;
/// the body then has the room that is left.
pub(crate) fn fit_body_and_url(
    body: Option<String>,
    url: Option<&str>,
    max: usize,
    render: impl Fn(Option<&str>, Option<&str>) -> Vec<u8>,
) -> Vec<u8> {
    let url = url.filter(|url| render(None, Some(url)).len() <= max);
    fit_body(body, max, |body| render(body, url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collapse_id_is_the_event_or_the_projects_key() {
        let (shop, blog) = (Scope::new("acme", "shop"), Scope::new("acme", "blog"));
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert_eq!(collapse_id(&shop, a, None), a.to_string());
        let keyed = collapse_id(&shop, a, Some("deploy-42"));
        assert_eq!(
            keyed,
            collapse_id(&shop, b, Some("deploy-42")),
            "per key, not per event"
        );
        assert_ne!(
            keyed,
            collapse_id(&blog, a, Some("deploy-42")),
            "per project"
        );
        assert_ne!(keyed, collapse_id(&shop, a, Some("deploy-43")));
        // Within APNs' 64 bytes and Web Push's Topic: 32 base64url characters.
        assert_eq!(keyed.len(), 32);
        assert!(
            keyed
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        let long = "é".repeat(64);
        assert_eq!(collapse_id(&shop, a, Some(&long)).len(), 32);
    }

    #[test]
    fn a_markdown_description_is_plain_text_and_a_text_one_stays_as_written() {
        assert_eq!(markdown_alert().body.as_deref(), Some(MARKDOWN_AS_TEXT));
        let text = Event {
            description: Some(MARKDOWN.into()),
            ..crate::deliver::sample_event("deploys", "Deploy 42", Priority::High)
        };
        assert_eq!(Alert::of(&text).body.as_deref(), Some(MARKDOWN));
        // Nothing left to read once the marks are gone: no body at all.
        let empty = Event {
            description: Some("***".into()),
            parser: Parser::Markdown,
            ..text
        };
        assert_eq!(Alert::of(&empty).body, None);
    }

    #[test]
    fn the_link_is_the_events_http_url_written_in_ascii() {
        assert_eq!(
            markdown_alert().url.as_deref(),
            Some("https://ci.example.com/runs/42?tab=log")
        );
        assert_eq!(
            web_link("HTTPS://Bücher.example/ä b").as_deref(),
            Some("https://xn--bcher-kva.example/%C3%A4%20b")
        );
        assert_eq!(
            web_link("http://127.0.0.1:8080/x").as_deref(),
            Some("http://127.0.0.1:8080/x")
        );
        for refused in [
            "javascript:alert(1)",
            "data:text/html,x",
            "ftp://example.com/f",
            "mailto:ops@example.com",
            "/relative",
            "https://",
        ] {
            assert_eq!(web_link(refused), None, "{refused}");
        }
        let none = crate::deliver::sample_event("deploys", "Deploy 42", Priority::High);
        assert_eq!(Alert::of(&none).url, None);
    }

    #[test]
    fn a_url_is_kept_whole_or_left_out_and_the_body_fits_around_it() {
        let render = |body: Option<&str>, url: Option<&str>| {
            format!("{}|{}", url.unwrap_or_default(), body.unwrap_or_default()).into_bytes()
        };
        let fitted = fit_body_and_url(Some("b".repeat(100)), Some("uuuu"), 50, render);
        let text = String::from_utf8(fitted).expect("UTF-8");
        assert!(text.starts_with("uuuu|b") && text.ends_with('…'), "{text}");
        assert!(text.len() <= 50, "{}", text.len());
        let too_long = "u".repeat(60);
        let fitted = fit_body_and_url(Some("body".into()), Some(&too_long), 50, render);
        assert_eq!(fitted, b"|body", "left out, and the body whole");
    }
}

/// A description in markdown, and the text a push shows of it.
#[cfg(test)]
pub(crate) const MARKDOWN: &str =
    "**Deploy 42** failed on `main`: see [the log](https://ci.example.com/runs/42).\n\n- eu\n- us";
#[cfg(test)]
pub(crate) const MARKDOWN_AS_TEXT: &str = "Deploy 42 failed on main: see the log.\n• eu\n• us";

/// The alert of an event written in markdown, with a link: what the
/// providers' unit tests render to check what a push shows of both.
#[cfg(test)]
pub(crate) fn markdown_alert() -> Alert {
    Alert::of(&Event {
        description: Some(MARKDOWN.into()),
        parser: Parser::Markdown,
        url: Some("https://ci.example.com/runs/42?tab=log".into()),
        ..crate::deliver::sample_event("deploys", "Deploy 42", Priority::High)
    })
}

/// The alert the providers' unit tests render: every field set.
#[cfg(test)]
pub(crate) fn sample_alert(body: Option<String>, priority: Priority) -> Alert {
    Alert {
        alert_key: None,
        collapse_id: Uuid::nil().to_string(),
        summary: false,
        title: "Payment failed".into(),
        body,
        icon: Some("💸".into()),
        channel: "payments".into(),
        event_id: Uuid::nil(),
        priority,
        url: Some("https://shop.example.com/orders/42?a=1&b=2".into()),
    }
}

/// One push to send.
#[derive(Clone, PartialEq, Eq)]
pub struct Push {
    /// The device's id in Tocsin (not a secret, unlike the token).
    pub device_id: Uuid,
    /// Where it goes (a token, or a Web Push subscription).
    pub target: PushTarget,
    pub alert: Alert,
}

impl Push {
    /// The device's token or endpoint: what identifies it in its scope.
    pub fn address(&self) -> &str {
        self.target.address()
    }
}

impl std::fmt::Debug for Push {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Device tokens and endpoints never reach a log line.
        f.debug_struct("Push")
            .field("device_id", &self.device_id)
            .field("kind", &self.target.kind())
            .field("alert", &self.alert)
            .finish_non_exhaustive()
    }
}

/// What the provider said about one push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// Accepted by the push service.
    Delivered { apns_id: Option<String> },
    /// The device token is dead (unregistered, bad, or for another topic):
    /// deactivate the device and never retry.
    DeviceGone { reason: String },
    /// Refused for a reason retrying will not fix (payload, configuration).
    Rejected { reason: String },
    /// A transient failure (throttling, server error, network): retry later,
    /// after the delivery's backoff, and no sooner than `after` when the
    /// push service said when (`Retry-After`; capped by the retry settings).
    Retry {
        reason: String,
        after: Option<Duration>,
    },
}

/// `Retry-After` (RFC 9110 §10.2.3): seconds, or an HTTP date; what the
/// HTTP push services (Web Push, FCM) say when they throttle or are down.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .to_std()
        .ok()
}

/// Sends pushes. Implementations must be cheap to share between tasks.
#[async_trait]
pub trait PushProvider: Send + Sync + 'static {
    /// A short name for logs and start-up messages.
    fn name(&self) -> &'static str;
    /// The provider that sends `push` (`apns`, `webpush`, `fcm`, `log`):
    /// recorded with its delivery and used as the metrics label. A provider
    /// that hands pushes on to others ([`Router`]) names the one it picks.
    fn provider_for(&self, _push: &Push) -> &'static str {
        self.name()
    }
    /// Sends one push and classifies the answer; never panics on a bad answer.
    async fn send(&self, push: &Push) -> PushOutcome;
}

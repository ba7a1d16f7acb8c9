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
use common::store::{Event, Scope};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

pub use common::store::{ApnsEnvironment, DeviceKind, Priority, PushTarget, WebPushSubscription};
pub use router::Router;

/// The alert shown on the device, built from the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// The event's title (the provider prefixes the icon).
    pub title: String,
    /// The event's description (the provider truncates it to fit APNs' limit).
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
}

impl Alert {
    /// The alert of `event`.
    pub fn of(event: &Event) -> Self {
        Self {
            title: event.title.clone(),
            body: event.description.clone(),
            icon: event.icon.clone(),
            channel: event.channel_name.clone(),
            event_id: event.id,
            priority: event.priority,
            alert_key: event.alert_key.clone(),
            collapse_id: collapse_id(&event.scope, event.id, event.alert_key.as_deref()),
            summary: false,
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

//! Sending one push to one device, behind a small trait: APNs through a2
//! ([`apns::ApnsProvider`]), Web Push ([`webpush::WebPushProvider`]), a
//! logging provider for a kind whose credentials are not configured
//! ([`logging::LoggingProvider`]), and recording providers in tests (a2
//! cannot be pointed at a local server). [`Router`] picks the provider of
//! each device's kind; an FCM provider takes its place beside the others.

pub mod apns;
pub mod logging;
pub mod router;
pub mod webpush;

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

pub use common::store::{ApnsEnvironment, DeviceKind, PushTarget, WebPushSubscription};
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

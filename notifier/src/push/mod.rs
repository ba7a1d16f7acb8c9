//! Sending one push to one device, behind a small trait: APNs through a2 in
//! production ([`apns::ApnsProvider`]), a logging provider when no APNs
//! credentials are configured ([`logging::LoggingProvider`]), and recording
//! providers in tests (a2 cannot be pointed at a local server).

pub mod apns;
pub mod logging;

use async_trait::async_trait;
use uuid::Uuid;

pub use common::store::ApnsEnvironment;

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
    pub device_token: String,
    pub environment: ApnsEnvironment,
    pub alert: Alert,
}

impl std::fmt::Debug for Push {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Device tokens never reach a log line.
        f.debug_struct("Push")
            .field("device_id", &self.device_id)
            .field("environment", &self.environment)
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
    /// after the delivery's backoff.
    Retry { reason: String },
}

/// Sends pushes. Implementations must be cheap to share between tasks.
#[async_trait]
pub trait PushProvider: Send + Sync + 'static {
    /// A short name for logs and start-up messages.
    fn name(&self) -> &'static str;
    /// Sends one push and classifies the answer; never panics on a bad answer.
    async fn send(&self, push: &Push) -> PushOutcome;
}

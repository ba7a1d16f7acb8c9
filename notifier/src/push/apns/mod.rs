//! The APNs push provider: builds the request for an alert so that it fits
//! Apple's payload limit (`message`), sends it through a2 with token (.p8)
//! authentication ([`ApnsProvider`], in `provider`), and maps Apple's answer
//! to a [`PushOutcome`](super::PushOutcome) (`outcome`).
//!
//! Secrets stay inside: the .p8 key, the provider token (JWT) a2 signs with
//! it and device tokens never reach `Debug` output or a log line.

#[cfg(test)]
mod fixtures;
mod loudness;
mod message;
mod outcome;
mod provider;

use a2::request::payload::PayloadLike as _;

pub use provider::{ApnsConfig, ApnsProvider};

/// What Apple receives for one push.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The JSON body.
    pub payload: serde_json::Value,
    /// `apns-priority`.
    pub priority: String,
    /// `apns-collapse-id`.
    pub collapse_id: Option<String>,
}

/// The JSON body and the headers the provider sends for `alert` to the app
/// `topic`. a2 cannot be pointed at a local server, so this is how the
/// end-to-end tests see what Apple would receive.
pub fn render(alert: &super::Alert, topic: &str) -> anyhow::Result<Rendered> {
    let message = message::ApnsMessage::from_alert(alert, topic, std::time::SystemTime::now())?;
    let payload = message.payload("")?;
    let options = payload.get_options();
    Ok(Rendered {
        priority: options
            .apns_priority
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        collapse_id: options
            .apns_collapse_id
            .as_ref()
            .map(|id| id.value.to_owned()),
        payload: serde_json::from_str(&payload.to_json_string()?)?,
    })
}

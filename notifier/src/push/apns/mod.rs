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

/// The JSON body and the `apns-priority` header the provider sends for
/// `alert` to the app `topic`. a2 cannot be pointed at a local server, so
/// this is how the end-to-end tests see what Apple would receive.
pub fn render(alert: &super::Alert, topic: &str) -> anyhow::Result<(serde_json::Value, String)> {
    let message = message::ApnsMessage::from_alert(alert, topic, std::time::SystemTime::now())?;
    let payload = message.payload("")?;
    let priority = payload
        .get_options()
        .apns_priority
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    Ok((serde_json::from_str(&payload.to_json_string()?)?, priority))
}

//! What the admin API needs of destinations beyond the store: the SSRF
//! policy their URLs are checked against (the notifier's, from the same
//! settings), the key their secrets are sealed with, and the senders a
//! "send test" goes out through (the notifier's own code, so a test is
//! sent exactly as an alert would be).

use std::time::Instant;

use common::{
    config::Backend, destination::Settings, endpoint::EndpointPolicy, sealed::SecretsKey,
    store::Destination,
};
use notifier::{destinations::Message, push::PushOutcome};

use super::destinations::{TestOutcome, Tried};
use crate::error::ApiError;

pub struct Sending {
    pub policy: EndpointPolicy,
    key: Option<SecretsKey>,
    senders: notifier::destinations::Senders,
}

impl Sending {
    /// From the settings ingest shares with the notifier.
    pub fn new(backend: &Backend) -> anyhow::Result<Self> {
        let settings = notifier::destination_sender_settings(backend)?;
        Ok(Self {
            policy: settings.policy.clone(),
            key: backend.secrets_key()?,
            senders: notifier::destinations::Senders::new(settings)?,
        })
    }

    /// The key secrets are sealed with; without one (MongoDB, and no
    /// `TOCSIN_SECRETS_KEY`), destinations cannot be made.
    pub fn key(&self) -> Result<&SecretsKey, ApiError> {
        self.key.as_ref().ok_or_else(|| {
            ApiError::Conflict(
                "destinations keep their secrets sealed with TOCSIN_SECRETS_KEY, which this \
                 server does not have: set it (32 random bytes in base64, the same on ingest \
                 and every notifier) and restart"
                    .into(),
            )
        })
    }

    /// The destination's settings, opened.
    pub fn open(&self, destination: &Destination) -> Result<Settings, ApiError> {
        Settings::open(self.key()?, destination.id, &destination.sealed)
            .map_err(|e| ApiError::Conflict(format!("the destination's settings: {e}")))
    }

    /// Sends `destination` a test alert, once.
    pub async fn test(&self, destination: &Destination, project: &str) -> Result<Tried, ApiError> {
        let settings = self.open(destination)?;
        let message = Message::test(
            destination.id,
            &destination.name,
            project,
            common::time::now(),
        );
        let started = Instant::now();
        let outcome = self.senders.send(destination.id, &settings, &message).await;
        let latency_ms = started.elapsed().as_millis() as u64;
        let (outcome, error) = match outcome {
            PushOutcome::Delivered { .. } => (TestOutcome::Delivered, None),
            PushOutcome::Retry { reason, .. } => (TestOutcome::Retryable, Some(reason)),
            PushOutcome::Rejected { reason } => (TestOutcome::Rejected, Some(reason)),
            PushOutcome::DeviceGone { reason } => (TestOutcome::Gone, Some(reason)),
        };
        Ok(Tried {
            outcome,
            error,
            latency_ms,
        })
    }
}

//! What the admin API needs of destinations beyond the store: the SSRF
//! policy their URLs are checked against (the notifier's, from the same
//! settings), the key their secrets are sealed with, and the tester a
//! "send test" goes out through (the notifier's own senders, passed in by
//! the binary, so a test is sent exactly as an alert would be).

use std::{sync::Arc, time::Instant};

use common::{
    config::Backend,
    destination::Settings,
    embedded::{DestinationTester, TestSent},
    endpoint::EndpointPolicy,
    sealed::SecretsKey,
    store::Destination,
};

use super::destinations::{TestOutcome, Tried};
use crate::error::ApiError;

pub struct Sending {
    pub policy: EndpointPolicy,
    key: Option<SecretsKey>,
    tester: Arc<dyn DestinationTester>,
}

impl Sending {
    /// From the settings ingest shares with the notifier.
    pub fn new(backend: &Backend, tester: Arc<dyn DestinationTester>) -> anyhow::Result<Self> {
        let allowed = backend
            .destinations_allow()
            .map_err(|e| anyhow::anyhow!("NOTIFIER_DESTINATIONS_ALLOW: {e}"))?;
        Ok(Self {
            policy: EndpointPolicy::hosts(allowed),
            key: backend.secrets_key()?,
            tester,
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
        let started = Instant::now();
        let sent = self.tester.send_test(destination, &settings, project).await;
        let latency_ms = started.elapsed().as_millis() as u64;
        let (outcome, error) = match sent {
            TestSent::Delivered => (TestOutcome::Delivered, None),
            TestSent::Retryable(reason) => (TestOutcome::Retryable, Some(reason)),
            TestSent::Rejected(reason) => (TestOutcome::Rejected, Some(reason)),
            TestSent::Gone(reason) => (TestOutcome::Gone, Some(reason)),
        };
        Ok(Tried {
            outcome,
            error,
            latency_ms,
        })
    }
}

//! The seam of the embedded mode: what ingest's composition asks of the
//! notifier it runs in its own process, without depending on it.
//!
//! The ingest library is the API and never depends on the notifier (Cargo
//! forbids the cycle: ingest's binary depends on the notifier). So the
//! composition (`ingest::compose`) takes an [`EmbeddedWorker`], which the
//! notifier implements (`notifier::Embedded`), and the `ingest` binary and
//! the tests both pass that one.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{
    metrics::Registry,
    queue::{JobConsumer, JobQueue},
    store::Store,
};

/// What the worker runs on: the process's store, both ends of the
/// in-process queue (it publishes its retries through the producer), and
/// the registry `/metrics` serves, for its own metrics.
pub struct WorkerParts<'a> {
    pub store: Arc<dyn Store>,
    /// The key ingest seals destinations' secrets with, which the worker
    /// opens them with.
    pub secrets_key: Option<crate::sealed::SecretsKey>,
    pub producer: Arc<dyn JobQueue>,
    pub consumer: Box<dyn JobConsumer>,
    pub registry: &'a mut Registry,
}

/// What the API serves and accepts for Web Push, from the worker's own
/// settings: the worker signs with the key browsers subscribe with, and
/// may only send to the push services a subscription is allowed to name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebPushSettings {
    /// The VAPID public key (URL-safe base64), when Web Push is set up.
    pub public_key: Option<String>,
    /// The push-service origins a subscription may name besides public
    /// https ones (comma-separated, as configured).
    pub allowed_endpoints: String,
}

/// A worker that can run beside the API on the in-process queue.
pub trait EmbeddedWorker: Send {
    /// Its Web Push settings, which the API adopts where its own are unset.
    fn web_push(&self) -> anyhow::Result<WebPushSettings>;

    /// Starts consuming `parts.consumer`.
    fn start(self: Box<Self>, parts: WorkerParts<'_>) -> anyhow::Result<Box<dyn RunningWorker>>;
}

/// A started worker.
#[async_trait]
pub trait RunningWorker: Send + Sync {
    /// Stops consuming and finishes the jobs in hand.
    async fn stop(self: Box<Self>);
}

/// What a destination's test alert came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestSent {
    /// The receiver took it.
    Delivered,
    /// It failed as a delivery would be retried for (a 5xx, a 429, no answer).
    Retryable(String),
    /// It was refused for a reason retrying does not fix.
    Rejected(String),
    /// The receiver says the destination is gone.
    Gone(String),
}

/// Sends a destination one test alert, exactly as the notifier sends its
/// alerts: the admin API's "send test" (ingest's library cannot use the
/// notifier's senders directly; the binary passes them in).
#[async_trait]
pub trait DestinationTester: Send + Sync {
    /// Sends `destination` of `project`, whose opened settings are
    /// `settings`, a test alert, once.
    async fn send_test(
        &self,
        destination: &crate::store::Destination,
        settings: &crate::destination::Settings,
        project: &str,
    ) -> TestSent;
}

/// A tester for a server that sends no test alerts (the fuzzing harness,
/// unit tests of the API's layers): every test is refused, saying so.
pub struct NoTester;

#[async_trait]
impl DestinationTester for NoTester {
    async fn send_test(
        &self,
        _destination: &crate::store::Destination,
        _settings: &crate::destination::Settings,
        _project: &str,
    ) -> TestSent {
        TestSent::Rejected("this server sends no test alerts".into())
    }
}

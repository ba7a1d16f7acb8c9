//! What every request handler and middleware shares.

use std::sync::Arc;

use common::store::Store;

use crate::{config::Config, metrics::IngestMetrics, outbox::Outbox, rate_limit::RateLimits};

pub struct AppState {
    pub config: Config,
    pub store: Arc<dyn Store>,
    pub rate_limits: RateLimits,
    pub outbox: Arc<Outbox>,
    pub metrics: IngestMetrics,
}

impl AppState {
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        outbox: Arc<Outbox>,
        metrics: IngestMetrics,
    ) -> Self {
        let rate_limits = RateLimits::new(
            config.rate_limit_per_minute.get(),
            config.auth_failures_per_minute.get(),
            config.anonymous_rate_limit_per_minute.get(),
        );
        Self {
            config,
            store,
            rate_limits,
            outbox,
            metrics,
        }
    }
}

//! What every request handler and middleware shares.

use std::sync::Arc;

use common::{endpoint::EndpointPolicy, store::Store};

use crate::{
    admin::sending::Sending, api::stream::StreamSlots, config::Config, key_cache::KeyCache,
    last_used::LastUsed, metrics::IngestMetrics, outbox::Outbox, rate_limit::RateLimits,
    record::Recorder, tail::Tail,
};

pub struct AppState {
    pub config: Config,
    /// Which Web Push endpoints a registration may name.
    pub endpoint_policy: EndpointPolicy,
    pub store: Arc<dyn Store>,
    pub rate_limits: RateLimits,
    /// The one way an event is recorded (its job goes through the outbox).
    pub recorder: Recorder,
    pub metrics: IngestMetrics,
    /// What live streams follow.
    pub tail: Arc<Tail>,
    /// The streams each key holds open.
    pub streams: StreamSlots,
    /// When each key was last used, until written.
    pub last_used: Arc<LastUsed>,
    /// API keys as recently read, so most requests skip the store.
    pub keys: KeyCache,
    /// Destinations' URL policy, secrets key and test sends.
    pub destinations: Sending,
}

impl AppState {
    /// Fails when the destinations' settings cannot be used (their key
    /// file cannot be made, their SMTP transport built).
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        outbox: Arc<Outbox>,
        metrics: IngestMetrics,
        tester: Arc<dyn common::embedded::DestinationTester>,
    ) -> anyhow::Result<Self> {
        let rate_limits = RateLimits::new(
            config.rate_limit_per_minute.get(),
            config.auth_failures_per_minute.get(),
            config.anonymous_rate_limit_per_minute.get(),
        )
        .with_admin_failures(config.admin_auth_failures_per_minute.get());
        let tail = Tail::new(Arc::clone(&store), config.stream_lookback());
        let recorder = Recorder::new(Arc::clone(&store), outbox, Arc::clone(&tail));
        let streams = StreamSlots::new(config.streams_per_key, metrics.open_streams.clone());
        // Checked when the settings loaded.
        let endpoint_policy = EndpointPolicy::new(config.webpush_allowed().unwrap_or_default());
        let destinations = Sending::new(&config.backend, tester)?;
        Ok(Self {
            config,
            endpoint_policy,
            store,
            rate_limits,
            recorder,
            metrics,
            tail,
            streams,
            last_used: Arc::default(),
            keys: KeyCache::default(),
            destinations,
        })
    }
}

#[cfg(test)]
impl AppState {
    /// The state of an API on a fresh SQLite file and the in-process
    /// queue, for the tests of one layer at a time. The directory holds
    /// the file.
    pub(crate) async fn for_tests(mut config: Config) -> (Arc<Self>, tempfile::TempDir) {
        use common::{
            queue::QueueConfig,
            store::{SqliteSync, StoreConfig},
        };
        let dir = tempfile::tempdir().expect("temp dir");
        // Its secrets key file too.
        config.backend.data_dir = dir.path().to_path_buf();
        let store = common::store::open(
            &StoreConfig::Sqlite {
                path: dir.path().join("tocsin.sqlite3"),
                synchronous: SqliteSync::Normal,
            },
            std::time::Duration::from_secs(5),
        )
        .await
        .expect("the store opens");
        let (queue, _consumer) = common::queue::open(&QueueConfig::InProcess);
        let metrics = IngestMetrics::register(&mut common::metrics::registry());
        let outbox = Arc::new(Outbox::new(
            Arc::clone(&store),
            queue,
            metrics.clone(),
            config.relay_times(),
        ));
        let tester = Arc::new(common::embedded::NoTester);
        let state = Self::new(config, store, outbox, metrics, tester).expect("the state builds");
        (Arc::new(state), dir)
    }
}

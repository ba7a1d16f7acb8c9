//! Ingest's settings: `config.default.toml` (compiled in, and the reference
//! for every setting), an optional operator file, then environment variables.

use std::{
    net::SocketAddr,
    num::{NonZeroU32, NonZeroU64},
    time::Duration,
};

use common::{
    config::{Backend, ConfigError, ServiceSettings, Sources, load, service_defaults},
    telemetry::LogFormat,
};
use serde::Deserialize;

const DEFAULTS: &str = include_str!("../config.default.toml");

/// Every ingest setting; each is documented in `config.default.toml`, and
/// the store and broker ones, shared with the notifier, in
/// `common/backend.default.toml`.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    /// Where the store and the broker are (read from the same keys).
    #[serde(skip)]
    pub backend: Backend,
    pub listen: String,
    pub relay_interval_ms: NonZeroU64,
    pub relay_grace_ms: u64,
    pub requeue_after_seconds: NonZeroU64,
    pub rate_limit_per_minute: NonZeroU32,
    pub auth_failures_per_minute: NonZeroU32,
    pub admin_auth_failures_per_minute: NonZeroU32,
    pub last_used_flush_ms: NonZeroU64,
    pub anonymous_rate_limit_per_minute: NonZeroU32,
    pub max_body_bytes: usize,
    pub max_headers: usize,
    pub max_header_bytes: usize,
    pub header_read_timeout_ms: NonZeroU64,
    pub idle_timeout_ms: NonZeroU64,
    pub max_connections: usize,
    pub trust_forwarded_for: bool,
    pub cors_origins: String,
    pub shutdown_grace_seconds: u64,
    pub stream_poll_interval_ms: NonZeroU64,
    pub stream_keepalive_seconds: NonZeroU64,
    pub streams_per_key: usize,
    /// Unset: events are kept forever.
    pub retention_days: Option<NonZeroU32>,
    pub retention_interval_seconds: NonZeroU64,
    pub retention_batch: NonZeroU32,
    /// The VAPID public key served at `GET /v1/webpush/key`.
    pub vapid_public_key: Option<String>,
    /// Comma-separated origins exempt from the endpoint address checks.
    pub webpush_allowed_endpoints: String,
    pub log_format: LogFormat,
}

impl ServiceSettings for Config {
    fn backend_mut(&mut self) -> &mut Backend {
        &mut self.backend
    }
}

fn sources(file: Option<&std::path::Path>) -> Sources<'_> {
    Sources {
        defaults: DEFAULTS,
        file,
        env_prefix: "INGEST_",
        unprefixed: &[],
    }
}

impl Config {
    /// Loads and checks the settings; the error names the offending setting.
    pub fn load(file: Option<&std::path::Path>) -> Result<Self, ConfigError> {
        let mut config: Self = load(&sources(file))?;
        // `INGEST_VAPID_PUBLIC_KEY=` (a blank line in a compose `.env`)
        // means "not set": the route answers 404 rather than an empty key.
        if config
            .vapid_public_key
            .as_deref()
            .is_some_and(|k| k.trim().is_empty())
        {
            config.vapid_public_key = None;
        }
        config.validate()?;
        Ok(config)
    }

    /// Every environment variable ingest reads (in embedded mode it also
    /// reads the notifier's, see `notifier::Config::environment_variables`).
    pub fn environment_variables() -> Vec<String> {
        let mut vars = sources(None).variables::<Self>();
        vars.push("RUST_LOG".into());
        vars
    }

    /// The settings as shipped, without the environment: a base for tests.
    pub fn defaults() -> Self {
        service_defaults(DEFAULTS).expect("the shipped defaults are valid")
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.listen_addr()?;
        self.backend.validate(|key| sources(None).variable(key))?;
        // Tokio's semaphore, which holds the connection slots, takes at most
        // usize::MAX >> 3 permits.
        if !(1..=1 << 24).contains(&self.max_connections) {
            return Err(ConfigError::invalid(
                "INGEST_MAX_CONNECTIONS",
                "must be between 1 and 16777216",
            ));
        }
        if !(16..=1000).contains(&self.max_headers) {
            return Err(ConfigError::invalid(
                "INGEST_MAX_HEADERS",
                "must be between 16 and 1000",
            ));
        }
        if !(4096..=1 << 20).contains(&self.max_header_bytes) {
            return Err(ConfigError::invalid(
                "INGEST_MAX_HEADER_BYTES",
                "must be between 4096 and 1048576",
            ));
        }
        self.cors_origins()?;
        self.webpush_allowed()?;
        if self.streams_per_key == 0 {
            return Err(ConfigError::invalid(
                "INGEST_STREAMS_PER_KEY",
                "must be at least 1",
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::invalid(
                "INGEST_MAX_BODY_BYTES",
                "must be at least 1024",
            ));
        }
        Ok(())
    }

    /// The address to listen on.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen.parse().map_err(|_| {
            ConfigError::invalid(
                "INGEST_LISTEN",
                format!("{:?} is not an address such as 127.0.0.1:8080", self.listen),
            )
        })
    }

    /// The origins whose pages may call the API from a browser.
    /// The origins a Web Push subscription may name whatever their address.
    pub fn webpush_allowed(&self) -> Result<common::endpoint::AllowedOrigins, ConfigError> {
        common::endpoint::AllowedOrigins::parse(&self.webpush_allowed_endpoints)
            .map_err(|e| ConfigError::invalid("INGEST_WEBPUSH_ALLOWED_ENDPOINTS", e))
    }

    /// Embedded mode: the Web Push settings ingest leaves unset come from
    /// the notifier running in this process (its VAPID key's public half,
    /// its allow-list), so one set of `NOTIFIER_*` settings serves both.
    pub fn adopt_webpush(&mut self, public_key: Option<String>, allowed_endpoints: &str) {
        if self
            .vapid_public_key
            .as_deref()
            .is_none_or(|k| k.trim().is_empty())
        {
            self.vapid_public_key = public_key;
        }
        if self.webpush_allowed_endpoints.trim().is_empty() {
            self.webpush_allowed_endpoints = allowed_endpoints.to_owned();
        }
    }

    pub(crate) fn cors_origins(&self) -> Result<crate::cors::Origins, ConfigError> {
        crate::cors::Origins::parse(&self.cors_origins)
            .map_err(|problem| ConfigError::invalid("INGEST_CORS_ORIGINS", problem))
    }

    /// When the outbox relay looks at unsettled events.
    pub fn relay_times(&self) -> crate::outbox::RelayTimes {
        crate::outbox::RelayTimes {
            grace: Duration::from_millis(self.relay_grace_ms),
            requeue_after: Duration::from_secs(self.requeue_after_seconds.get()),
        }
    }

    /// How the HTTP server treats connections and request heads.
    pub fn server(&self) -> crate::server::Settings {
        crate::server::Settings {
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms.get()),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms.get()),
            max_connections: self.max_connections,
            // Four times our limits: requests a little over them reach the
            // middleware, which answers with the envelope; hyper answers
            // far larger ones itself, before anything is buffered.
            hyper_max_headers: self.max_headers * 4,
            hyper_max_header_bytes: self.max_header_bytes * 4,
            grace: Duration::from_secs(self.shutdown_grace_seconds),
        }
    }

    /// How often live streams look for events other replicas recorded.
    pub fn stream_poll_interval(&self) -> Duration {
        Duration::from_millis(self.stream_poll_interval_ms.get())
    }

    /// The longest silence on a live stream before a comment line.
    pub fn stream_keepalive(&self) -> Duration {
        Duration::from_secs(self.stream_keepalive_seconds.get())
    }

    /// How long after its `createdAt` an event may still become visible:
    /// its write may take up to the store's deadline, and replicas' clocks
    /// may differ a little.
    pub fn stream_lookback(&self) -> Duration {
        self.backend.store_timeout() * 2 + Duration::from_secs(2)
    }

    /// Whether and how old events are deleted.
    pub fn retention(&self) -> Option<crate::retention::Retention> {
        self.retention_days
            .map(|keep_days| crate::retention::Retention {
                keep_days,
                interval: Duration::from_secs(self.retention_interval_seconds.get()),
                batch: self.retention_batch,
            })
    }

    /// How often the outbox relay runs.
    pub fn relay_interval(&self) -> Duration {
        Duration::from_millis(self.relay_interval_ms.get())
    }
}

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

/// Every ingest setting. `config.default.toml` is the reference: each field
/// appears there with its default and its full description (a test checks
/// that none is missing); the store and broker ones, shared with the
/// notifier, are in `common/backend.default.toml`. Each setting is read from
/// `INGEST_<FIELD>` (upper case).
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    /// Where the store and the broker are (read from the same keys).
    #[serde(skip)]
    pub backend: Backend,
    /// Address the HTTP API listens on (`INGEST_LISTEN`).
    pub listen: String,
    /// How often the outbox relay looks for events whose job was never
    /// confirmed, in milliseconds.
    pub relay_interval_ms: NonZeroU64,
    /// How old an unconfirmed event must be before the relay takes it over,
    /// in milliseconds.
    pub relay_grace_ms: u64,
    /// How long an event may stay `queued` before its job is presumed lost
    /// and published again, in seconds (later looks back off, up to hourly).
    pub requeue_after_seconds: NonZeroU64,
    /// Requests per minute per API key, unless the key has its own limit.
    pub rate_limit_per_minute: NonZeroU32,
    /// Failed API-key authentications per minute per client address.
    pub auth_failures_per_minute: NonZeroU32,
    /// Failed admin-token authentications per minute per client address,
    /// counted apart from the API's.
    pub admin_auth_failures_per_minute: NonZeroU32,
    /// How often ingest writes when API keys were last used, in milliseconds
    /// (each key at most once a minute whatever this is).
    pub last_used_flush_ms: NonZeroU64,
    /// Requests per minute per client address on routes that need no key.
    pub anonymous_rate_limit_per_minute: NonZeroU32,
    /// Largest request body accepted, in bytes; larger bodies get 413.
    pub max_body_bytes: usize,
    /// Most header fields a request may carry; more gets 431.
    pub max_headers: usize,
    /// Most bytes of header fields a request may carry; more gets 431.
    pub max_header_bytes: usize,
    /// Milliseconds a client has to send a complete request header.
    pub header_read_timeout_ms: NonZeroU64,
    /// Milliseconds a kept-alive connection may wait for its next request.
    pub idle_timeout_ms: NonZeroU64,
    /// Most connections served at once; newcomers wait in the backlog.
    pub max_connections: usize,
    /// Take the client address from `X-Forwarded-For` (only behind a proxy
    /// that sets it).
    pub trust_forwarded_for: bool,
    /// Origins whose web pages may call the API (CORS), comma-separated, or
    /// `*`; empty: none.
    pub cors_origins: String,
    /// Seconds in-flight requests get to finish after SIGTERM.
    pub shutdown_grace_seconds: u64,
    /// How often live streams look for events other replicas recorded, in
    /// milliseconds.
    pub stream_poll_interval_ms: NonZeroU64,
    /// Seconds of silence on a live stream before a comment line keeps it
    /// open.
    pub stream_keepalive_seconds: NonZeroU64,
    /// Live streams one key may hold open on each replica (429 beyond).
    pub streams_per_key: usize,
    /// Events older than this many days are deleted; unset: events are kept
    /// forever.
    pub retention_days: Option<NonZeroU32>,
    /// Seconds between two retention passes.
    pub retention_interval_seconds: NonZeroU64,
    /// Most events retention deletes in one transaction.
    pub retention_batch: NonZeroU32,
    /// The VAPID public key served at `GET /v1/webpush/key`.
    pub vapid_public_key: Option<String>,
    /// Comma-separated origins exempt from the endpoint address checks.
    pub webpush_allowed_endpoints: String,
    /// Log format: `auto` (JSON unless stderr is a terminal), `json` or
    /// `pretty`.
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

    /// The limits on a request's header fields.
    pub fn header_limits(&self) -> crate::header_limit::HeaderLimits {
        crate::header_limit::HeaderLimits {
            max_headers: self.max_headers,
            max_bytes: self.max_header_bytes,
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
            header_limits: self.header_limits(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `config.default.toml` is the reference operators read: every setting
    /// is written there, under a comment, so the file cannot drift from the
    /// struct.
    #[test]
    fn the_defaults_file_writes_and_describes_every_setting() {
        let gaps = common::config::service_reference_gaps::<Config>(DEFAULTS);
        assert!(gaps.is_empty(), "ingest/config.default.toml: {gaps:#?}");
    }
}

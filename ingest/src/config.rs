//! Ingest's settings: `config.default.toml` (compiled in, and the reference
//! for every setting), an optional operator file, then environment variables.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use common::{
    config::{ConfigError, Secret, Sources, load, parse_defaults},
    store::{SqliteSync, StoreConfig},
    telemetry::LogFormat,
};
use serde::Deserialize;

const DEFAULTS: &str = include_str!("../config.default.toml");

/// Every ingest setting; each is documented in `config.default.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub listen: String,
    pub data_dir: PathBuf,
    pub sqlite_synchronous: SqliteSync,
    pub mongodb_uri: Option<Secret>,
    pub mongodb_database: String,
    pub store_timeout_ms: u64,
    pub amqp_url: Option<Secret>,
    pub queue_prefix: String,
    pub broker_timeout_ms: u64,
    pub relay_interval_ms: u64,
    pub relay_grace_ms: u64,
    pub requeue_after_seconds: u64,
    pub rate_limit_per_minute: u32,
    pub auth_failures_per_minute: u32,
    pub anonymous_rate_limit_per_minute: u32,
    pub max_body_bytes: usize,
    pub max_headers: usize,
    pub max_header_bytes: usize,
    pub header_read_timeout_ms: u64,
    pub idle_timeout_ms: u64,
    pub max_connections: usize,
    pub trust_forwarded_for: bool,
    pub shutdown_grace_seconds: u64,
    pub log_format: LogFormat,
}

fn sources(file: Option<&std::path::Path>) -> Sources<'_> {
    Sources {
        defaults: DEFAULTS,
        file,
        env_prefix: "INGEST_",
        unprefixed: &["MONGODB_URI", "MONGODB_DATABASE", "AMQP_URL"],
    }
}

impl Config {
    /// Loads and checks the settings; the error names the offending setting.
    pub fn load(file: Option<&std::path::Path>) -> Result<Self, ConfigError> {
        let config: Self = load(&sources(file))?;
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
        parse_defaults(DEFAULTS).expect("the shipped defaults are valid")
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.listen_addr()?;
        let positive = [
            ("INGEST_RATE_LIMIT_PER_MINUTE", self.rate_limit_per_minute),
            (
                "INGEST_AUTH_FAILURES_PER_MINUTE",
                self.auth_failures_per_minute,
            ),
            (
                "INGEST_ANONYMOUS_RATE_LIMIT_PER_MINUTE",
                self.anonymous_rate_limit_per_minute,
            ),
        ];
        for (var, value) in positive {
            if value == 0 {
                return Err(ConfigError::invalid(var, "must be at least 1"));
            }
        }
        if self.store_timeout_ms == 0 {
            return Err(ConfigError::invalid(
                "INGEST_STORE_TIMEOUT_MS",
                "must be at least 1",
            ));
        }
        for (var, value) in [
            ("INGEST_BROKER_TIMEOUT_MS", self.broker_timeout_ms),
            ("INGEST_RELAY_INTERVAL_MS", self.relay_interval_ms),
            ("INGEST_REQUEUE_AFTER_SECONDS", self.requeue_after_seconds),
        ] {
            if value == 0 {
                return Err(ConfigError::invalid(var, "must be at least 1"));
            }
        }
        if let Some(url) = self.amqp_url()
            && !(url.starts_with("amqp://") || url.starts_with("amqps://"))
        {
            return Err(ConfigError::invalid(
                "AMQP_URL",
                "must start with amqp:// or amqps://",
            ));
        }
        for (var, value) in [
            ("INGEST_HEADER_READ_TIMEOUT_MS", self.header_read_timeout_ms),
            ("INGEST_IDLE_TIMEOUT_MS", self.idle_timeout_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::invalid(var, "must be at least 1"));
            }
        }
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
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::invalid(
                "INGEST_MAX_BODY_BYTES",
                "must be at least 1024",
            ));
        }
        if self.mongodb_uri().is_some() && self.mongodb_database.trim().is_empty() {
            return Err(ConfigError::invalid(
                "MONGODB_DATABASE",
                "must not be empty",
            ));
        }
        if let Some(uri) = self.mongodb_uri()
            && !(uri.starts_with("mongodb://") || uri.starts_with("mongodb+srv://"))
        {
            return Err(ConfigError::invalid(
                "MONGODB_URI",
                "must start with mongodb:// or mongodb+srv://",
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

    /// The MongoDB URI, treating an empty value as unset.
    fn mongodb_uri(&self) -> Option<&str> {
        self.mongodb_uri
            .as_ref()
            .map(Secret::expose)
            .filter(|u| !u.trim().is_empty())
    }

    /// The RabbitMQ URL, treating an empty value as unset.
    pub fn amqp_url(&self) -> Option<&str> {
        self.amqp_url
            .as_ref()
            .map(Secret::expose)
            .filter(|u| !u.trim().is_empty())
    }

    /// MongoDB when a URI is set, otherwise the embedded SQLite store.
    pub fn store(&self) -> StoreConfig {
        match self.mongodb_uri() {
            Some(uri) => StoreConfig::Mongo {
                uri: uri.to_owned(),
                database: self.mongodb_database.clone(),
            },
            None => StoreConfig::Sqlite {
                path: self.data_dir.join("tocsin.sqlite3"),
                synchronous: self.sqlite_synchronous,
            },
        }
    }

    /// When the outbox relay looks at unsettled events.
    pub fn relay_times(&self) -> crate::outbox::RelayTimes {
        crate::outbox::RelayTimes {
            grace: Duration::from_millis(self.relay_grace_ms),
            requeue_after: Duration::from_secs(self.requeue_after_seconds),
        }
    }

    /// How the HTTP server treats connections and request heads.
    pub fn server(&self) -> crate::server::Settings {
        crate::server::Settings {
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_connections: self.max_connections,
            // Four times our limits: requests a little over them reach the
            // middleware, which answers with the envelope; hyper answers
            // far larger ones itself, before anything is buffered.
            hyper_max_headers: self.max_headers * 4,
            hyper_max_header_bytes: self.max_header_bytes * 4,
            grace: Duration::from_secs(self.shutdown_grace_seconds),
        }
    }

    pub fn store_timeout(&self) -> Duration {
        Duration::from_millis(self.store_timeout_ms)
    }
}

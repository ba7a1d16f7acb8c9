//! The settings both services share, written once: where the store is and
//! where the queue is. Each service's configuration carries one [`Backend`],
//! read from the same flat keys as its own settings.

use std::{
    num::NonZeroU64,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

use super::{ConfigError, Secret, parse_defaults};
use crate::{
    endpoint::AllowedHosts,
    queue::{QueueConfig, amqp::AmqpConfig},
    sealed::SecretsKey,
    store::{MongoWriteConcern, SqliteSync, StoreConfig},
};

/// The shipped defaults of these settings, documented.
pub(super) const DEFAULTS: &str = include_str!("../../backend.default.toml");

/// Settings read under their conventional names, without a service prefix.
pub(super) const UNPREFIXED: [&str; 4] = [
    "MONGODB_URI",
    "MONGODB_DATABASE",
    "MONGODB_WRITE_CONCERN",
    "AMQP_URL",
];

/// The destinations' settings: read by both services under the notifier's
/// names (`NOTIFIER_DESTINATIONS_ALLOW`), since ingest checks a
/// destination at creation and sends its test with the same settings the
/// notifier delivers with.
pub(super) const NOTIFIER_SHARED: [&str; 9] = [
    "destinations_allow",
    "destination_timeout_ms",
    "telegram_base_url",
    "smtp_host",
    "smtp_port",
    "smtp_from",
    "smtp_security",
    "smtp_user",
    "smtp_password",
];

/// The key destinations' secrets are sealed with, read by both services
/// as `TOCSIN_SECRETS_KEY`.
pub(super) const SECRETS_KEY: &str = "secrets_key";

/// The store and the broker. Each field is documented, with its default, in
/// `common/backend.default.toml`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Backend {
    /// MongoDB connection string; unset or empty selects the SQLite store.
    pub mongodb_uri: Option<Secret>,
    /// MongoDB database name.
    pub mongodb_database: String,
    /// The write concern of every MongoDB write.
    pub mongodb_write_concern: MongoWriteConcern,
    /// Directory of the SQLite store.
    pub data_dir: PathBuf,
    /// How the SQLite store syncs its commits.
    pub sqlite_synchronous: SqliteSync,
    /// Deadline for every store call, in milliseconds.
    pub store_timeout_ms: NonZeroU64,
    /// RabbitMQ connection string; unset or empty selects the in-process
    /// queue of the embedded mode.
    pub amqp_url: Option<Secret>,
    /// Prefix of every exchange and queue name.
    pub queue_prefix: String,
    /// Deadline for connecting to the broker and each broker operation, in
    /// milliseconds.
    pub broker_timeout_ms: NonZeroU64,
    /// Hosts and CIDR blocks destinations may reach whatever their
    /// addresses, over plain http too (comma-separated).
    pub destinations_allow: String,
    /// How long a destination has to answer one request, in milliseconds.
    pub destination_timeout_ms: NonZeroU64,
    /// Where Telegram's Bot API is.
    pub telegram_base_url: String,
    /// The SMTP server email destinations are sent through.
    pub smtp_host: Option<String>,
    pub smtp_port: Option<u16>,
    /// The sender of every mail.
    pub smtp_from: Option<String>,
    /// `tls`, `starttls` or `none`.
    pub smtp_security: String,
    pub smtp_user: Option<String>,
    pub smtp_password: Option<Secret>,
    /// The key destinations' secrets are sealed with (32 bytes, base64).
    pub secrets_key: Option<Secret>,
}

impl Default for Backend {
    /// The settings as shipped.
    fn default() -> Self {
        parse_defaults(DEFAULTS).expect("the shipped backend defaults are valid")
    }
}

/// A secret setting's value, treating a blank one (`AMQP_URL=` in a compose
/// `.env`) as unset.
fn non_blank(secret: &Option<Secret>) -> Option<&str> {
    secret
        .as_ref()
        .map(Secret::expose)
        .filter(|v| !v.trim().is_empty())
}

impl Backend {
    /// Checks what the types cannot; `variable` names a setting's variable.
    pub fn validate(&self, variable: impl Fn(&str) -> String) -> Result<(), ConfigError> {
        if let Some(url) = self.amqp_url()
            && !(url.starts_with("amqp://") || url.starts_with("amqps://"))
        {
            return Err(ConfigError::invalid(
                "AMQP_URL",
                "must start with amqp:// or amqps://",
            ));
        }
        if let Some(uri) = self.mongodb_uri() {
            if !(uri.starts_with("mongodb://") || uri.starts_with("mongodb+srv://")) {
                return Err(ConfigError::invalid(
                    "MONGODB_URI",
                    "must start with mongodb:// or mongodb+srv://",
                ));
            }
            if self.mongodb_database.trim().is_empty() {
                return Err(ConfigError::invalid(
                    "MONGODB_DATABASE",
                    "must not be empty",
                ));
            }
        }
        self.destinations_allow()
            .map_err(|e| ConfigError::invalid("NOTIFIER_DESTINATIONS_ALLOW", e))?;
        if !matches!(self.smtp_security.as_str(), "tls" | "starttls" | "none") {
            return Err(ConfigError::invalid(
                "NOTIFIER_SMTP_SECURITY",
                "must be tls, starttls or none",
            ));
        }
        if let Some(key) = non_blank(&self.secrets_key) {
            SecretsKey::from_base64(key)
                .map_err(|e| ConfigError::invalid("TOCSIN_SECRETS_KEY", e))?;
        }
        if self.queue_prefix.trim().is_empty() {
            return Err(ConfigError::invalid(
                &variable("queue_prefix"),
                "must not be empty",
            ));
        }
        Ok(())
    }

    /// The MongoDB URI, when one is set.
    pub fn mongodb_uri(&self) -> Option<&str> {
        non_blank(&self.mongodb_uri)
    }

    /// The RabbitMQ URL, when one is set.
    pub fn amqp_url(&self) -> Option<&str> {
        non_blank(&self.amqp_url)
    }

    /// MongoDB when a URI is set, otherwise the SQLite file in `data_dir`.
    pub fn store(&self) -> StoreConfig {
        match self.mongodb_uri() {
            Some(uri) => StoreConfig::Mongo {
                uri: uri.to_owned(),
                database: self.mongodb_database.clone(),
                write_concern: self.mongodb_write_concern,
            },
            None => StoreConfig::Sqlite {
                path: self.sqlite_path(),
                synchronous: self.sqlite_synchronous,
            },
        }
    }

    /// The SQLite file in `data_dir`.
    pub fn sqlite_path(&self) -> PathBuf {
        Path::new(&self.data_dir).join("tocsin.sqlite3")
    }

    pub fn store_timeout(&self) -> Duration {
        Duration::from_millis(self.store_timeout_ms.get())
    }

    /// Opens the store these settings select, with their deadline on every
    /// call. An error names the store without its connection string (which
    /// may hold credentials).
    pub async fn open_store(&self) -> anyhow::Result<std::sync::Arc<dyn crate::store::Store>> {
        use anyhow::Context as _;
        let store = self.store();
        crate::store::open(&store, self.store_timeout())
            .await
            .with_context(|| format!("opening the {}", store.describe()))
    }

    /// The hosts destinations may reach whatever their addresses.
    pub fn destinations_allow(&self) -> Result<AllowedHosts, String> {
        AllowedHosts::parse(&self.destinations_allow)
    }

    /// The key destinations' secrets are sealed with: `TOCSIN_SECRETS_KEY`;
    /// without it, the embedded SQLite store's own key file, made on first
    /// use beside the database; `None` with MongoDB and no key set.
    pub fn secrets_key(&self) -> anyhow::Result<Option<SecretsKey>> {
        if let Some(key) = non_blank(&self.secrets_key) {
            return Ok(Some(SecretsKey::from_base64(key)?));
        }
        if self.mongodb_uri().is_some() {
            return Ok(None);
        }
        SecretsKey::load_or_create(&self.data_dir).map(Some)
    }

    pub fn destination_timeout(&self) -> Duration {
        Duration::from_millis(self.destination_timeout_ms.get())
    }

    /// The broker's settings, when a broker is configured.
    pub fn amqp(&self) -> Option<AmqpConfig> {
        self.amqp_url().map(|url| AmqpConfig {
            url: url.to_owned(),
            prefix: self.queue_prefix.clone(),
            timeout: Duration::from_millis(self.broker_timeout_ms.get()),
        })
    }

    /// RabbitMQ when a URL is set, otherwise the in-process queue.
    pub fn queue(&self) -> QueueConfig {
        self.amqp()
            .map_or(QueueConfig::InProcess, QueueConfig::Amqp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_store_syncs_every_commit_by_default() {
        // An answered event survives a power loss unless an operator
        // chooses otherwise (docs/operations.md, "What survives what").
        assert_eq!(Backend::default().sqlite_synchronous, SqliteSync::Full);
    }

    #[test]
    fn mongodb_writes_wait_for_a_majoritys_journal_by_default() {
        // "No accepted alert lost" on a replica set: the primary's loss or
        // a power loss keeps what was answered (docs/operations.md).
        let backend = Backend {
            mongodb_uri: Some(Secret::new("mongodb://127.0.0.1:27017")),
            ..Backend::default()
        };
        let StoreConfig::Mongo { write_concern, .. } = backend.store() else {
            panic!("a MongoDB store");
        };
        let concern = write_concern.driver();
        assert_eq!(concern.w, Some(mongodb::options::Acknowledgment::Majority));
        assert_eq!(concern.journal, Some(true));
    }

    #[test]
    fn blank_urls_mean_the_embedded_choices() {
        let backend = Backend {
            mongodb_uri: Some(Secret::new(" ")),
            amqp_url: Some(Secret::new("")),
            ..Backend::default()
        };
        assert!(matches!(backend.store(), StoreConfig::Sqlite { .. }));
        assert!(matches!(backend.queue(), QueueConfig::InProcess));
    }

    #[test]
    fn destination_settings_are_checked_with_their_variables() {
        for (backend, variable) in [
            (
                Backend {
                    destinations_allow: "10.0.0.0/8, not a host!".into(),
                    ..Backend::default()
                },
                "NOTIFIER_DESTINATIONS_ALLOW",
            ),
            (
                Backend {
                    smtp_security: "ssl".into(),
                    ..Backend::default()
                },
                "NOTIFIER_SMTP_SECURITY",
            ),
            (
                Backend {
                    secrets_key: Some(Secret::new("too short")),
                    ..Backend::default()
                },
                "TOCSIN_SECRETS_KEY",
            ),
        ] {
            let err = backend.validate(|k| k.to_uppercase()).expect_err("refused");
            assert!(err.to_string().contains(variable), "{err}");
        }
    }

    #[test]
    fn the_secrets_key_is_the_operators_or_the_sqlite_stores_own() {
        let dir = tempfile::tempdir().expect("dir");
        let sqlite = Backend {
            data_dir: dir.path().to_path_buf(),
            ..Backend::default()
        };
        assert!(sqlite.secrets_key().expect("made").is_some());
        assert!(dir.path().join(crate::sealed::KEY_FILE).exists());
        let mongo = Backend {
            mongodb_uri: Some(Secret::new("mongodb://127.0.0.1:27017")),
            data_dir: dir.path().join("unused"),
            ..Backend::default()
        };
        assert!(
            mongo.secrets_key().expect("read").is_none(),
            "no key file for MongoDB"
        );
        assert!(!dir.path().join("unused").exists());
    }

    #[test]
    fn a_broker_url_of_another_scheme_is_refused() {
        let backend = Backend {
            amqp_url: Some(Secret::new("http://127.0.0.1:5672")),
            ..Backend::default()
        };
        let err = backend.validate(|k| k.to_uppercase()).expect_err("refused");
        assert!(err.to_string().contains("AMQP_URL"), "{err}");
    }
}

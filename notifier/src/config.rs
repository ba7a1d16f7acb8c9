//! The notifier's settings: `config.default.toml` (compiled in, and the
//! reference for every setting), an optional operator file, then environment
//! variables. The push providers they select are built in [`providers`].

pub mod destinations;
mod providers;

use std::{
    net::SocketAddr,
    num::{NonZeroU16, NonZeroU64, NonZeroUsize},
    path::PathBuf,
    time::Duration,
};

use common::{
    config::{Backend, ConfigError, Secret, ServiceSettings, Sources, load, service_defaults},
    endpoint::AllowedOrigins,
    queue::ConsumeSettings,
    telemetry::LogFormat,
};
use serde::Deserialize;

use crate::{push::webpush::vapid::VapidKey, retry::RetryPolicy};

const DEFAULTS: &str = include_str!("../config.default.toml");

/// Every notifier setting. `config.default.toml` is the reference: each
/// field appears there with its default and its full description (a test
/// checks that none is missing); the store and broker ones, shared with
/// ingest, are in `common/backend.default.toml`. Each setting is read from
/// `NOTIFIER_<FIELD>` (upper case), the `apns_*` ones from `APNS_*`.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    /// Where the store and the broker are (read from the same keys).
    #[serde(skip)]
    pub backend: Backend,
    /// Address of the notifier's own port (`/metrics`, `/healthz`,
    /// `/readyz`); port 0 picks a free one. Unused in embedded mode.
    pub listen: String,
    /// Unacknowledged jobs the broker hands this process at once.
    pub prefetch: NonZeroU16,
    /// Jobs processed at once.
    pub concurrency: NonZeroUsize,
    /// Pushes waiting for their push service at once, across every job.
    pub max_in_flight: NonZeroUsize,
    /// How long a project's device list is reused between jobs, in
    /// milliseconds; 0 reads it for every job.
    pub device_cache_ms: u64,
    /// Delay before the first retry of a failed push or job, in ms
    /// ([`RetryPolicy::base`]).
    pub retry_base_ms: NonZeroU64,
    /// Longest delay between two tries, and the cap on a push service's
    /// `Retry-After`, in ms ([`RetryPolicy::max`]).
    pub retry_max_ms: u64,
    /// Retries after the first try ([`RetryPolicy::max_retries`]).
    pub max_retries: u32,
    /// The lease on a claimed delivery, in seconds (at least 2): how long a
    /// crashed worker's deliveries wait before another worker sends them.
    pub stale_claim_seconds: u64,
    /// Path to the APNs token-authentication key (`.p8`); read as
    /// `APNS_KEY_PATH`. APNs needs all four `apns_*` settings, or none.
    pub apns_key_path: Option<PathBuf>,
    /// The APNs key's id (`APNS_KEY_ID`).
    pub apns_key_id: Option<String>,
    /// The Apple developer team id (`APNS_TEAM_ID`).
    pub apns_team_id: Option<String>,
    /// The app's bundle id, the APNs topic (`APNS_TOPIC`).
    pub apns_topic: Option<String>,
    /// Base64url raw P-256 private key signing Web Push (VAPID).
    pub vapid_private_key: Option<Secret>,
    /// The VAPID contact: a `mailto:` or `https:` URL.
    pub vapid_subject: Option<String>,
    /// Comma-separated origins exempt from the endpoint address checks.
    pub webpush_allowed_endpoints: String,
    /// How long a push service has to answer one Web Push request, in
    /// milliseconds.
    pub webpush_timeout_ms: NonZeroU64,
    /// Path to the Firebase service account's JSON key file.
    pub fcm_service_account: Option<PathBuf>,
    /// Where FCM's HTTP v1 API is (Google's by default).
    pub fcm_base_url: String,
    /// How long FCM (or its token endpoint) has to answer one request, in
    /// milliseconds.
    pub fcm_timeout_ms: NonZeroU64,
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
        env_prefix: "NOTIFIER_",
        unprefixed: &["APNS_KEY_PATH", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC"],
    }
}

impl Config {
    /// Loads and checks the settings; the error names the offending setting.
    pub fn load(file: Option<&std::path::Path>) -> Result<Self, ConfigError> {
        let mut config: Self = load(&sources(file))?;
        config.blank_apns_is_unset();
        config.validate()?;
        Ok(config)
    }

    /// `APNS_KEY_ID=` (a blank line in a compose `.env`) means "not set",
    /// as a blank AMQP_URL or MONGODB_URI does, not "set to nothing".
    fn blank_apns_is_unset(&mut self) {
        for value in [
            &mut self.apns_key_id,
            &mut self.apns_team_id,
            &mut self.apns_topic,
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                *value = None;
            }
        }
        for path in [&mut self.apns_key_path, &mut self.fcm_service_account] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                *path = None;
            }
        }
    }

    /// Every environment variable the notifier reads.
    pub fn environment_variables() -> Vec<String> {
        let mut vars = sources(None).variables::<Self>();
        vars.push("RUST_LOG".into());
        vars
    }

    /// The address of the metrics and health endpoints.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen
            .parse()
            .map_err(|e| ConfigError::invalid("NOTIFIER_LISTEN", format!("{e}")))
    }

    /// The settings as shipped, without the environment: a base for tests.
    pub fn defaults() -> Self {
        service_defaults(DEFAULTS).expect("the shipped defaults are valid")
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.listen_addr()?;
        self.backend.validate(|key| sources(None).variable(key))?;
        if self.stale_claim_seconds < 2 {
            return Err(ConfigError::invalid(
                "NOTIFIER_STALE_CLAIM_SECONDS",
                "must be at least 2 (a push gets half of it)",
            ));
        }
        if self.retry_max_ms < self.retry_base_ms.get() {
            return Err(ConfigError::invalid(
                "NOTIFIER_RETRY_MAX_MS",
                "must be at least NOTIFIER_RETRY_BASE_MS",
            ));
        }
        self.apns()?;
        self.vapid()?;
        self.webpush_allowed()?;
        self.fcm()?;
        Ok(())
    }

    /// The VAPID key and subject: both, or neither (Web Push is then only
    /// logged).
    fn vapid(&self) -> Result<Option<VapidKey>, ConfigError> {
        let key = self
            .vapid_private_key
            .as_ref()
            .filter(|k| !k.expose().trim().is_empty());
        let subject = self
            .vapid_subject
            .as_deref()
            .filter(|s| !s.trim().is_empty());
        match (key, subject) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(ConfigError::invalid(
                "NOTIFIER_VAPID_SUBJECT",
                "is required with NOTIFIER_VAPID_PRIVATE_KEY (mailto:you@example.com)",
            )),
            (None, Some(_)) => Err(ConfigError::invalid(
                "NOTIFIER_VAPID_PRIVATE_KEY",
                "is required with NOTIFIER_VAPID_SUBJECT (`notifier vapid generate` makes one)",
            )),
            (Some(key), Some(subject)) => {
                if !(subject.starts_with("mailto:") || subject.starts_with("https:")) {
                    return Err(ConfigError::invalid(
                        "NOTIFIER_VAPID_SUBJECT",
                        "must be a mailto: or https: URL",
                    ));
                }
                VapidKey::parse(key.expose(), subject)
                    .map(Some)
                    .map_err(|e| ConfigError::invalid("NOTIFIER_VAPID_PRIVATE_KEY", e))
            }
        }
    }

    /// The origins exempt from the endpoint checks.
    pub fn webpush_allowed(&self) -> Result<AllowedOrigins, ConfigError> {
        AllowedOrigins::parse(&self.webpush_allowed_endpoints)
            .map_err(|e| ConfigError::invalid("NOTIFIER_WEBPUSH_ALLOWED_ENDPOINTS", e))
    }

    /// The VAPID public key browsers subscribe with (base64url), when Web
    /// Push is configured: what ingest serves in embedded mode.
    pub fn vapid_public_key(&self) -> Result<Option<String>, ConfigError> {
        Ok(self.vapid()?.map(|key| key.public_key()))
    }

    /// The delivery retry policy these settings make (`crate::retry`).
    pub fn retry(&self) -> RetryPolicy {
        RetryPolicy {
            base: Duration::from_millis(self.retry_base_ms.get()),
            max: Duration::from_millis(self.retry_max_ms),
            max_retries: self.max_retries,
        }
    }

    /// How the worker takes jobs from the queue.
    pub fn consume(&self) -> ConsumeSettings {
        ConsumeSettings {
            prefetch: self.prefetch,
            delays: self.retry().delays(),
        }
    }

    /// The lease a worker holds on a delivery it claimed.
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.stale_claim_seconds)
    }

    /// The APNs credentials: all four settings, or none.
    fn apns(&self) -> Result<Option<(PathBuf, String, String, String)>, ConfigError> {
        match (
            &self.apns_key_path,
            &self.apns_key_id,
            &self.apns_team_id,
            &self.apns_topic,
        ) {
            (None, None, None, None) => Ok(None),
            (Some(path), Some(key_id), Some(team_id), Some(topic)) => Ok(Some((
                path.clone(),
                key_id.clone(),
                team_id.clone(),
                topic.clone(),
            ))),
            _ => {
                let missing: Vec<&str> = [
                    ("APNS_KEY_PATH", self.apns_key_path.is_none()),
                    ("APNS_KEY_ID", self.apns_key_id.is_none()),
                    ("APNS_TEAM_ID", self.apns_team_id.is_none()),
                    ("APNS_TOPIC", self.apns_topic.is_none()),
                ]
                .into_iter()
                .filter_map(|(name, absent)| absent.then_some(name))
                .collect();
                Err(ConfigError::invalid(
                    missing[0],
                    format!(
                        "APNs needs all of its settings; missing {}",
                        missing.join(", ")
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
// figment's Jail API fixes the closure's (large) error type.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[test]
    fn blank_apns_settings_mean_pushes_are_logged() {
        figment::Jail::expect_with(|jail| {
            for var in ["APNS_KEY_PATH", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC"] {
                jail.set_env(var, "");
            }
            let config = Config::load(None).expect("blank APNs settings load");
            let provider = config.apns_provider().expect("a provider");
            assert_eq!(provider.name(), "log");
            Ok(())
        });
    }

    #[test]
    fn a_vapid_key_needs_its_subject_and_a_valid_key() {
        figment::Jail::expect_with(|jail| {
            let (private, public) = VapidKey::generate();
            jail.set_env("NOTIFIER_VAPID_PRIVATE_KEY", &private);
            let err = Config::load(None).expect_err("no subject");
            assert!(err.to_string().contains("NOTIFIER_VAPID_SUBJECT"), "{err}");
            jail.set_env("NOTIFIER_VAPID_SUBJECT", "mailto:ops@example.com");
            let config = Config::load(None).expect("loads");
            assert_eq!(config.vapid_public_key().expect("key"), Some(public));
            jail.set_env("NOTIFIER_VAPID_PRIVATE_KEY", "bm90IGEga2V5");
            let err = Config::load(None).expect_err("bad key");
            assert!(
                err.to_string().contains("NOTIFIER_VAPID_PRIVATE_KEY"),
                "{err}"
            );
            assert!(!err.to_string().contains("bm90IGEga2V5"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn an_fcm_key_file_is_read_at_load_and_a_blank_path_is_unset() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("NOTIFIER_FCM_SERVICE_ACCOUNT", "");
            let config = Config::load(None).expect("blank loads");
            assert_eq!(config.fcm_provider().expect("a provider").name(), "log");
            jail.create_file("fcm.json", r#"{"project_id": "p"}"#)?;
            jail.set_env("NOTIFIER_FCM_SERVICE_ACCOUNT", "fcm.json");
            let err = Config::load(None).expect_err("not a key file");
            assert!(
                err.to_string().contains("NOTIFIER_FCM_SERVICE_ACCOUNT"),
                "{err}"
            );
            jail.set_env("NOTIFIER_FCM_SERVICE_ACCOUNT", "");
            jail.set_env("NOTIFIER_FCM_BASE_URL", "fcm.googleapis.com");
            let err = Config::load(None).expect_err("not a URL");
            assert!(err.to_string().contains("NOTIFIER_FCM_BASE_URL"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn some_apns_settings_without_the_others_are_refused() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("APNS_KEY_ID", "ABC123");
            jail.set_env("APNS_TOPIC", " ");
            let err = Config::load(None).expect_err("incomplete APNs settings");
            let message = err.to_string();
            assert!(message.contains("APNS_KEY_PATH"), "{message}");
            assert!(message.contains("APNS_TOPIC"), "{message}");
            Ok(())
        });
    }

    /// The store and broker settings are checked the same way in both
    /// services: one section, one validation.
    #[test]
    fn a_store_uri_of_another_scheme_is_refused_as_ingest_refuses_it() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("MONGODB_URI", "http://127.0.0.1:27017");
            let err = Config::load(None).expect_err("not a MongoDB URI");
            assert!(err.to_string().contains("MONGODB_URI"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn the_shared_settings_are_read_under_the_notifiers_prefix() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("NOTIFIER_QUEUE_PREFIX", "staging");
            jail.set_env("NOTIFIER_STORE_TIMEOUT_MS", "750");
            let config = Config::load(None).expect("loads");
            assert_eq!(config.backend.queue_prefix, "staging");
            assert_eq!(config.backend.store_timeout().as_millis(), 750);
            Ok(())
        });
    }

    /// `config.default.toml` is the reference operators read: every setting
    /// is written there, under a comment, so the file cannot drift from the
    /// struct.
    #[test]
    fn the_defaults_file_writes_and_describes_every_setting() {
        let gaps = common::config::service_reference_gaps::<Config>(DEFAULTS);
        assert!(gaps.is_empty(), "notifier/config.default.toml: {gaps:#?}");
    }

    #[test]
    fn every_setting_has_its_variable() {
        let vars = Config::environment_variables();
        for var in [
            "NOTIFIER_LISTEN",
            "NOTIFIER_PREFETCH",
            "NOTIFIER_DATA_DIR",
            "NOTIFIER_BROKER_TIMEOUT_MS",
            "AMQP_URL",
            "MONGODB_URI",
            "APNS_TOPIC",
            "NOTIFIER_FCM_SERVICE_ACCOUNT",
            "NOTIFIER_FCM_BASE_URL",
        ] {
            assert!(vars.iter().any(|v| v == var), "{var} in {vars:?}");
        }
        assert!(!vars.iter().any(|v| v == "NOTIFIER_AMQP_URL"), "{vars:?}");
    }
}

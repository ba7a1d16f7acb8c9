//! Configuration loading shared by both services: defaults from TOML files
//! shipped with the binary (the [`backend`] section's, then the service's),
//! then an optional TOML file of the operator's, then environment variables.
//! Errors name the setting and the variable. The defaults files are also the
//! configuration reference operators read ([`reference`] keeps them whole).

mod backend;
mod reference;

use std::{collections::BTreeSet, fmt, path::Path};

use figment::{
    Figment, Provider as _,
    providers::{Env, Format as _, Toml},
};
use serde::{Deserialize, de::DeserializeOwned};
use serde_aux::serde_introspection::serde_introspect;

pub use backend::Backend;
pub use reference::{backend_reference_gaps, service_reference_gaps};

/// A configuration value that must never appear in logs or debug output.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A setting that could not be read or does not make sense.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

impl ConfigError {
    /// An invalid value for `key`, naming the environment variable that sets it.
    pub fn invalid(env_var: &str, problem: impl fmt::Display) -> Self {
        Self(format!("{env_var}: {problem}"))
    }
}

/// A service's settings: its own, read by serde, and the shared [`Backend`]
/// section it carries (marked `#[serde(skip)]`; [`load`] fills it in from
/// the same keys).
pub trait ServiceSettings: DeserializeOwned {
    fn backend_mut(&mut self) -> &mut Backend;
}

/// Where a service's settings come from.
pub struct Sources<'a> {
    /// The service's defaults file, compiled into the binary; read after
    /// the backend section's, so it may override one of them.
    pub defaults: &'a str,
    /// An operator's TOML file, if one was given.
    pub file: Option<&'a Path>,
    /// Prefix of the service's own variables (`INGEST_`): `INGEST_LISTEN` sets `listen`.
    pub env_prefix: &'a str,
    /// The service's variables read without a prefix (`APNS_TOPIC` sets
    /// `apns_topic`), besides the backend's (`MONGODB_URI`, `AMQP_URL`, …).
    pub unprefixed: &'a [&'a str],
}

impl Sources<'_> {
    fn is_unprefixed(&self, var: &str) -> bool {
        self.unprefixed.contains(&var) || backend::UNPREFIXED.contains(&var)
    }

    /// The environment variable that sets `key`.
    pub fn variable(&self, key: &str) -> String {
        let var = key.to_uppercase();
        if backend::NOTIFIER_SHARED.contains(&key) {
            return format!("NOTIFIER_{var}");
        }
        if key == backend::SECRETS_KEY {
            return format!("TOCSIN_{var}");
        }
        if self.is_unprefixed(&var) {
            var
        } else {
            format!("{}{var}", self.env_prefix)
        }
    }

    /// Every environment variable read for `T`'s settings and the backend
    /// section, plus the one naming the operator's file: what a deployment
    /// may set.
    pub fn variables<T: ServiceSettings>(&self) -> Vec<String> {
        let mut vars = vec![format!("{}CONFIG", self.env_prefix)];
        vars.extend(known_keys::<T>().iter().map(|key| self.variable(key)));
        vars
    }
}

/// Every setting `T` and the backend section read.
fn known_keys<T: ServiceSettings>() -> BTreeSet<&'static str> {
    serde_introspect::<T>()
        .iter()
        .chain(serde_introspect::<Backend>())
        .copied()
        .collect()
}

/// Reads settings from `sources`, later sources overriding earlier ones. A
/// setting neither `T` nor the backend section knows is refused (a typo in
/// a variable's name must not pass for a default).
pub fn load<T: ServiceSettings>(sources: &Sources<'_>) -> Result<T, ConfigError> {
    let mut figment =
        Figment::from(Toml::string(backend::DEFAULTS)).merge(Toml::string(sources.defaults));
    if let Some(file) = sources.file {
        if !file.is_file() {
            return Err(ConfigError(format!(
                "configuration file {} does not exist",
                file.display()
            )));
        }
        figment = figment.merge(Toml::file(file));
    }
    // `<PREFIX>CONFIG` names the operator's file; it is not a setting.
    let unprefixed: Vec<&str> = sources
        .unprefixed
        .iter()
        .copied()
        .chain(backend::UNPREFIXED)
        .collect();
    // The destinations' settings go by the notifier's names in both
    // services, and the secrets key by its own: under another service's
    // prefix, one is a mistake worth naming, not a setting to drop.
    for key in backend::NOTIFIER_SHARED
        .iter()
        .chain(&[backend::SECRETS_KEY])
    {
        let var = format!("{}{}", sources.env_prefix, key.to_uppercase());
        if sources.env_prefix != "NOTIFIER_" && std::env::var_os(&var).is_some() {
            return Err(ConfigError(format!(
                "{var}: there is no such setting; both services read {}",
                sources.variable(key)
            )));
        }
    }
    let own = |key: &figment::value::UncasedStr| {
        key != "config"
            && !backend::NOTIFIER_SHARED.iter().any(|s| key == *s)
            && key != backend::SECRETS_KEY
    };
    figment = figment
        .merge(Env::prefixed(sources.env_prefix).filter(own))
        .merge(Env::prefixed("NOTIFIER_").only(&backend::NOTIFIER_SHARED))
        .merge(Env::prefixed("TOCSIN_").only(&[backend::SECRETS_KEY]))
        .merge(Env::raw().only(&unprefixed));
    let known = known_keys::<T>();
    let data = figment.data().map_err(|e| describe(e, sources))?;
    if let Some(unknown) = data
        .values()
        .flat_map(|dict| dict.keys())
        .find(|key| !known.contains(key.as_str()))
    {
        return Err(ConfigError(format!(
            "setting `{unknown}` ({}): there is no such setting",
            sources.variable(unknown)
        )));
    }
    extract(&figment, |e| describe(e, sources))
}

/// Reads only a defaults file: the settings as shipped, for tests and tools.
/// A service's [`Backend`] is the shipped one, with the service's own
/// overrides of it.
pub fn parse_defaults<T: DeserializeOwned>(defaults: &str) -> Result<T, ConfigError> {
    Figment::from(Toml::string(defaults))
        .extract()
        .map_err(|e| ConfigError(e.to_string()))
}

/// A service's settings as shipped: its defaults file over the backend's.
pub fn service_defaults<T: ServiceSettings>(defaults: &str) -> Result<T, ConfigError> {
    let figment = Figment::from(Toml::string(backend::DEFAULTS)).merge(Toml::string(defaults));
    extract(&figment, |e| ConfigError(e.to_string()))
}

/// The service's own settings, with the backend section read from the same
/// keys filled in; `error` says what a bad value means to the reader.
fn extract<T: ServiceSettings>(
    figment: &Figment,
    error: impl Fn(figment::Error) -> ConfigError,
) -> Result<T, ConfigError> {
    let backend: Backend = figment.extract().map_err(&error)?;
    let mut settings: T = figment.extract().map_err(&error)?;
    *settings.backend_mut() = backend;
    Ok(settings)
}

fn describe(error: figment::Error, sources: &Sources<'_>) -> ConfigError {
    let messages = error.into_iter().map(|e| {
        let key = e.path.join(".");
        if key.is_empty() {
            return e.kind.to_string();
        }
        let var = sources.variable(&key);
        format!("setting `{key}` ({var}): {}", e.kind)
    });
    ConfigError(messages.collect::<Vec<_>>().join("; "))
}

#[cfg(test)]
// figment's Jail API fixes the closure's (large) error type.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Demo {
        port: u16,
        name: String,
        #[serde(skip)]
        backend: Backend,
    }

    impl ServiceSettings for Demo {
        fn backend_mut(&mut self) -> &mut Backend {
            &mut self.backend
        }
    }

    fn sources() -> Sources<'static> {
        Sources {
            defaults: "port = 1\nname = \"x\"",
            file: None,
            env_prefix: "DEMO_",
            unprefixed: &[],
        }
    }

    #[test]
    fn a_bad_value_is_reported_with_its_setting_and_variable() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DEMO_PORT", "not-a-number");
            let err = load::<Demo>(&sources()).expect_err("must fail");
            assert!(err.to_string().contains("DEMO_PORT"), "{err}");
            assert!(err.to_string().contains("port"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn environment_overrides_defaults_for_own_and_backend_settings() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DEMO_NAME", "from-env");
            jail.set_env("DEMO_STORE_TIMEOUT_MS", "250");
            jail.set_env("AMQP_URL", "amqp://127.0.0.1:5672");
            let demo = load::<Demo>(&sources()).expect("loads");
            assert_eq!((demo.port, demo.name.as_str()), (1, "from-env"));
            assert_eq!(demo.backend.store_timeout_ms.get(), 250);
            assert_eq!(demo.backend.amqp_url(), Some("amqp://127.0.0.1:5672"));
            assert_eq!(demo.backend.queue_prefix, "tocsin", "a shipped default");
            Ok(())
        });
    }

    #[test]
    fn every_service_reads_the_destinations_settings_by_the_notifiers_names() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("NOTIFIER_DESTINATIONS_ALLOW", "127.0.0.1,ntfy.internal");
            jail.set_env("NOTIFIER_SMTP_HOST", "smtp.internal");
            jail.set_env("TOCSIN_SECRETS_KEY", "a2V5");
            let demo = load::<Demo>(&sources()).expect("loads");
            assert_eq!(demo.backend.destinations_allow, "127.0.0.1,ntfy.internal");
            assert_eq!(demo.backend.smtp_host.as_deref(), Some("smtp.internal"));
            assert_eq!(
                demo.backend.secrets_key.as_ref().map(Secret::expose),
                Some("a2V5")
            );
            assert_eq!(sources().variable("smtp_host"), "NOTIFIER_SMTP_HOST");
            assert_eq!(sources().variable("secrets_key"), "TOCSIN_SECRETS_KEY");
            Ok(())
        });
    }

    #[test]
    fn a_destination_setting_under_the_services_own_prefix_is_refused() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DEMO_SMTP_HOST", "smtp.internal");
            let err = load::<Demo>(&sources()).expect_err("must fail");
            assert!(err.to_string().contains("DEMO_SMTP_HOST"), "{err}");
            assert!(err.to_string().contains("NOTIFIER_SMTP_HOST"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn a_zero_deadline_is_refused_with_its_variable() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DEMO_BROKER_TIMEOUT_MS", "0");
            let err = load::<Demo>(&sources()).expect_err("must fail");
            assert!(err.to_string().contains("DEMO_BROKER_TIMEOUT_MS"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn an_unknown_setting_is_refused_with_its_variable() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DEMO_STORE_TIMEOUT", "5");
            let err = load::<Demo>(&sources()).expect_err("must fail");
            assert!(err.to_string().contains("DEMO_STORE_TIMEOUT"), "{err}");
            assert!(err.to_string().contains("no such setting"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn variables_follow_the_prefix_and_the_unprefixed_names() {
        let sources = Sources {
            unprefixed: &["NAME"],
            ..sources()
        };
        let vars = sources.variables::<Demo>();
        for var in [
            "DEMO_CONFIG",
            "DEMO_PORT",
            "NAME",
            "MONGODB_URI",
            "AMQP_URL",
            "DEMO_DATA_DIR",
            "DEMO_QUEUE_PREFIX",
        ] {
            assert!(vars.iter().any(|v| v == var), "{var} in {vars:?}");
        }
        assert!(!vars.iter().any(|v| v == "DEMO_BACKEND"), "{vars:?}");
    }

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("mongodb://user:hunter2@host");
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}

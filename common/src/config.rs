//! Configuration loading shared by both services: defaults from a TOML file
//! shipped with the binary, then an optional TOML file of the operator's,
//! then environment variables. Errors name the setting and the variable.

use std::{fmt, path::Path};

use figment::{
    Figment,
    providers::{Env, Format as _, Toml},
};
use serde::{Deserialize, de::DeserializeOwned};

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

/// Where a service's settings come from.
pub struct Sources<'a> {
    /// The defaults file, compiled into the binary.
    pub defaults: &'a str,
    /// An operator's TOML file, if one was given.
    pub file: Option<&'a Path>,
    /// Prefix of the service's own variables (`INGEST_`): `INGEST_LISTEN` sets `listen`.
    pub env_prefix: &'a str,
    /// Variables read without a prefix (`MONGODB_URI` sets `mongodb_uri`).
    pub unprefixed: &'a [&'a str],
}

impl Sources<'_> {
    /// The environment variable that sets `key`.
    pub fn variable(&self, key: &str) -> String {
        let var = key.to_uppercase();
        if self.unprefixed.contains(&var.as_str()) {
            var
        } else {
            format!("{}{var}", self.env_prefix)
        }
    }

    /// Every environment variable read for `T`'s settings, plus the one
    /// naming the operator's file: what a deployment may set.
    pub fn variables<T: Deserialize<'static>>(&self) -> Vec<String> {
        let mut vars = vec![format!("{}CONFIG", self.env_prefix)];
        vars.extend(
            serde_aux::serde_introspection::serde_introspect::<T>()
                .iter()
                .map(|field| self.variable(field)),
        );
        vars
    }
}

/// Reads settings from `sources`, later sources overriding earlier ones.
pub fn load<T: DeserializeOwned>(sources: &Sources<'_>) -> Result<T, ConfigError> {
    let mut figment = Figment::from(Toml::string(sources.defaults));
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
    figment = figment
        .merge(Env::prefixed(sources.env_prefix).filter(|key| key != "config"))
        .merge(Env::raw().only(sources.unprefixed));
    figment.extract().map_err(|e| describe(e, sources))
}

/// Reads only the defaults file: the settings as shipped, for tests and tools.
pub fn parse_defaults<T: DeserializeOwned>(defaults: &str) -> Result<T, ConfigError> {
    Figment::from(Toml::string(defaults))
        .extract()
        .map_err(|e| ConfigError(e.to_string()))
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
    }

    #[test]
    fn a_bad_value_is_reported_with_its_setting_and_variable() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DEMO_PORT", "not-a-number");
            let sources = Sources {
                defaults: "port = 1\nname = \"x\"",
                file: None,
                env_prefix: "DEMO_",
                unprefixed: &[],
            };
            let err = load::<Demo>(&sources).expect_err("must fail");
            assert!(err.to_string().contains("DEMO_PORT"), "{err}");
            assert!(err.to_string().contains("port"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn environment_overrides_defaults() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DEMO_NAME", "from-env");
            let sources = Sources {
                defaults: "port = 1\nname = \"x\"",
                file: None,
                env_prefix: "DEMO_",
                unprefixed: &[],
            };
            let demo = load::<Demo>(&sources).expect("loads");
            assert_eq!((demo.port, demo.name.as_str()), (1, "from-env"));
            Ok(())
        });
    }

    #[test]
    fn variables_follow_the_prefix_and_the_unprefixed_names() {
        let sources = Sources {
            defaults: "",
            file: None,
            env_prefix: "DEMO_",
            unprefixed: &["NAME"],
        };
        assert_eq!(
            sources.variables::<Demo>(),
            ["DEMO_CONFIG", "DEMO_PORT", "NAME"]
        );
    }

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("mongodb://user:hunter2@host");
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}

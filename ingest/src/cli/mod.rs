//! The command line: `ingest` (or `ingest serve`) runs the service as the
//! binary composes it; `ingest keys create|list|revoke` ([`keys`]) and
//! `ingest admin create|list|revoke` ([`admins`]) administer API keys and
//! admin tokens in whichever store the configuration selects, writing the
//! same records as the admin API, and the audit log.

mod admins;
mod keys;

pub use keys::{create_key, create_key_with_scopes, new_key};

use std::{future::Future, path::PathBuf, process::ExitCode, sync::Arc};

use clap::{
    Parser, Subcommand,
    builder::{PossibleValuesParser, TypedValueParser},
};
use common::store::{KeyScope, Store};
use uuid::Uuid;

use crate::Config;

#[derive(Debug, Parser)]
#[command(name = "ingest", version, about = "Tocsin's event ingest API")]
pub struct Cli {
    /// A TOML file overriding the defaults (environment variables override both).
    #[arg(long, global = true, env = "INGEST_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP API (the default).
    Serve,
    /// Create, list and revoke API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Create, list and revoke admin tokens (for the admin API and the
    /// dashboard).
    #[command(subcommand)]
    Admin(admins::AdminCommand),
    /// Ask the running service's /readyz; exit 0 when it is ready (for
    /// container health checks: the image has no curl).
    Healthcheck,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Create a key and print it, alone, on stdout. It is shown only once.
    Create {
        /// Organization the key belongs to.
        #[arg(long, value_parser = parse_name)]
        org: String,
        /// Project the key belongs to; everything it writes is scoped to it.
        #[arg(long, value_parser = parse_name)]
        project: String,
        /// A label to recognise the key by.
        #[arg(long)]
        name: Option<String>,
        /// Requests per minute for this key, instead of the service default.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        rate_limit: Option<u32>,
        /// What the key may do, comma-separated. A key for a phone or a
        /// browser that only registers its device needs only devices:write.
        #[arg(
            long,
            value_delimiter = ',',
            value_parser = scope_parser(),
            default_value = ALL_SCOPES,
        )]
        scopes: Vec<KeyScope>,
    },
    /// List every key (never the secrets).
    List {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by id; running servers refuse it (401) within a second.
    Revoke {
        /// The key's id, as shown by `keys list`.
        id: Uuid,
    },
}

/// Organization and project names: 1 to 100 letters, digits, `-`, `_` or `.`.
fn parse_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 100
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(s.to_owned())
    } else {
        Err("use 1 to 100 letters, digits, '-', '_' or '.'".into())
    }
}

/// Every scope, as `--scopes` takes them (and `--help` shows the default).
const ALL_SCOPES: &str = "events:write,events:read,devices:write,devices:read";

/// Scope names, refused with the list of valid ones when unknown.
fn scope_parser() -> impl TypedValueParser<Value = KeyScope> {
    PossibleValuesParser::new(KeyScope::ALL.map(KeyScope::as_str))
        .map(|name| KeyScope::parse(&name).expect("clap accepted only known names"))
}

/// Parses the command line and runs it, serving with `serve` (the binary's
/// composition of the service); the exit code says how it went.
pub async fn main<S, F>(serve: S) -> ExitCode
where
    S: FnOnce(Config) -> F,
    F: Future<Output = anyhow::Result<()>>,
{
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("ingest: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            common::telemetry::init(config.log_format);
            serve(config).await
        }
        Command::Keys(command) => match open_store(&config).await {
            Ok(store) => keys::run(store.as_ref(), command).await,
            Err(e) => Err(e),
        },
        Command::Admin(command) => match open_store(&config).await {
            Ok(store) => admins::run(store.as_ref(), command).await,
            Err(e) => Err(e),
        },
        Command::Healthcheck => config
            .listen_addr()
            .map_err(Into::into)
            .and_then(common::probe::ready),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "ingest failed");
            eprintln!("ingest: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Opens the store, saying on stderr which one, and whether it was just
/// created: a key made in a store the server does not use (another working
/// directory, a missing `MONGODB_URI`) is noticed at once, not at its first
/// 401. stdout stays for the command's output (`keys create` prints the key
/// alone there, for scripts).
async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let store_config = config.backend.store();
    // Decided before opening, which creates the file.
    let new = store_config.is_new();
    let store = config.backend.open_store().await?;
    // Described after opening, so the path is the created file's canonical one.
    if new {
        eprintln!("ingest: created a new {}", store_config.describe());
    } else {
        eprintln!("ingest: using the {}", store_config.describe());
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes_of(args: &[&str]) -> Vec<KeyScope> {
        let base = ["ingest", "keys", "create", "--org", "a", "--project", "b"];
        let cli = Cli::try_parse_from(base.iter().chain(args)).expect("parses");
        match cli.command {
            Some(Command::Keys(KeysCommand::Create { scopes, .. })) => scopes,
            other => panic!("not keys create: {other:?}"),
        }
    }

    #[test]
    fn a_new_key_has_every_scope_unless_told_otherwise() {
        assert_eq!(scopes_of(&[]), KeyScope::ALL.to_vec());
        assert_eq!(
            scopes_of(&["--scopes", "devices:write"]),
            vec![KeyScope::DevicesWrite]
        );
        assert_eq!(
            scopes_of(&["--scopes", "devices:read,events:write"]),
            vec![KeyScope::DevicesRead, KeyScope::EventsWrite]
        );
    }
}

//! The command line: `ingest` (or `ingest serve`) runs the service as the
//! binary composes it; `ingest keys create|list|revoke` administers API keys
//! in whichever store the configuration selects, standing in for a
//! dashboard.

use std::{future::Future, path::PathBuf, process::ExitCode, sync::Arc};

use anyhow::Context as _;
use clap::{
    Parser, Subcommand,
    builder::{PossibleValuesParser, TypedValueParser},
};
use common::{
    keys::{display_prefix, generate_secret, hash_secret},
    store::{ApiKey, KeyScope, Scope, Store},
};
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
    /// Revoke a key by id; requests with it get 401 from then on.
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
        Command::Keys(command) => keys(config, command).await,
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

async fn keys(config: Config, command: KeysCommand) -> anyhow::Result<()> {
    let store = open_store(&config).await?;
    match command {
        KeysCommand::Create {
            org,
            project,
            name,
            rate_limit,
            scopes,
        } => {
            let secret = create_key_with_scopes(
                store.as_ref(),
                Scope::new(org, project),
                name,
                rate_limit,
                &scopes,
            )
            .await?;
            println!("{secret}");
        }
        KeysCommand::List { json } => {
            let keys = store.list_api_keys().await?;
            if json {
                for k in &keys {
                    println!("{}", key_json(k));
                }
            } else {
                print_table(&keys);
            }
        }
        KeysCommand::Revoke { id } => {
            if store.revoke_api_key(id, common::time::now()).await? {
                eprintln!("revoked {id}");
            } else {
                anyhow::bail!("no active key with id {id}");
            }
        }
    }
    Ok(())
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
    let store = common::store::open(&store_config, config.backend.store_timeout())
        .await
        .with_context(|| format!("opening the {}", store_config.describe()))?;
    // Described after opening, so the path is the created file's canonical one.
    if new {
        eprintln!("ingest: created a new {}", store_config.describe());
    } else {
        eprintln!("ingest: using the {}", store_config.describe());
    }
    Ok(store)
}

/// Creates and stores a key with every scope; returns the secret, which is
/// not kept anywhere.
pub async fn create_key(
    store: &dyn Store,
    scope: Scope,
    name: Option<String>,
    rate_limit: Option<u32>,
) -> anyhow::Result<String> {
    create_key_with_scopes(store, scope, name, rate_limit, &KeyScope::ALL).await
}

/// Creates and stores a key that may do only what `scopes` name.
pub async fn create_key_with_scopes(
    store: &dyn Store,
    scope: Scope,
    name: Option<String>,
    rate_limit: Option<u32>,
    scopes: &[KeyScope],
) -> anyhow::Result<String> {
    let secret = generate_secret();
    let key = ApiKey {
        id: Uuid::now_v7(),
        name,
        scope,
        hash: hash_secret(&secret),
        prefix: display_prefix(&secret),
        rate_limit,
        scopes: KeyScope::canonical(scopes.iter().copied()),
        created_at: common::time::now(),
        revoked_at: None,
    };
    store.insert_api_key(&key).await?;
    Ok(secret)
}

fn key_json(k: &ApiKey) -> serde_json::Value {
    serde_json::json!({
        "id": k.id,
        "name": k.name,
        "org": k.scope.org,
        "project": k.scope.project,
        "prefix": k.prefix,
        "rateLimit": k.rate_limit,
        "scopes": KeyScope::names(&k.scopes),
        "createdAt": k.created_at,
        "revokedAt": k.revoked_at,
    })
}

/// The table `keys list` prints; SCOPES comes last, as its width varies.
fn print_table(keys: &[ApiKey]) {
    println!(
        "{:<36}  {:<16}  {:<16}  {:<16}  {:<13}  {:>10}  {:<7}  SCOPES",
        "ID", "NAME", "ORG", "PROJECT", "PREFIX", "RATE/MIN", "STATUS"
    );
    for k in keys {
        println!(
            "{:<36}  {:<16}  {:<16}  {:<16}  {:<13}  {:>10}  {:<7}  {}",
            k.id,
            k.name.as_deref().unwrap_or("-"),
            k.scope.org,
            k.scope.project,
            k.prefix,
            k.rate_limit
                .map_or_else(|| "default".to_owned(), |n| n.to_string()),
            if k.is_active() { "active" } else { "revoked" },
            KeyScope::names(&k.scopes).join(","),
        );
    }
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

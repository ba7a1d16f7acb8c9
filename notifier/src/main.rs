//! The `notifier` binary: consume notify jobs from RabbitMQ and push them
//! (the library composes the process: [`notifier::serve`]). Run as many as
//! needed; they share the queue.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use notifier::Config;

#[derive(Debug, Parser)]
#[command(
    name = "notifier",
    version,
    about = "Tocsin's push notification worker"
)]
struct Cli {
    /// A TOML file overriding the defaults (environment variables override both).
    #[arg(long, global = true, env = "NOTIFIER_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Consume jobs and send pushes (the default).
    Run,
    /// Ask the running notifier's /readyz; exit 0 when it is ready (for
    /// container health checks: the image has no curl).
    Healthcheck,
    /// VAPID keys for Web Push.
    Vapid {
        #[command(subcommand)]
        command: VapidCommand,
    },
}

#[derive(Debug, Subcommand)]
enum VapidCommand {
    /// Print a new VAPID key pair, as the settings that take it.
    Generate,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Vapid {
        command: VapidCommand::Generate,
    }) = cli.command
    {
        // Needs no settings: it only makes a key.
        let (private, public) = notifier::push::webpush::vapid::VapidKey::generate();
        println!("NOTIFIER_VAPID_PRIVATE_KEY={private}");
        println!("# The public key: browsers subscribe with it; ingest serves it (a separate");
        println!("# ingest reads it from INGEST_VAPID_PUBLIC_KEY, embedded mode derives it).");
        println!("INGEST_VAPID_PUBLIC_KEY={public}");
        return ExitCode::SUCCESS;
    }
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("notifier: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Command::Healthcheck) = cli.command {
        let checked = config
            .listen_addr()
            .map_err(Into::into)
            .and_then(common::probe::ready);
        return match checked {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("notifier: not ready: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    common::telemetry::init(config.log_format);
    match notifier::serve(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "notifier failed");
            eprintln!("notifier: {e:#}");
            ExitCode::FAILURE
        }
    }
}

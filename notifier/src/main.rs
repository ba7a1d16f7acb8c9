//! The `notifier` binary: consume notify jobs from RabbitMQ and push them.
//! Run as many as needed; they share the queue.

use std::{path::PathBuf, process::ExitCode};

use clap::Parser;
use notifier::Config;

#[derive(Debug, Parser)]
#[command(
    name = "notifier",
    version,
    about = "Tocsin's push notification worker"
)]
struct Cli {
    /// A TOML file overriding the defaults (environment variables override both).
    #[arg(long, env = "NOTIFIER_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("notifier: {e}");
            return ExitCode::from(2);
        }
    };
    common::telemetry::init(config.log_format);
    match run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "notifier failed");
            eprintln!("notifier: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    let store = common::store::open(
        &config.store(),
        std::time::Duration::from_millis(config.store_timeout_ms),
    )
    .await?;
    let provider = config.push_provider()?;
    let running = notifier::start(&config, store, provider)?;
    tracing::info!("notifier started");
    shutdown_signal().await;
    tracing::info!("stopping: finishing the jobs in hand");
    running.shutdown().await;
    tracing::info!("notifier stopped");
    Ok(())
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = term => {},
    }
}

//! The `ingest` binary: serve the API, or administer API keys. The service
//! is composed by the library ([`ingest::compose`]); the binary adds the one
//! part the library cannot name, the notifier of the embedded mode.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    ingest::cli::main(|config| {
        ingest::compose::serve(
            config,
            notifier::Embedded::from_env,
            notifier::destination_tester,
        )
    })
    .await
}

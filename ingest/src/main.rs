//! The `ingest` binary: serve the API, or administer API keys.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    ingest::cli::main().await
}

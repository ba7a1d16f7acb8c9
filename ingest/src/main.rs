//! The `ingest` binary: serve the API, or administer API keys. [`compose`]
//! is where the service's parts are put together.

mod compose;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    ingest::cli::main(compose::serve).await
}

//! The `ingest` binary: serve the API, or administer API keys. [`compose`]
//! is where the service's parts are put together.

mod compose;

/// mimalloc, not glibc's malloc: every request allocates and frees many
/// small buffers across the runtime's threads (hyper's, poem's, serde's,
/// the store's), and glibc's arenas spent about a tenth of the server's CPU
/// on them under load (README, "Performance").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    ingest::cli::main(compose::serve).await
}

//! How soon a revoked API key is refused when another process revoked it
//! (the CLI, another replica): ingest keeps what the store said about a key
//! for at most [`REVOCATION_BOUND`] (ingest/src/key_cache.rs, docs/api.md
//! "Authentication and scopes"). Checked by polling, never by sleeping
//! through the bound.

use std::time::{Duration, Instant};

/// The documented bound.
pub const REVOCATION_BOUND: Duration = Duration::from_secs(1);

/// Sends requests with a key revoked at `revoked` (a moment after the
/// revocation was committed) until one is refused with 401. Fails the test
/// when a request sent more than [`REVOCATION_BOUND`] after `revoked` is
/// still accepted (a request sent earlier may be: the bound allows it), or
/// when `send` answers anything but 201 or 401.
pub async fn refused_within_bound(revoked: Instant, mut send: impl AsyncFnMut() -> u16) {
    loop {
        let sent = Instant::now();
        match send().await {
            401 => return,
            201 => {
                let late = sent.saturating_duration_since(revoked);
                assert!(
                    late <= REVOCATION_BOUND,
                    "a request sent {late:?} after the revocation was accepted"
                );
            }
            other => panic!("a request with a revoked key got {other}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

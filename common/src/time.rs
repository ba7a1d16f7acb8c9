//! Timestamps as the stores keep them, and the clock that tells the time.

use chrono::{DateTime, SubsecRound, Utc};

/// The current time at millisecond precision, the finest every store keeps,
/// so a record reads back exactly as it was written.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

/// Where a component reads the time from. Production uses the system clock
/// (leases are compared across processes, so it must be wall-clock time);
/// tests of time-driven logic (leases, backoff) follow tokio's clock, which
/// `tokio::time::pause` freezes and `advance` moves, so they run in
/// virtual time without sleeping.
#[derive(Debug, Clone, Copy, Default)]
pub enum Clock {
    #[default]
    System,
    /// Wall-clock time as of `start`, moved on by tokio's clock since `at`.
    Tokio {
        start: DateTime<Utc>,
        at: tokio::time::Instant,
    },
}

impl Clock {
    /// A clock that follows tokio's from now on (pausable in tests).
    pub fn tokio() -> Self {
        Self::Tokio {
            start: now(),
            at: tokio::time::Instant::now(),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        match self {
            Self::System => now(),
            Self::Tokio { start, at } => {
                let elapsed = chrono::Duration::from_std(at.elapsed()).unwrap_or_default();
                (*start + elapsed).trunc_subsecs(3)
            }
        }
    }
}

//! Timestamps as the stores keep them.

use chrono::{DateTime, SubsecRound, Utc};

/// The current time at millisecond precision, the finest every store keeps,
/// so a record reads back exactly as it was written.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

//! What a device's rules held back, and the push it goes out in: one
//! summary per device per quiet-hours window, one digest per device per
//! burst window. Each is a record of its own ([`Summary`]) that gathers the
//! events held for it, and a burst window is a counter per device
//! ([`Admission`]). The rule every store applies:
//!
//! - An alert held for a window joins that window's summary, which is made
//!   on the first hold (its id is a digest of the device, the reason and
//!   when the window ends, so two notifiers holding at once make one).
//!   Joining is idempotent (a redelivered job does not count an event
//!   twice) and happens only while the summary is `open`: once it is
//!   closed, the alert is not held but sent ([`Holding::Closed`]), so
//!   nothing held misses its summary.
//! - When the window ends, the relay publishes the summary's job; the
//!   notifier closes it (no alert joins after that), sends it as a push
//!   through the same leases as any other (its delivery is keyed by the
//!   summary's id), and marks it `done`, with its id on the held
//!   deliveries it summarised.

use chrono::{DateTime, Utc};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

use super::model::Scope;
use crate::rules::HoldReason;

/// The held alerts of one device for one window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// [`Summary::id_for`] its device, reason and end; also the key of the
    /// delivery its push is claimed under.
    pub id: Uuid,
    pub scope: Scope,
    pub device_id: Uuid,
    pub reason: HoldReason,
    /// When the window ends and the summary goes out.
    pub due_at: DateTime<Utc>,
    /// The events held for it, in the order they were held.
    pub events: Vec<Uuid>,
    pub state: SummaryState,
}

impl Summary {
    /// The id of the summary of `device`'s window of `reason` that ends at
    /// `due_at`: the same in every process (a UUIDv8 of their digest).
    pub fn id_for(
        scope: &Scope,
        device_id: Uuid,
        reason: HoldReason,
        due_at: DateTime<Utc>,
    ) -> Uuid {
        let digest = Sha256::new()
            .chain_update(scope.org.as_bytes())
            .chain_update([0])
            .chain_update(scope.project.as_bytes())
            .chain_update([0])
            .chain_update(device_id.as_bytes())
            .chain_update(reason.as_str().as_bytes())
            .chain_update(due_at.timestamp_millis().to_be_bytes())
            .finalize();
        let mut bytes = [0; 16];
        bytes.copy_from_slice(&digest[..16]);
        uuid::Builder::from_custom_bytes(bytes).into_uuid()
    }
}

/// Where a summary stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SummaryState {
    /// Its window is running: held alerts join it.
    Open,
    /// Its push is being sent; nothing joins any more.
    Closed,
    /// Sent, or had nothing to send.
    Done,
}

impl SummaryState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::Done => "done",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Open, Self::Closed, Self::Done]
            .into_iter()
            .find(|state| state.as_str() == s)
    }
}

/// The answer to holding an alert for a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// Held: it goes out in this summary.
    Held { summary_id: Uuid },
    /// The window's summary is already going out: send the alert now.
    Closed,
}

/// The answer to an alert asking to reach a device with a burst limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Within the limit (counted): send it.
    Admitted,
    /// Past the limit: hold it for the digest of the window that ends then.
    Over { window_ends: DateTime<Utc> },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_windows_summary_id_is_the_same_everywhere_and_its_own() {
        let scope = Scope::new("acme", "shop");
        let device = Uuid::now_v7();
        let at = DateTime::from_timestamp(1_800_000_000, 0).expect("a time");
        let id = Summary::id_for(&scope, device, HoldReason::QuietHours, at);
        assert_eq!(
            id,
            Summary::id_for(&scope, device, HoldReason::QuietHours, at)
        );
        assert_ne!(id, Summary::id_for(&scope, device, HoldReason::Burst, at));
        let later = at + chrono::Duration::milliseconds(1);
        assert_ne!(
            id,
            Summary::id_for(&scope, device, HoldReason::QuietHours, later)
        );
        assert_ne!(
            id,
            Summary::id_for(&scope, Uuid::now_v7(), HoldReason::QuietHours, at)
        );
        assert_eq!(id.get_version_num(), 8);
    }
}

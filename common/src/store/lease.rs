//! A delivery claim is a lease: the one rule every store applies when a
//! worker asks to send the push of an event to a device.
//!
//! - No record yet: the worker takes it (attempt 1).
//! - `delivered` / `failed`: settled, never sent again.
//! - `sending` with a live lease, or `retrying` before its time: busy until
//!   then; the asker looks again at that instant.
//! - `sending` whose lease ran out (its worker died or hung), or `retrying`
//!   whose time has come: the worker takes it with the next attempt number,
//!   unless `max_attempts` claims were already made, in which case it is
//!   given up (recorded failed). A lapsed `sending` claim is *retaken*: its
//!   push may have reached the provider, so the next may be a repeat (which
//!   the collapse id keeps to one alert on the device).
//!
//! The attempt number doubles as a fencing token: a worker records the
//! outcome only if the latest claim is still its own.

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DeliveryClaim, DeliveryState, Scope};

/// What the store holds about a delivery, as far as claiming goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    pub state: DeliveryState,
    pub attempts: u32,
    pub lease_until: DateTime<Utc>,
}

/// Which delivery a claim is for: the push of an event to a device.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimKey {
    pub scope: Scope,
    pub event_id: Uuid,
    pub device_id: Uuid,
}

/// A worker's request to send one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRequest {
    pub now: DateTime<Utc>,
    /// How long the claim is the worker's.
    pub lease: Duration,
    /// Claims after which a delivery that never settled is given up.
    pub max_attempts: u32,
}

impl ClaimRequest {
    fn lease_until(&self) -> DateTime<Utc> {
        self.now + chrono::Duration::from_std(self.lease).unwrap_or(chrono::Duration::MAX)
    }
}

/// What the store must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    /// Write the claim (state `sending`, `attempts` = `attempt`, the lease),
    /// conditional on the record still being what was read.
    Take {
        attempt: u32,
        lease_until: DateTime<Utc>,
        /// Taken over from a claim that ran out without an outcome.
        retaken: bool,
    },
    /// Record the delivery failed after `attempts` claims, conditionally too.
    GiveUp { attempts: u32 },
    /// Change nothing; answer this.
    Answer(DeliveryClaim),
}

impl Decision {
    /// The answer once the store has applied the decision.
    pub fn claim(self) -> DeliveryClaim {
        match self {
            Self::Take {
                attempt,
                lease_until,
                retaken,
            } => DeliveryClaim::Acquired {
                attempt,
                lease_until,
                retaken,
            },
            Self::GiveUp { attempts } => DeliveryClaim::GaveUp { attempts },
            Self::Answer(claim) => claim,
        }
    }
}

/// Applies the rule to what is held (`None`: no record yet).
pub(super) fn decide(held: Option<Held>, request: &ClaimRequest) -> Decision {
    let Some(held) = held else {
        return Decision::Take {
            attempt: 1,
            lease_until: request.lease_until(),
            retaken: false,
        };
    };
    let open = held.state;
    if open.is_final() {
        return Decision::Answer(DeliveryClaim::Settled(open));
    }
    if request.now < held.lease_until {
        Decision::Answer(DeliveryClaim::Busy {
            until: held.lease_until,
        })
    } else if held.attempts >= request.max_attempts.max(1) {
        Decision::GiveUp {
            attempts: held.attempts,
        }
    } else {
        // A lapsed `sending` claim's push may have gone out (its worker died
        // or stalled after sending, before recording): this one may repeat
        // it. A `retrying` one recorded its failure.
        Decision::Take {
            attempt: held.attempts + 1,
            lease_until: request.lease_until(),
            retaken: open == DeliveryState::Sending,
        }
    }
}

/// The error recorded on a delivery given up by [`Decision::GiveUp`].
pub(super) fn gave_up_reason(attempts: u32) -> String {
    format!("gave up after {attempts} attempts without an outcome (the workers stopped mid-send)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("a valid time")
    }

    fn request(now: i64) -> ClaimRequest {
        ClaimRequest {
            now: at(now),
            lease: Duration::from_secs(30),
            max_attempts: 3,
        }
    }

    fn held(state: DeliveryState, attempts: u32, lease_until: i64) -> Option<Held> {
        Some(Held {
            state,
            attempts,
            lease_until: at(lease_until),
        })
    }

    #[test]
    fn a_fresh_delivery_is_taken_for_the_lease() {
        assert_eq!(
            decide(None, &request(0)),
            Decision::Take {
                attempt: 1,
                lease_until: at(30),
                retaken: false,
            }
        );
    }

    #[test]
    fn a_live_lease_is_busy_until_it_runs_out_then_taken_with_the_next_attempt() {
        let sending = held(DeliveryState::Sending, 1, 30);
        assert_eq!(
            decide(sending, &request(29)).claim(),
            DeliveryClaim::Busy { until: at(30) }
        );
        assert_eq!(
            decide(sending, &request(30)),
            Decision::Take {
                attempt: 2,
                lease_until: at(60),
                retaken: true,
            }
        );
    }

    #[test]
    fn a_retry_waits_for_its_time() {
        let retrying = held(DeliveryState::Retrying, 1, 10);
        assert_eq!(
            decide(retrying, &request(9)).claim(),
            DeliveryClaim::Busy { until: at(10) }
        );
        // Its failure was recorded: the next push repeats nothing.
        assert!(matches!(
            decide(retrying, &request(10)),
            Decision::Take {
                attempt: 2,
                retaken: false,
                ..
            }
        ));
    }

    #[test]
    fn settled_deliveries_are_never_taken() {
        for state in [DeliveryState::Delivered, DeliveryState::Failed] {
            assert_eq!(
                decide(held(state, 1, 0), &request(1000)).claim(),
                DeliveryClaim::Settled(state)
            );
        }
    }

    #[test]
    fn a_delivery_whose_workers_keep_dying_is_given_up_after_the_last_attempt() {
        assert_eq!(
            decide(held(DeliveryState::Sending, 3, 0), &request(1)),
            Decision::GiveUp { attempts: 3 }
        );
        assert!(matches!(
            decide(held(DeliveryState::Sending, 2, 0), &request(1)),
            Decision::Take { attempt: 3, .. }
        ));
    }
}

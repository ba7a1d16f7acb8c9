//! The delivery retry policy: the one place that decides whether a push or
//! a job is tried again, after how long, and how many times. The rest of the
//! job path asks it and does what it says; [`classify`] decides which
//! answers of a push service, and which errors of ours, are worth a retry.
//!
//! Three things are tried again, each on its own clock:
//! - **A push that failed transiently** ([`PushOutcome::Retry`]): its job is
//!   published again for the devices that need it after
//!   [`RetryPolicy::push_backoff`] (the schedule below, jittered), or after
//!   the push service's `Retry-After` when that is longer, capped at the
//!   schedule's cap ([`RetryPolicy::push_delay`]). A delivery gets
//!   [`RetryPolicy::max_attempts`] sends; after the last one it is given up
//!   and the job dead-lettered.
//! - **A job that failed with an error of ours** (the store or the broker):
//!   the job is published again after [`RetryPolicy::error_delay`], the same
//!   schedule counted by the job's failures and never shorter than
//!   [`ERROR_RETRY_FLOOR`]. An outage ([`classify::is_transient`]) is waited
//!   out however long it lasts; any other error is a poison job after
//!   `max_retries` failures ([`RetryPolicy::gives_up_on_error`]).
//! - **A delivery that is not this worker's to send now** (another worker's
//!   live lease, or a retry not due yet): looked at again once it is due,
//!   plus [`RECHECK_MARGIN`] ([`recheck_delay`]).
//!
//! The schedule: retry `n` (1-based) waits `base × 2^(n-1)`, capped at
//! `max`, less up to [`JITTER`] of it at random. `base`, `max` and
//! `max_retries` are settings (`retry_base_ms`, `retry_max_ms`,
//! `max_retries`), documented with their defaults (1 s, 300 s, 5) in
//! `config.default.toml`; every other number is a constant here.
//!
//! Where the queue comes in: it holds a job back only for the delays it was
//! started with ([`RetryPolicy::delays`], one RabbitMQ delay queue each), so
//! it needs the list, never the decisions: the policy lives with the only
//! component that decides, the notifier, and `common::queue` knows nothing
//! of it.

pub mod classify;

use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::Rng as _;

#[cfg(doc)]
use crate::push::PushOutcome;

/// The largest fraction of a scheduled delay taken off at random, so the
/// retries of many jobs that failed together (a push service's outage)
/// spread out instead of arriving together.
pub const JITTER: f64 = 0.25;

/// The shortest wait before a job that failed with an error of ours is
/// tried again, whatever the schedule says (a `base` of a few milliseconds
/// in tests): a job failing at once never spins on the broker.
pub const ERROR_RETRY_FLOOR: Duration = Duration::from_millis(100);

/// A re-check waits this much past the instant it waits for, so it does not
/// arrive a hair early and find the lease still live.
pub const RECHECK_MARGIN: Duration = Duration::from_millis(100);

/// How failed pushes and jobs are retried: exponential backoff from `base`,
/// capped at `max`, jittered, for a bounded number of retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay before the first retry (`retry_base_ms`).
    pub base: Duration,
    /// Longest delay between two tries, and the cap on a push service's
    /// `Retry-After` (`retry_max_ms`).
    pub max: Duration,
    /// Retries after the first try (`max_retries`); past them a delivery is
    /// given up, and a job failing with a lasting error is dead-lettered.
    pub max_retries: u32,
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1-based), without jitter:
    /// `base × 2^(retry-1)`, capped at `max`.
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The delay before retry `retry`, less up to [`JITTER`] of it at random.
    pub fn delay_with_jitter(&self, retry: u32) -> Duration {
        let full = self.delay(retry);
        full.mul_f64(1.0 - rand::rng().random_range(0.0..JITTER))
    }

    /// Every distinct delay the policy can ask for, shortest first: what the
    /// queue must be able to hold a job back for
    /// (`common::queue::ConsumeSettings::delays`).
    pub fn delays(&self) -> Vec<Duration> {
        let mut delays: Vec<Duration> = (1..=self.max_retries.max(1))
            .map(|r| self.delay(r))
            .collect();
        delays.dedup();
        delays
    }

    /// Sends a delivery gets: the first try and `max_retries` retries. A
    /// claim past it is given up (`common::store::lease`).
    pub fn max_attempts(&self) -> u32 {
        self.max_retries.saturating_add(1)
    }

    /// Whether a push that failed transiently on its `attempt`-th send
    /// (1-based) may be sent again; if not, its delivery is given up.
    pub fn can_retry_push(&self, attempt: u32) -> bool {
        attempt <= self.max_retries
    }

    /// The backoff of a job's pushes that fail transiently, for the job's
    /// next attempt `next_attempt` (1-based): one jittered delay for every
    /// device of the job, so they are retried together.
    pub fn push_backoff(&self, next_attempt: u32) -> Duration {
        self.delay_with_jitter(next_attempt)
    }

    /// How long a push that failed transiently waits: its job's `backoff`,
    /// or the push service's `Retry-After` (`after`) when that is longer,
    /// but never past `max`: never sooner than the service asked, never
    /// later than the settings allow.
    pub fn push_delay(&self, backoff: Duration, after: Option<Duration>) -> Duration {
        after.map_or(backoff, |after| backoff.max(after.min(self.max)))
    }

    /// Whether a job whose processing failed for the `failures`-th time
    /// with an error of ours is given up (dead-lettered as poison): never
    /// for an outage (`transient`), which is waited out however long it
    /// lasts; otherwise past `max_retries` failures.
    pub fn gives_up_on_error(&self, failures: u32, transient: bool) -> bool {
        !transient && failures > self.max_retries
    }

    /// How long a job that failed for the `failures`-th time with an error
    /// of ours waits before it is tried again: the jittered schedule, never
    /// less than [`ERROR_RETRY_FLOOR`].
    pub fn error_delay(&self, failures: u32) -> Duration {
        self.delay_with_jitter(failures).max(ERROR_RETRY_FLOOR)
    }
}

/// How long to wait before looking again at deliveries held by another
/// worker's lease (or with a retry not yet due) until `until`: until then,
/// plus [`RECHECK_MARGIN`]; just the margin if it has passed.
pub fn recheck_delay(until: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (until - now).to_std().unwrap_or_default() + RECHECK_MARGIN
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped settings (`config.default.toml`).
    fn shipped() -> RetryPolicy {
        crate::Config::defaults().retry()
    }

    #[test]
    fn delays_double_up_to_the_cap() {
        let policy = RetryPolicy {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
            max_retries: 6,
        };
        let delays: Vec<u64> = (1..=6).map(|r| policy.delay(r).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 10, 10]);
        assert_eq!(policy.delays().len(), 5);
        for r in 1..=6 {
            let jittered = policy.delay_with_jitter(r);
            assert!(jittered <= policy.delay(r) && jittered >= policy.delay(r).mul_f64(0.75));
        }
    }

    /// The schedule operators get: 1, 2, 4, 8, 16 s, six sends in all.
    #[test]
    fn the_shipped_schedule_is_five_retries_from_one_second() {
        let policy = shipped();
        assert_eq!(
            policy,
            RetryPolicy {
                base: Duration::from_secs(1),
                max: Duration::from_secs(300),
                max_retries: 5,
            }
        );
        let secs: Vec<u64> = policy.delays().iter().map(Duration::as_secs).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16]);
        assert_eq!(policy.max_attempts(), 6);
        assert!(policy.can_retry_push(5));
        assert!(!policy.can_retry_push(6));
        // A long run of failures is capped, never overflows.
        assert_eq!(policy.delay(40), Duration::from_secs(300));
    }

    #[test]
    fn the_constants_are_the_documented_ones() {
        assert_eq!(JITTER, 0.25);
        assert_eq!(ERROR_RETRY_FLOOR, Duration::from_millis(100));
        assert_eq!(RECHECK_MARGIN, Duration::from_millis(100));
    }

    #[test]
    fn a_retry_after_is_honoured_up_to_the_cap() {
        let policy = shipped();
        let backoff = Duration::from_secs(2);
        assert_eq!(policy.push_delay(backoff, None), backoff);
        // Sooner than the backoff: the backoff wins.
        assert_eq!(
            policy.push_delay(backoff, Some(Duration::from_secs(1))),
            backoff
        );
        assert_eq!(
            policy.push_delay(backoff, Some(Duration::from_secs(9))),
            Duration::from_secs(9)
        );
        assert_eq!(
            policy.push_delay(backoff, Some(Duration::from_secs(3600))),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn errors_of_ours_wait_at_least_the_floor_and_only_lasting_ones_give_up() {
        let policy = RetryPolicy {
            base: Duration::from_millis(1),
            max: Duration::from_millis(8),
            max_retries: 3,
        };
        assert_eq!(policy.error_delay(1), ERROR_RETRY_FLOOR);
        assert!(!policy.gives_up_on_error(3, false));
        assert!(policy.gives_up_on_error(4, false));
        assert!(
            !policy.gives_up_on_error(1000, true),
            "an outage is waited out"
        );
        let slow = RetryPolicy {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
            ..policy
        };
        let delay = slow.error_delay(1);
        assert!(delay >= Duration::from_millis(750) && delay <= Duration::from_secs(1));
    }

    #[test]
    fn a_recheck_comes_just_after_the_lease() {
        let now = Utc::now();
        let until = now + chrono::Duration::seconds(3);
        assert_eq!(
            recheck_delay(until, now),
            Duration::from_secs(3) + RECHECK_MARGIN
        );
        assert_eq!(
            recheck_delay(now - chrono::Duration::seconds(1), now),
            RECHECK_MARGIN
        );
    }
}

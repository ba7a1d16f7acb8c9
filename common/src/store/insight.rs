//! Insights: a project's named live values (revenue today, active trials,
//! build status), each a string, a number or a boolean, set whole or
//! incremented. This module owns their rules, which every store applies the
//! same way: how many a project may have, how far a number may grow, how an
//! increment adds (integers stay integers), and how long a deletion is
//! remembered for the live streams of other replicas.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Scope;

/// The most insights a project may have at once: a page of tiles, not a
/// metrics store. Setting one more is refused ([`InsightRefusal::Full`]).
pub const MAX_INSIGHTS: usize = 100;

/// The largest magnitude of a number an insight holds or is incremented by:
/// 2^53 − 1, JavaScript's `Number.MAX_SAFE_INTEGER`. Every integer up to it
/// is exact in every client (and as a MongoDB double), and no sum of two such
/// numbers overflows a 64-bit integer or becomes infinite.
pub const MAX_MAGNITUDE: i64 = 9_007_199_254_740_991;

/// How long a deleted insight is remembered, so that the streams of every
/// replica, which follow changes by time, see the deletion. Far longer than
/// any stream looks back; a deletion older than this is forgotten for good
/// (removed from the store by the next deletion in its project).
pub const DELETION_KEPT: Duration = Duration::from_secs(60 * 60);

/// A number an insight holds, or adds: an integer stays one while it is only
/// added integers; anything else makes it a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum InsightNumber {
    Integer(i64),
    Float(f64),
}

impl InsightNumber {
    pub fn as_f64(self) -> f64 {
        match self {
            // Exact: every number an insight holds is within MAX_MAGNITUDE.
            Self::Integer(i) => i as f64,
            Self::Float(f) => f,
        }
    }

    /// The numbers `by` may be added to without the sum leaving
    /// ±[`MAX_MAGNITUDE`], as (lowest, highest): integers when `by` is one,
    /// so the check is exact. MongoDB's increment is a conditional update
    /// on this range, and [`InsightNumber::plus`] checks the same one, so
    /// both stores refuse exactly the same increments.
    pub fn room_for(by: InsightNumber) -> (InsightNumber, InsightNumber) {
        match by {
            Self::Integer(by) => (
                Self::Integer(-MAX_MAGNITUDE - by),
                Self::Integer(MAX_MAGNITUDE - by),
            ),
            Self::Float(by) => {
                let max = MAX_MAGNITUDE as f64;
                (Self::Float(-max - by), Self::Float(max - by))
            }
        }
    }

    /// Whether `self` lies in the range `room_for` gave.
    fn within(self, (lowest, highest): (InsightNumber, InsightNumber)) -> bool {
        match (self, lowest, highest) {
            (Self::Integer(v), Self::Integer(lo), Self::Integer(hi)) => lo <= v && v <= hi,
            _ => lowest.as_f64() <= self.as_f64() && self.as_f64() <= highest.as_f64(),
        }
    }

    /// `self + by` as an increment adds: an integer when both are integers,
    /// a float otherwise; `None` when the sum would leave ±[`MAX_MAGNITUDE`].
    pub fn plus(self, by: InsightNumber) -> Option<InsightNumber> {
        if !self.within(Self::room_for(by)) {
            return None;
        }
        Some(match (self, by) {
            // Both within MAX_MAGNITUDE (2^53): the sum fits an i64.
            (Self::Integer(a), Self::Integer(b)) => Self::Integer(a + b),
            (a, b) => Self::Float(a.as_f64() + b.as_f64()),
        })
    }
}

/// What an insight holds.
#[derive(Debug, Clone, PartialEq)]
pub enum InsightValue {
    Text(String),
    Number(InsightNumber),
    Flag(bool),
}

impl InsightValue {
    /// What kind of value it is, as a refusal names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Text(_) => "a string",
            Self::Number(_) => "a number",
            Self::Flag(_) => "a boolean",
        }
    }
}

/// One insight of a project.
#[derive(Debug, Clone, PartialEq)]
pub struct Insight {
    /// Its name, unique in its project.
    pub title: String,
    pub value: InsightValue,
    /// An emoji, as stored.
    pub icon: Option<String>,
    /// When it was created (again, if it had been deleted).
    pub created_at: DateTime<Utc>,
    /// When it was last set or incremented.
    pub updated_at: DateTime<Utc>,
}

/// A change to an insight of any project, as live streams follow them.
#[derive(Debug, Clone, PartialEq)]
pub struct InsightChange {
    pub scope: Scope,
    pub title: String,
    /// Grows by one with every change of the insight, across deletions and
    /// creations again: with `changed_at`, tells one change from the next.
    pub version: i64,
    /// When it was changed: its `updated_at`, or when it was deleted.
    pub changed_at: DateTime<Utc>,
    /// The insight as the change left it; `None`: deleted.
    pub insight: Option<Insight>,
}

/// Why a store refused to set or increment an insight (nothing was written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsightRefusal {
    /// It does not exist, and its project has [`MAX_INSIGHTS`] already.
    Full,
    /// An increment of an insight whose value is not a number: what it is
    /// instead ([`InsightValue::kind`]).
    NotANumber(&'static str),
    /// An increment that would take the value beyond ±[`MAX_MAGNITUDE`].
    OutOfRange,
}

impl Insight {
    /// A new insight, as a set or an increment creates it.
    pub fn new(title: &str, value: InsightValue, icon: Option<&str>, now: DateTime<Utc>) -> Self {
        Self {
            title: title.to_owned(),
            value,
            icon: icon.map(str::to_owned),
            created_at: now,
            updated_at: now,
        }
    }

    /// Adds `by` to its value, as an increment does at `now`; the icon too
    /// when one is given.
    pub fn increment(
        &mut self,
        by: InsightNumber,
        icon: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<(), InsightRefusal> {
        let InsightValue::Number(number) = self.value else {
            return Err(InsightRefusal::NotANumber(self.value.kind()));
        };
        self.value = InsightValue::Number(number.plus(by).ok_or(InsightRefusal::OutOfRange)?);
        self.touch(icon, now);
        Ok(())
    }

    /// Replaces its value, as a set does at `now`; the icon too when one is
    /// given.
    pub fn set(&mut self, value: InsightValue, icon: Option<&str>, now: DateTime<Utc>) {
        self.value = value;
        self.touch(icon, now);
    }

    fn touch(&mut self, icon: Option<&str>, now: DateTime<Utc>) {
        if let Some(icon) = icon {
            self.icon = Some(icon.to_owned());
        }
        self.updated_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::InsightNumber::{Float, Integer};
    use super::*;

    #[test]
    fn integers_stay_integers_and_anything_else_makes_a_float() {
        assert_eq!(Integer(1999).plus(Integer(1)), Some(Integer(2000)));
        assert_eq!(Integer(2).plus(Float(0.5)), Some(Float(2.5)));
        assert_eq!(Float(1.5).plus(Integer(1)), Some(Float(2.5)));
        assert_eq!(Float(1.5).plus(Float(0.5)), Some(Float(2.0)));
        assert_eq!(Integer(5).plus(Integer(-7)), Some(Integer(-2)));
    }

    #[test]
    fn a_sum_beyond_the_largest_magnitude_is_refused_exactly_at_it() {
        assert_eq!(
            Integer(MAX_MAGNITUDE - 1).plus(Integer(1)),
            Some(Integer(MAX_MAGNITUDE))
        );
        assert_eq!(Integer(MAX_MAGNITUDE).plus(Integer(1)), None);
        assert_eq!(Integer(-MAX_MAGNITUDE).plus(Integer(-1)), None);
        assert_eq!(
            Integer(MAX_MAGNITUDE).plus(Integer(-MAX_MAGNITUDE)),
            Some(Integer(0))
        );
        assert_eq!(Float(1e15).plus(Float(9e15)), None);
    }

    #[test]
    fn only_a_number_is_incremented_and_a_refusal_changes_nothing() {
        let now = crate::time::now();
        let mut text = Insight::new("t", InsightValue::Text("green".into()), None, now);
        let before = text.clone();
        assert_eq!(
            text.increment(Integer(1), Some("🚀"), now),
            Err(InsightRefusal::NotANumber("a string"))
        );
        assert_eq!(text, before);
        let mut flag = Insight::new("f", InsightValue::Flag(true), None, now);
        assert_eq!(
            flag.increment(Integer(1), None, now),
            Err(InsightRefusal::NotANumber("a boolean"))
        );
    }
}

//! Users as events and identify calls make them, and the rules every store
//! applies to them (the counters, the aliases, the listing), so the two
//! backends cannot disagree:
//!
//! - **Existence.** An event whose `userId` names nobody makes that user;
//!   so does an identify call. A user's record holds its properties and
//!   aliases and three counters: how many events name it, the earliest and
//!   the latest of their times (`createdAt`, which a backfilled event sets
//!   in the past). Identify counts as seen too, at its time, but is no
//!   event. The counters are written with the event, in the write that
//!   stores it, never computed by reading events back.
//! - **Aliases name their user everywhere.** An event recorded under an
//!   alias counts for the user (the event keeps the id it was sent with),
//!   an identify call naming an alias updates its user, and a look-up by
//!   an alias answers the user. When identify lists an alias that already
//!   names someone else (another user's id or one of its aliases), those
//!   are one person: the other user is merged into this one (counters
//!   added, its aliases joined, its properties filling the keys this one
//!   lacks) and ceases to exist on its own.
//! - **The listing** is most recently seen first, ties by id, continued
//!   from a [`UserPosition`]; see [`UserFilter`] for what narrows it.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::model::Identity;

/// Which of a scope's users a listing wants; every field set narrows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserFilter {
    /// Text found in the user's id or one of its aliases, ignoring case
    /// (given as typed; each store folds case itself).
    pub text: Option<String>,
    /// A property the user has with this value.
    pub property: Option<PropertyMatch>,
}

/// One property and the value it must have, as a query string writes it
/// (`plan:pro`): a string property equal to the text, or a number or a
/// boolean whose JSON text this is (`seats:3` finds 3 and 3.0,
/// `beta:true` finds true).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyMatch {
    /// The property's top-level key (any text but a colon).
    pub key: String,
    /// The value as written.
    pub value: String,
}

impl PropertyMatch {
    /// `key:value`, split at the first colon; `None` without a colon or
    /// with nothing before it.
    pub fn parse(s: &str) -> Option<Self> {
        let (key, value) = s.split_once(':')?;
        (!key.is_empty()).then(|| Self {
            key: key.to_owned(),
            value: value.to_owned(),
        })
    }

    /// The number the value writes, when it is a JSON number.
    pub fn number(&self) -> Option<f64> {
        serde_json::from_str::<serde_json::Number>(&self.value)
            .ok()?
            .as_f64()
    }

    /// The boolean the value writes, when it is `true` or `false`.
    pub fn boolean(&self) -> Option<bool> {
        match self.value.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// Whether `properties` has the key with this value.
    pub fn matches(&self, properties: &Map<String, Value>) -> bool {
        match properties.get(&self.key) {
            Some(Value::String(s)) => *s == self.value,
            Some(Value::Number(n)) => n.as_f64().is_some() && n.as_f64() == self.number(),
            Some(Value::Bool(b)) => Some(*b) == self.boolean(),
            _ => false,
        }
    }
}

/// Where a user sits in the listing: when it was last seen, ties broken by
/// id. A listing continues after one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserPosition {
    pub last_seen_at: DateTime<Utc>,
    pub user_id: String,
}

impl Identity {
    /// Where the user sits in the listing.
    pub fn position(&self) -> UserPosition {
        UserPosition {
            last_seen_at: self.last_seen_at,
            user_id: self.user_id.clone(),
        }
    }

    /// Counts `other`, a user merged into this one, as this one: its
    /// counters added, its id and aliases joined to the aliases (after
    /// those already there), its properties filling the keys this one
    /// lacks.
    pub(super) fn absorb(&mut self, other: &Identity) {
        self.event_count += other.event_count;
        self.seen(other.first_seen_at);
        self.seen(other.last_seen_at);
        self.join(other);
    }

    /// What [`Identity::absorb`] takes of `other` besides its counters:
    /// its id and aliases, and the properties this one lacks.
    pub(super) fn join(&mut self, other: &Identity) {
        for alias in std::iter::once(&other.user_id).chain(&other.aliases) {
            if *alias != self.user_id && !self.aliases.contains(alias) {
                self.aliases.push(alias.clone());
            }
        }
        fill_properties(&mut self.properties, &other.properties);
    }

    /// Counts the user as seen at `at` (first and last seen widen to it).
    pub(super) fn seen(&mut self, at: DateTime<Utc>) {
        self.first_seen_at = self.first_seen_at.min(at);
        self.last_seen_at = self.last_seen_at.max(at);
    }
}

/// Adds the properties of `from` whose keys `into` lacks.
pub(super) fn fill_properties(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (key, value) in from {
        if !into.contains_key(key) {
            into.insert(key.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_property_filter_splits_at_the_first_colon_and_needs_a_key() {
        let m = PropertyMatch::parse("url:https://x").expect("parsed");
        assert_eq!((m.key.as_str(), m.value.as_str()), ("url", "https://x"));
        assert_eq!(PropertyMatch::parse("plan:").expect("parsed").value, "");
        assert_eq!(PropertyMatch::parse("plan"), None);
        assert_eq!(PropertyMatch::parse(":pro"), None);
    }

    #[test]
    fn a_value_matches_a_string_exactly_and_numbers_and_booleans_by_their_text() {
        let props =
            json!({ "plan": "pro", "seats": 3, "ratio": 0.5, "beta": true, "n": null, "s": "3" });
        let props = props.as_object().expect("an object");
        let yes = |s: &str| PropertyMatch::parse(s).expect("parsed").matches(props);
        assert!(yes("plan:pro") && !yes("plan:Pro") && !yes("plan:pr"));
        assert!(yes("seats:3") && yes("seats:3.0") && !yes("seats:4"));
        assert!(yes("ratio:0.5") && yes("beta:true") && !yes("beta:false"));
        assert!(yes("s:3") && !yes("n:null") && !yes("missing:x"));
    }
}

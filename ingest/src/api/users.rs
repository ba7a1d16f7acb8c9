//! What `GET /v1/users` answers (its handler is with the other user
//! routes, in `identify`): a page of the project's users, most recently
//! seen first, filtered, continued with a cursor; the cursor's form; and
//! the faults of its parameters.
//!
//! Paging follows the list as it stands: the cursor is the position of the
//! last user of a page (`lastSeenAt`, then `userId`), and the next page is
//! the users after it. A user seen again while someone pages moves to the
//! front, so no walk shows a user twice; one that had not been reached yet
//! is not shown by that walk (a new first page shows it, at the top).
//! Users not seen meanwhile are each shown exactly once, in order.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use common::store::{Identity, PropertyMatch, Scope, Store, UserFilter, UserPosition};
use poem_openapi::{ApiResponse, Object, payload::Json};
use serde_json::Value;

use super::{Success, listing::query_fault};
use crate::{error::ApiError, types::Nullable};

/// Page size when the request names none.
const DEFAULT_LIMIT: u32 = 50;

/// What a cursor looks like, as the `cursor` parameter's schema says:
/// `<unix µs>.<user id as lowercase hex UTF-8>` (poem-openapi takes the
/// pattern as a literal, so it is written there too, and a test keeps the
/// two equal).
#[cfg(test)]
const CURSOR_PATTERN: &str = "^-?[0-9]{1,18}\\.(?:[0-9a-f]{2}){1,1020}$";

/// A user as listed: its id, what identify said of it, and the counters
/// its events keep.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct UserOut {
    /// The caller's own id for the user.
    pub user_id: String,
    /// Every property set so far.
    pub properties: BTreeMap<String, Value>,
    /// Every alias added so far, in first-seen order. Events recorded
    /// under one count for this user.
    pub aliases: Vec<String>,
    /// The earliest time the user was seen: its earliest event's
    /// `createdAt`, or an identify call.
    pub first_seen_at: DateTime<Utc>,
    /// The latest time the user was seen.
    pub last_seen_at: DateTime<Utc>,
    /// How many events were recorded for the user, under its id or an
    /// alias (events retention has removed since included).
    pub event_count: u64,
    /// When its record was made: its first identify call, or the time of
    /// the event that made it.
    pub created_at: DateTime<Utc>,
    /// When identify last changed it (`createdAt` if never).
    pub updated_at: DateTime<Utc>,
}

impl From<Identity> for UserOut {
    fn from(i: Identity) -> Self {
        Self {
            user_id: i.user_id,
            properties: i.properties.into_iter().collect(),
            aliases: i.aliases,
            first_seen_at: i.first_seen_at,
            last_seen_at: i.last_seen_at,
            event_count: i.event_count,
            created_at: i.created_at,
            updated_at: i.updated_at,
        }
    }
}

/// One page of users.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct UserPage {
    /// Most recently seen first.
    pub items: Vec<UserOut>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Nullable<String>,
}

#[derive(ApiResponse)]
pub enum ListUsersResponse {
    /// A page of users.
    #[oai(status = 200)]
    Ok(Json<Success<UserPage>>),
}

/// The cursor naming `position`.
pub fn encode(position: &UserPosition) -> String {
    let hex: String = position
        .user_id
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}.{hex}", position.last_seen_at.timestamp_micros())
}

/// The position a cursor names; `None` for a string not of the published
/// form. Every string of that form names one (a user id that is not UTF-8
/// is read as well as it can be: only the API's own cursors matter).
pub fn decode(cursor: &str) -> Option<UserPosition> {
    let (micros, hex) = cursor.split_once('.')?;
    let digits = micros.strip_prefix('-').unwrap_or(micros);
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if hex.is_empty()
        || hex.len() % 2 != 0
        || hex.len() > 2040
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    Some(UserPosition {
        last_seen_at: DateTime::from_timestamp_micros(micros.parse().ok()?)?,
        user_id: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// The filters of a listing, from its query parameters.
pub fn filter(q: Option<String>, property: Option<&str>) -> Result<UserFilter, ApiError> {
    let property = property
        .map(|p| {
            PropertyMatch::parse(p).ok_or_else(|| {
                query_fault(
                    "property",
                    "must be key:value, the property's name before the first colon",
                )
            })
        })
        .transpose()?;
    Ok(UserFilter { text: q, property })
}

/// The page of `scope`'s users matching `filter` that follows `cursor`.
pub async fn page(
    store: &dyn Store,
    scope: &Scope,
    filter: &UserFilter,
    cursor: Option<&str>,
    limit: Option<u32>,
) -> Result<UserPage, ApiError> {
    let after = cursor
        .map(|c| {
            decode(c).ok_or_else(|| {
                query_fault(
                    "cursor",
                    "is not a cursor this API gave out: pass nextCursor unchanged",
                )
            })
        })
        .transpose()?;
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    // One more than asked: whether it comes says if there is a next page.
    let mut users = store
        .list_users(scope, filter, after, limit + 1)
        .await
        .map_err(ApiError::from)?;
    let more = users.len() > limit as usize;
    users.truncate(limit as usize);
    let next_cursor = more
        .then(|| users.last().map(|u| encode(&u.position())))
        .flatten();
    Ok(UserPage {
        items: users.into_iter().map(UserOut::from).collect(),
        next_cursor: Nullable(next_cursor),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_the_position_it_was_made_from() {
        let pattern = regex::Regex::new(CURSOR_PATTERN).expect("a regex");
        for user_id in ["u-1", "ada@example.com / 7", "été:ü", "\u{0}"] {
            let position = UserPosition {
                last_seen_at: DateTime::from_timestamp_micros(1_795_000_000_123_456).expect("time"),
                user_id: user_id.into(),
            };
            let cursor = encode(&position);
            assert!(pattern.is_match(&cursor), "{cursor}");
            assert_eq!(decode(&cursor), Some(position));
        }
    }

    #[test]
    fn the_listings_parameter_states_this_pattern() {
        let literal = format!("pattern = \"{}\"", CURSOR_PATTERN.replace('\\', "\\\\"));
        assert!(
            include_str!("identify.rs").contains(&literal),
            "identify.rs's `cursor` parameter must carry {literal}"
        );
    }

    /// Every string of the documented form names a position, and no other
    /// string does.
    #[test]
    fn decode_accepts_exactly_the_pattern() {
        let pattern = regex::Regex::new(CURSOR_PATTERN).expect("a regex");
        for candidate in [
            "0.75",
            "-1.ff",
            "999999999999999999.00",
            "-999999999999999999.c3a9",
            "1000000000000000000.75",
            "1.7",
            "1.",
            ".75",
            "1.7G",
            "1.FF",
            "+1.75",
            "1 .75",
            "",
            "abc",
        ] {
            assert_eq!(
                decode(candidate).is_some(),
                pattern.is_match(candidate),
                "{candidate:?}"
            );
        }
        let longest = format!("1.{}", "ab".repeat(1020));
        assert!(decode(&longest).is_some() && pattern.is_match(&longest));
        let longer = format!("1.{}", "ab".repeat(1021));
        assert!(decode(&longer).is_none() && !pattern.is_match(&longer));
    }

    #[test]
    fn a_property_filter_without_a_key_is_a_fault_at_its_parameter() {
        assert!(filter(None, Some("plan:pro")).is_ok());
        for malformed in ["plan", ":pro", ""] {
            let Err(ApiError::Validation(faults)) = filter(None, Some(malformed)) else {
                panic!("{malformed:?} accepted");
            };
            assert_eq!(faults[0].path, ["query", "property"]);
        }
    }
}

//! The `nextCursor` of event listings: the position of the last event of a
//! page, from which the next page continues (keyset paging, so events
//! arriving meanwhile never shift a page).
//!
//! Clients pass it back unchanged, but its form is public: `<unix ms>.<event
//! id>`, which the parameter's `pattern` states. So a tool that reads the
//! schema knows what is valid, and every string of that form is a position
//! the listing can continue from (events older than it), whether or not an
//! event stands there.

use chrono::DateTime;
use common::store::EventPosition;
use uuid::Uuid;

/// The cursor naming `position`.
pub fn encode(position: EventPosition) -> String {
    format!(
        "{}.{}",
        position.created_at.timestamp_millis(),
        position.id.hyphenated()
    )
}

/// The position a cursor names; `None` for a string not of the published
/// form (the `cursor` parameter's pattern, which poem-openapi checks before
/// this is asked; the tests hold the two to one meaning).
pub fn decode(cursor: &str) -> Option<EventPosition> {
    let (ms, id) = cursor.split_once('.')?;
    let digits = ms.strip_prefix('-').unwrap_or(ms);
    let lowercase_hyphenated = id.len() == 36
        && id
            .bytes()
            .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if digits.is_empty()
        || digits.len() > 15
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || !lowercase_hyphenated
    {
        return None;
    }
    Some(EventPosition {
        created_at: DateTime::from_timestamp_millis(ms.parse().ok()?)?,
        id: Uuid::try_parse(id).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a cursor looks like, as the `cursor` parameter's schema says
    /// (poem-openapi takes the pattern as a literal, so it is written there
    /// and here, and a test keeps them equal).
    const PATTERN: &str =
        "^-?[0-9]{1,15}\\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

    #[test]
    fn a_cursor_names_the_position_it_was_made_from() {
        let position = EventPosition {
            created_at: DateTime::from_timestamp_millis(1_795_000_000_123).expect("time"),
            id: Uuid::now_v7(),
        };
        let cursor = encode(position);
        assert_eq!(decode(&cursor), Some(position));
        let pattern = regex::Regex::new(PATTERN).expect("a regex");
        assert!(pattern.is_match(&cursor), "{cursor}");
    }

    #[test]
    fn the_listings_parameter_states_this_pattern() {
        // The attribute's string literal, escaped as Rust source writes it.
        let literal = format!("pattern = \"{}\"", PATTERN.replace('\\', "\\\\"));
        assert!(
            include_str!("events.rs").contains(&literal),
            "events.rs's `cursor` parameter must carry {literal}"
        );
    }

    /// Every string of the documented form names a position, and no other
    /// string does: what the schema calls valid is exactly what the
    /// listing accepts.
    #[test]
    fn decode_accepts_exactly_the_pattern() {
        let pattern = regex::Regex::new(PATTERN).expect("a regex");
        let id = "0197a3c2-5f1e-7b8a-9c0d-1e2f3a4b5c6d";
        for candidate in [
            format!("0.{id}"),
            format!("-1.{id}"),
            format!("999999999999999.{id}"),
            format!("-999999999999999.{id}"),
            "000000000000001.00000000-0000-0000-0000-000000000000".into(),
            format!("1.{}", id.to_uppercase()),
            format!("1.{}", id.replace('-', "")),
            format!("1000000000000000.{id}"),
            format!(".{id}"),
            format!("-.{id}"),
            format!("+1.{id}"),
            format!("1.{id}x"),
            format!("1 .{id}"),
            format!("1.{{{id}}}"),
            "".into(),
            "abc".into(),
            "MTc5NTAwMDAwMDEyMy4wMTk3YTNjMg".into(),
        ] {
            assert_eq!(
                decode(&candidate).is_some(),
                pattern.is_match(&candidate),
                "{candidate:?}"
            );
        }
    }
}

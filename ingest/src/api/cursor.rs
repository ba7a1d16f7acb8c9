//! The opaque `nextCursor` of event listings: the position of the last
//! event of a page, from which the next page continues (keyset paging, so
//! events arriving meanwhile never shift a page).

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::DateTime;
use common::store::EventPosition;
use uuid::Uuid;

/// The cursor naming `position`: base64url of `<unix ms>.<event id>`.
pub fn encode(position: EventPosition) -> String {
    URL_SAFE_NO_PAD.encode(format!(
        "{}.{}",
        position.created_at.timestamp_millis(),
        position.id
    ))
}

/// The position a cursor names; `None` for anything [`encode`] did not make.
pub fn decode(cursor: &str) -> Option<EventPosition> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    let (ms, id) = text.split_once('.')?;
    Some(EventPosition {
        created_at: DateTime::from_timestamp_millis(ms.parse().ok()?)?,
        id: Uuid::parse_str(id).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_the_position_it_was_made_from() {
        let position = EventPosition {
            created_at: DateTime::from_timestamp_millis(1_795_000_000_123).expect("time"),
            id: Uuid::now_v7(),
        };
        assert_eq!(decode(&encode(position)), Some(position));
    }

    #[test]
    fn anything_else_names_no_position() {
        for junk in ["", "abc", "!!!", &URL_SAFE_NO_PAD.encode("12.not-a-uuid")] {
            assert_eq!(decode(junk), None, "{junk:?}");
        }
    }
}

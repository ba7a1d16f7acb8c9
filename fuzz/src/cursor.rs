//! `cursor`: the `cursor` of `GET /v1/events` (`ingest/src/api/cursor.rs`).
//! Decoding takes any string without panicking; a cursor names the position
//! it was made from, and a string that decodes names a position whose own
//! cursor decodes to it again.
//!
//! "Every position" is every one an event can have: the published form
//! allows at most 15 digits of milliseconds, so that every string of that
//! form names an instant (up to the year 33658); an event's time is the
//! server's clock, so none lies beyond. Positions past that (chrono goes
//! to the year 262143) have no cursor, and are not fed to the round trip.

use chrono::DateTime;
use common::store::EventPosition;
use ingest::fuzzing::{decode_cursor, encode_cursor};
use uuid::Uuid;

pub fn check(input: &[u8]) {
    // A query parameter reaches the decoder as text.
    let text = String::from_utf8_lossy(input);
    if let Some(position) = decode_cursor(&text) {
        assert_eq!(decode_cursor(&encode_cursor(position)), Some(position));
    }
    // The same bytes as a position: milliseconds and an event id.
    if let Some(position) = position_of(input) {
        let cursor = encode_cursor(position);
        assert_eq!(decode_cursor(&cursor), Some(position), "{cursor}");
    }
}

/// The instants a cursor can name: 15 digits of milliseconds either side of
/// the epoch.
const CURSOR_MILLIS: i64 = 999_999_999_999_999;

/// A position from the first 24 bytes (little-endian milliseconds since
/// the epoch, then the id), if they name an instant a cursor can.
fn position_of(input: &[u8]) -> Option<EventPosition> {
    let millis = i64::from_le_bytes(input.get(..8)?.try_into().ok()?);
    if !(-CURSOR_MILLIS..=CURSOR_MILLIS).contains(&millis) {
        return None;
    }
    let id = Uuid::from_bytes(input.get(8..24)?.try_into().ok()?);
    Some(EventPosition {
        created_at: DateTime::from_timestamp_millis(millis)?,
        id,
    })
}

//! `query`: the input as the query string of the listings (`GET
//! /v1/events`, `/v1/stats/events`, `/v1/channels`, `/v1/users`,
//! `/v1/stream`) and as the
//! id in `GET /v1/events/{id}` and `/v1/users/{userId}`, through the whole
//! service in-process: the query rules (`ingest/src/query.rs`), poem's
//! parameter parsing, cursors, the handlers and the store.
//!
//! Every answer is a 200 (a 404 for an id not found) or a 400 envelope
//! whose faults name the parameter (`["query", name]` or `["path",
//! name]`); never a 5xx.

use serde_json::Value;

use crate::{envelope, service};

/// Routes whose query string is the input.
const LISTINGS: [&str; 5] = [
    "/v1/events",
    "/v1/stats/events",
    "/v1/channels",
    "/v1/users",
    "/v1/stream",
];

/// Routes whose last path segment is the input.
const LOOKUPS: [&str; 2] = ["/v1/events/", "/v1/users/"];

pub fn check(input: &[u8]) {
    let query = escape(input, |b| b == b'#');
    for route in LISTINGS {
        let uri = format!("{route}?{query}");
        answer_is_sound(&uri, "query", false);
    }
    let segment = escape(input, |b| b"#?/%".contains(&b));
    for route in LOOKUPS {
        answer_is_sound(&format!("{route}{segment}"), "path", true);
    }
}

/// The input as a client's HTTP library would send it: bytes that may not
/// stand in a request target percent-encoded, and so are those `reserved`
/// says, the rest as they are (`&`, `=`, `+` and `%` included, so the
/// fuzzer reaches the decoder's edge cases).
fn escape(input: &[u8], reserved: impl Fn(u8) -> bool) -> String {
    let mut text = String::with_capacity(input.len());
    for &byte in input {
        if byte.is_ascii_graphic() && !reserved(byte) {
            text.push(char::from(byte));
        } else {
            text.push_str(&format!("%{byte:02X}"));
        }
    }
    text
}

fn answer_is_sound(uri: &str, location: &str, may_be_missing: bool) {
    // The server refuses a target that does not parse before the API.
    let Some(answer) = service::api().get(uri) else {
        return;
    };
    let text = String::from_utf8_lossy(&answer.body);
    match answer.status {
        200 => {
            // A live stream's body is not read; every other one is JSON.
            if !answer.body.is_empty() {
                serde_json::from_slice::<Value>(&answer.body)
                    .unwrap_or_else(|e| panic!("GET {uri} answered no JSON ({e}): {text}"));
            }
        }
        404 if may_be_missing => {}
        400 => {
            for fault in envelope::faults(&answer.body) {
                assert!(
                    fault.path.len() == 2 && fault.path[0] == location,
                    "GET {uri}: a fault at {:?}, not at a parameter: {}",
                    fault.path,
                    fault.message
                );
            }
        }
        status => panic!("GET {uri} answered {status}: {text}"),
    }
}

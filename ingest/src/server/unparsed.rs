//! hyper's own answers, in the envelope. A request head hyper cannot parse
//! (a malformed line, more header bytes or fields than its ceilings, a
//! request target over 64 KiB) never reaches the service: hyper writes a
//! bare `400`, `431` or `414` with an empty body itself and closes the
//! connection. The socket's writer ([`super::activity::Watched`]) hands
//! every write made while no request is in flight to [`envelope_for`],
//! which recognises such an answer (one of those statuses, an empty body,
//! no `X-Request-Id`, which every answer of the service carries) and gives
//! the bytes to send instead: the same status with the error envelope and a
//! request id, as every other refusal has.

use poem_openapi::types::ToJSON as _;
use uuid::Uuid;

use crate::{
    error::{ApiError, ErrorEnvelope},
    header_limit::HeaderLimits,
};

/// The longest answer of hyper's own: a status line, `content-length: 0`
/// and `date`, well under this.
const MAX_OWN_ANSWER: usize = 256;

/// The response to send instead of `written`, if `written` is hyper's own
/// answer to a head it could not parse.
pub(super) fn envelope_for(written: &[u8], limits: HeaderLimits) -> Option<Vec<u8>> {
    // Every write of every response passes here: the cheap tests first.
    // hyper's own answers are a short head alone.
    if written.len() > MAX_OWN_ANSWER || !written.starts_with(b"HTTP/1.1 4") {
        return None;
    }
    let head_end = written.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&written[..head_end]).ok()?;
    let (status_line, fields) = head.split_once("\r\n").unwrap_or((head, ""));
    let status = status_line.strip_prefix("HTTP/1.1 ")?.get(..3)?;
    let error = match status {
        "400" => ApiError::UnparsableRequest,
        "414" => ApiError::UriTooLong,
        "431" => ApiError::HeadersTooLarge {
            max_headers: limits.max_headers,
            max_bytes: limits.max_bytes,
        },
        _ => return None,
    };
    let mut empty = false;
    for field in fields.split("\r\n") {
        let (name, value) = field.split_once(':')?;
        if name.eq_ignore_ascii_case("x-request-id") {
            return None;
        }
        empty |= name.eq_ignore_ascii_case("content-length") && value.trim() == "0";
    }
    if !empty || written.len() != head_end + 4 {
        return None;
    }
    let request_id = Uuid::new_v4();
    let body = ErrorEnvelope {
        success: false,
        error: error.to_string(),
        details: None,
        request_id: request_id.to_string(),
    }
    .to_json_string();
    let status = error.status();
    Some(
        format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json; charset=utf-8\r\n\
             content-length: {}\r\nx-request-id: {request_id}\r\nconnection: close\r\n\r\n{body}",
            status.as_u16(),
            status.canonical_reason().unwrap_or_default(),
            body.len(),
        )
        .into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: HeaderLimits = HeaderLimits {
        max_headers: 100,
        max_bytes: 16384,
    };

    #[test]
    fn hypers_bare_431_becomes_the_envelope() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\
                     date: Thu, 26 Nov 2026 02:00:00 GMT\r\n\r\n";
        let replaced =
            String::from_utf8(envelope_for(bare, LIMITS).expect("replaced")).expect("UTF-8");
        let (head, body) = replaced.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(head.contains("content-type: application/json"));
        let envelope: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(envelope["success"], false);
        assert!(
            envelope["error"]
                .as_str()
                .is_some_and(|e| e.contains("at most 100 fields and 16384 bytes")),
            "{envelope}"
        );
        let id = envelope["requestId"].as_str().expect("a request id");
        assert!(head.contains(&format!("x-request-id: {id}")), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
    }

    #[test]
    fn hypers_400_and_414_are_replaced_too() {
        for (bare, status) in [
            (
                &b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"[..],
                "400",
            ),
            (
                b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n",
                "414",
            ),
        ] {
            let replaced = envelope_for(bare, LIMITS).expect("replaced");
            assert!(replaced.starts_with(format!("HTTP/1.1 {status} ").as_bytes()));
        }
    }

    #[test]
    fn the_services_own_answers_pass_untouched() {
        for written in [
            // Every answer of the service carries its request id.
            &b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\
               x-request-id: 0197a3c2-5f1e-7b8a-9c0d-1e2f3a4b5c6d\r\n\r\n"[..],
            // A body, another status, an interim answer, part of a body.
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"{\"success\":false}",
            b"",
        ] {
            assert_eq!(
                envelope_for(written, LIMITS),
                None,
                "{:?}",
                String::from_utf8_lossy(written)
            );
        }
    }
}

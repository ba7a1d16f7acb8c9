//! `headers`: the input as the value of an `Idempotency-Key` header
//! (`ingest/src/idempotency.rs`, `key_of`) and of an `Authorization` header
//! on a route taking an API key and on one taking an admin token
//! (`ingest/src/auth.rs`, `presented`).
//!
//! A key taken is the header's whole value, 1 to 255 visible ASCII
//! characters or spaces; a secret taken is the bearer credential the header
//! carries, of the kind the route takes; every refusal has a message.

use common::keys::SecretKind;
use ingest::fuzzing::{idempotency_key, presented_secret};
use poem::http::{HeaderMap, HeaderValue, header};

pub fn check(input: &[u8]) {
    // The HTTP server hands the API only values it could parse.
    let Ok(value) = HeaderValue::from_bytes(input) else {
        return;
    };
    idempotency_key_is_sound(&value);
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, value.clone());
    for kind in [SecretKind::ApiKey, SecretKind::AdminToken] {
        match presented_secret(&headers, kind) {
            Ok(secret) => {
                assert_eq!(SecretKind::of(secret), Some(kind), "{secret:?}");
                let sent = value.to_str().expect("a secret is text");
                assert!(
                    sent.trim().ends_with(secret) && sent.len() > secret.len(),
                    "{secret:?} is not the credential of {sent:?}"
                );
                let scheme = sent.trim_start().split(' ').next().unwrap_or_default();
                assert!(scheme.eq_ignore_ascii_case("bearer"), "{sent:?}");
            }
            Err(message) => assert!(!message.is_empty()),
        }
    }
}

fn idempotency_key_is_sound(value: &HeaderValue) {
    match idempotency_key(value.clone()) {
        Ok(Some(key)) => {
            assert_eq!(key.as_bytes(), value.as_bytes());
            assert!((1..=255).contains(&key.len()), "{key:?}");
            assert!(
                key.bytes().all(|b| b.is_ascii_graphic() || b == b' '),
                "{key:?}"
            );
        }
        Ok(None) => panic!("the Idempotency-Key header went unseen: {value:?}"),
        Err(message) => assert!(!message.is_empty()),
    }
}

//! Signed webhooks, per the Standard Webhooks specification
//! (standardwebhooks.com): the body `{"type", "timestamp", "data"}`, and
//! the `webhook-id`, `webhook-timestamp` and `webhook-signature` headers —
//! `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` under the
//! destination's secret (`whsec_` and the base64 key). The id names the
//! delivery, not the attempt: a receiver deduplicates retries by it.

use base64::{
    Engine as _,
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
};
use hmac::{Hmac, Mac as _};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

use super::{Answer, Message, post};
use crate::{
    guarded::GuardedClient,
    push::{PushOutcome, retry_after},
    retry::classify::{Class, is_transient_status},
};

/// The `User-Agent` receivers may filter on.
const USER_AGENT: &str = concat!("Tocsin-Webhooks/", env!("CARGO_PKG_VERSION"));

/// The specification's payload, fields in its order.
#[derive(Serialize)]
struct Payload<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    timestamp: String,
    data: &'a serde_json::Value,
}

/// The body: the message's type, when it happened (RFC 3339, milliseconds,
/// `Z`), and its data.
pub(super) fn body(message: &Message) -> Vec<u8> {
    let payload = Payload {
        kind: message.event_type,
        timestamp: message
            .created_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        data: &message.data,
    };
    serde_json::to_vec(&payload).unwrap_or_default()
}

/// `webhook-id`: `msg_` and the base64url of the first 18 bytes of the
/// SHA-256 of the destination's and the message's ids — the same on every
/// retry of one delivery, different for another destination or message.
pub(super) fn webhook_id(destination_id: Uuid, message_id: Uuid) -> String {
    let digest = Sha256::new()
        .chain_update(destination_id.as_bytes())
        .chain_update(message_id.as_bytes())
        .finalize();
    format!("msg_{}", URL_SAFE_NO_PAD.encode(&digest[..18]))
}

/// The HMAC key of a secret: the base64 after `whsec_` (or the whole
/// secret without it, as the specification's libraries take it).
pub(super) fn signing_key(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    match STANDARD.decode(encoded.trim()) {
        Ok(key) if !key.is_empty() => Ok(key),
        // Never the secret itself in the reason.
        _ => Err("the webhook's signing secret is not `whsec_` and base64".into()),
    }
}

/// `webhook-signature`: `v1,` and the base64 of the HMAC-SHA256 of
/// `{id}.{timestamp}.{body}`.
pub(super) fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The outcome of the endpoint's answer: 2xx delivered; 410 Gone, the one
/// status the specification gives a receiver to say "stop sending here",
/// disables the destination; 429 and 5xx are retried (no sooner than
/// `Retry-After`); anything else, a redirect included (never followed), is
/// refused.
pub(super) fn classify(answer: &Answer) -> PushOutcome {
    let status = answer.status;
    if answer.is_success() {
        return PushOutcome::Delivered { apns_id: None };
    }
    if status == 410 {
        return PushOutcome::DeviceGone {
            reason: "the endpoint answered 410 Gone".into(),
        };
    }
    let class = if is_transient_status(status) {
        Class::Transient
    } else {
        Class::Permanent
    };
    let reason = if (300..400).contains(&status) {
        format!("the endpoint answered {status}: redirects are not followed")
    } else {
        format!("the endpoint answered {status}")
    };
    class.outcome(reason, retry_after(&answer.headers))
}

pub(super) async fn send(
    client: &GuardedClient,
    url: &str,
    secret: &str,
    destination_id: Uuid,
    message: &Message,
) -> PushOutcome {
    let key = match signing_key(secret) {
        Ok(key) => key,
        Err(reason) => return PushOutcome::Rejected { reason },
    };
    let body = body(message);
    let id = webhook_id(destination_id, message.id);
    let timestamp = chrono::Utc::now().timestamp();
    let signature = signature(&key, &id, timestamp, &body);
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    set("content-type", "application/json");
    set("user-agent", USER_AGENT);
    set("webhook-id", &id);
    set("webhook-timestamp", &timestamp.to_string());
    set("webhook-signature", &signature);
    match post(client, url, headers, body, "the endpoint").await {
        Ok(answer) => classify(&answer),
        Err(outcome) => outcome,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use common::store::Priority;

    use super::*;
    use crate::destinations::sample;

    #[test]
    fn the_signature_is_the_specifications_example() {
        // The Standard Webhooks README's example, verbatim.
        let key = signing_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("key");
        assert_eq!(
            signature(
                &key,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_id_timestamp_and_body() {
        // Independently: HMAC(K, m) = H((K ^ opad) || H((K ^ ipad) || m)).
        let key = [7u8; 32];
        let id = "msg_abc";
        let body = br#"{"type":"event.created"}"#;
        let mut padded = [0u8; 64];
        padded[..32].copy_from_slice(&key);
        let inner = Sha256::new()
            .chain_update(padded.map(|b| b ^ 0x36))
            .chain_update(b"msg_abc.1700000000.")
            .chain_update(body)
            .finalize();
        let outer = Sha256::new()
            .chain_update(padded.map(|b| b ^ 0x5c))
            .chain_update(inner)
            .finalize();
        let secret = format!("whsec_{}", STANDARD.encode(key));
        assert_eq!(
            signature(&signing_key(&secret).expect("key"), id, 1_700_000_000, body),
            format!("v1,{}", STANDARD.encode(outer))
        );
    }

    #[test]
    fn a_secret_that_is_not_base64_is_rejected_without_showing_it() {
        let reason = signing_key("whsec_not base64!!").expect_err("refused");
        assert!(!reason.contains("not base64!!"));
        assert!(signing_key("whsec_").is_err());
    }

    #[test]
    fn the_id_is_stable_per_delivery() {
        let (d1, d2) = (Uuid::now_v7(), Uuid::now_v7());
        let (m1, m2) = (Uuid::now_v7(), Uuid::now_v7());
        assert_eq!(webhook_id(d1, m1), webhook_id(d1, m1));
        assert_ne!(webhook_id(d1, m1), webhook_id(d2, m1));
        assert_ne!(webhook_id(d1, m1), webhook_id(d1, m2));
        let id = webhook_id(d1, m1);
        assert!(id.starts_with("msg_") && id.len() == 4 + 24, "{id}");
    }

    #[test]
    fn the_body_is_type_timestamp_and_data() {
        let message = sample(Some("Card declined"), Priority::High);
        let body = String::from_utf8(body(&message)).expect("utf-8");
        assert_eq!(
            body,
            format!(
                r#"{{"type":"event.created","timestamp":"2024-05-06T07:08:09.000Z","data":{}}}"#,
                message.data
            )
        );
    }

    #[test]
    fn a_markdown_events_data_has_its_parser_html_and_url() {
        let body: serde_json::Value =
            serde_json::from_slice(&body(&crate::destinations::markdown_event())).expect("JSON");
        let data = &body["data"];
        assert_eq!(data["description"], crate::push::MARKDOWN, "as written");
        assert_eq!(data["parser"], "markdown");
        let html = data["descriptionHtml"].as_str().expect("HTML");
        assert!(html.contains("<strong>Deploy 42</strong>"), "{html}");
        assert_eq!(data["url"], crate::destinations::EVENT_URL, "as written");
    }

    #[test]
    fn answers_are_classified() {
        let delivered = PushOutcome::Delivered { apns_id: None };
        assert_eq!(classify(&Answer::new(200, "")), delivered);
        assert_eq!(classify(&Answer::new(204, "")), delivered);
        assert_eq!(
            classify(&Answer::new(410, "")),
            PushOutcome::DeviceGone {
                reason: "the endpoint answered 410 Gone".into()
            }
        );
        assert_eq!(
            classify(&Answer::new(429, "").with_header("retry-after", "30")),
            PushOutcome::Retry {
                reason: "the endpoint answered 429".into(),
                after: Some(Duration::from_secs(30)),
            }
        );
        assert!(matches!(
            classify(&Answer::new(503, "")),
            PushOutcome::Retry { after: None, .. }
        ));
        for status in [400, 401, 403, 404, 413] {
            assert_eq!(
                classify(&Answer::new(status, "")),
                PushOutcome::Rejected {
                    reason: format!("the endpoint answered {status}")
                }
            );
        }
        assert!(matches!(
            classify(&Answer::new(301, "")),
            PushOutcome::Rejected { .. }
        ));
    }
}

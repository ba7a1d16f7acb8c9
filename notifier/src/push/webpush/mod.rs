//! The Web Push provider: RFC 8030 delivery (`TTL`, `Urgency`, `Topic`),
//! the payload encrypted per RFC 8291/8188 (`Content-Encoding: aes128gcm`)
//! by `web-push-native` (pure RustCrypto: p256, hkdf, aes-gcm), and RFC 8292
//! VAPID authorization ([`vapid`]), sent through a client that refuses
//! non-public endpoints ([`client`]). What the push service's status means
//! (retry, refused, subscription gone) is the retry policy's
//! (`crate::retry::classify`).

pub mod vapid;

use async_trait::async_trait;
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use common::webpush_keys::SubscriptionKeys;
use reqwest::header::{HeaderMap, HeaderValue};
use sha2::{Digest as _, Sha256};
use web_push_native::Auth;

use super::{
    Alert, Priority, Push, PushOutcome, PushProvider, PushTarget, WebPushSubscription,
    fit_body_and_url, retry_after,
};
use crate::guarded::{GuardedClient, SendError};
use crate::retry::classify::{self, Service};
use vapid::VapidKey;

/// How long a push service keeps an alert for a browser that is offline.
const TTL_SECONDS: u32 = 24 * 60 * 60;
/// The most plaintext one aes128gcm record of a push carries: push services
/// accept 4096 bytes of body, of which 86 are the header, 16 the tag and
/// one the padding delimiter.
const MAX_PLAINTEXT: usize = 3993;

/// Sends Web Push messages signed with the configured VAPID key.
pub struct WebPushProvider {
    key: VapidKey,
    client: GuardedClient,
}

impl WebPushProvider {
    pub fn new(key: VapidKey, client: GuardedClient) -> Self {
        Self { key, client }
    }

    fn request(
        &self,
        sub: &WebPushSubscription,
        alert: &Alert,
    ) -> Result<(HeaderMap, Vec<u8>), String> {
        let keys = SubscriptionKeys::decode(&sub.p256dh, &sub.auth)
            .map_err(|fault| format!("the subscription's key {fault}"))?;
        let body =
            web_push_native::encrypt(payload(alert), &keys.p256dh, Auth::from_slice(&keys.auth))
                .map_err(|e| format!("encryption failed: {e}"))?;
        let origin = url::Url::parse(&sub.endpoint)
            .map_err(|_| "the endpoint is not a URL")?
            .origin()
            .ascii_serialization();
        let authorization = self.key.authorization(&origin)?;
        let mut headers = HeaderMap::new();
        let mut set = |name: &'static str, value: String| {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        };
        set("ttl", TTL_SECONDS.to_string());
        set("urgency", urgency(alert.priority).into());
        set("topic", topic(alert));
        set("content-encoding", "aes128gcm".into());
        set("content-type", "application/octet-stream".into());
        set("authorization", authorization);
        Ok((headers, body))
    }
}

/// What the page's service worker receives: the title with the icon, the
/// body (plain text), the channel (the `thread` it groups by), the event's
/// id, its alert key, the `tag` the notification is shown under, so an
/// alert with the same tag replaces it, and the `url` a click opens (null:
/// the feed at the event).
fn payload(alert: &Alert) -> Vec<u8> {
    let title = alert.display_title();
    fit_body_and_url(
        alert.body.clone(),
        alert.url.as_deref(),
        MAX_PLAINTEXT,
        |body, url| {
            serde_json::json!({
                "title": title,
                "body": body,
                "channel": alert.channel,
                "thread": alert.channel,
                "eventId": (!alert.summary).then_some(alert.event_id),
                "summaryId": alert.summary.then_some(alert.event_id),
                "alertKey": alert.alert_key,
                "tag": alert.collapse_id,
                "url": url,
            })
            .to_string()
            .into_bytes()
        },
    )
}

/// RFC 8030 §5.3 `Urgency`: the event's priority, word for word (a push
/// service may hold `low` messages back while the device saves power).
fn urgency(priority: Priority) -> &'static str {
    match priority {
        Priority::Low => "low",
        Priority::Normal => "normal",
        Priority::High => "high",
    }
}

/// RFC 8030 `Topic`: at most 32 base64url characters, so a push waiting
/// at the push service is replaced by a later one with the same topic. The
/// collapse id of an alert with a key is already of that form (the
/// project's later alerts with the key replace it); the event id is not,
/// and is hashed to it (a push sent again, a retry whose first try did
/// arrive, replaces the one still waiting instead of showing twice).
fn topic(alert: &Alert) -> String {
    if alert.alert_key.is_some() {
        return alert.collapse_id.clone();
    }
    let digest = Sha256::digest(alert.event_id.as_bytes());
    URL_SAFE_NO_PAD.encode(&digest[..24])
}

/// The outcome of the push service's answer (RFC 8030 §5, §7), of the class
/// the retry policy gives its status.
fn classify(status: u16, headers: &HeaderMap) -> PushOutcome {
    if (200..=299).contains(&status) {
        return PushOutcome::Delivered { apns_id: None };
    }
    let reason = format!("push service answered {status}");
    classify::http_status(Service::WebPush, status).outcome(reason, retry_after(headers))
}

#[async_trait]
impl PushProvider for WebPushProvider {
    fn name(&self) -> &'static str {
        "webpush"
    }

    async fn send(&self, push: &Push) -> PushOutcome {
        let PushTarget::WebPush(sub) = &push.target else {
            return PushOutcome::Rejected {
                reason: "not a Web Push device".into(),
            };
        };
        let (headers, body) = match self.request(sub, &push.alert) {
            Ok(request) => request,
            Err(reason) => return PushOutcome::DeviceGone { reason },
        };
        match self.client.post(&sub.endpoint, headers, body).await {
            Ok(response) => classify(response.status().as_u16(), response.headers()),
            Err(SendError::Refused(refusal)) => PushOutcome::Rejected {
                reason: format!("endpoint refused, not contacted: it {refusal}"),
            },
            // Without the URL: the endpoint is a capability.
            Err(SendError::Transport(e)) => {
                classify::unanswered(format!("push service unreachable: {}", e.without_url()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn alert(body: Option<String>) -> Alert {
        crate::push::sample_alert(body, Priority::Normal)
    }

    #[test]
    fn the_payload_carries_title_with_icon_body_channel_and_event() {
        let json: serde_json::Value =
            serde_json::from_slice(&payload(&alert(Some("Card declined".into())))).expect("json");
        assert_eq!(json["title"], "💸 Payment failed");
        assert_eq!(json["body"], "Card declined");
        assert_eq!(json["channel"], "payments");
        assert_eq!(json["eventId"], uuid::Uuid::nil().to_string());
    }

    #[test]
    fn the_payload_carries_the_url_a_click_opens_and_a_markdown_body_as_text() {
        let json: serde_json::Value =
            serde_json::from_slice(&payload(&crate::push::markdown_alert())).expect("json");
        assert_eq!(json["url"], "https://ci.example.com/runs/42?tab=log");
        assert_eq!(json["body"], crate::push::MARKDOWN_AS_TEXT);
        let summary = Alert {
            url: None,
            summary: true,
            ..alert(None)
        };
        let json: serde_json::Value = serde_json::from_slice(&payload(&summary)).expect("json");
        assert_eq!(json["url"], serde_json::Value::Null);
    }

    #[test]
    fn a_long_body_gives_way_to_the_url_and_a_url_too_long_is_left_out() {
        let url = format!("https://shop.example.com/{}", "a".repeat(1_900));
        let long = Alert {
            url: Some(url.clone()),
            ..alert(Some("é".repeat(5000)))
        };
        let bytes = payload(&long);
        assert!(bytes.len() <= MAX_PLAINTEXT, "{}", bytes.len());
        let json: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(json["url"], url.as_str(), "whole");
        assert!(json["body"].as_str().expect("body").ends_with('…'));
        let too_long = Alert {
            url: Some(format!("https://shop.example.com/{}", "a".repeat(4_000))),
            ..alert(Some("Card declined".into()))
        };
        let json: serde_json::Value = serde_json::from_slice(&payload(&too_long)).expect("json");
        assert_eq!(json["url"], serde_json::Value::Null);
        assert_eq!(json["body"], "Card declined");
    }

    #[test]
    fn a_long_body_is_cut_to_fit_one_record() {
        let bytes = payload(&alert(Some("é".repeat(5000))));
        assert!(bytes.len() <= MAX_PLAINTEXT, "{}", bytes.len());
        let json: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        assert!(json["body"].as_str().expect("body").ends_with('…'));
    }

    #[test]
    fn an_alert_key_is_the_topic_and_the_tag() {
        let keyed = Alert {
            alert_key: Some("deploy-42".into()),
            collapse_id: crate::push::collapse_id(
                &common::store::Scope::new("acme", "shop"),
                uuid::Uuid::nil(),
                Some("deploy-42"),
            ),
            ..alert(None)
        };
        assert_eq!(topic(&keyed), keyed.collapse_id);
        let json: serde_json::Value = serde_json::from_slice(&payload(&keyed)).expect("json");
        assert_eq!(json["tag"], keyed.collapse_id.as_str());
        assert_eq!(json["alertKey"], "deploy-42");
        assert_eq!(json["thread"], "payments");
        let plain = alert(None);
        assert_ne!(
            topic(&plain),
            plain.collapse_id,
            "an event id is hashed to fit"
        );
    }

    #[test]
    fn the_topic_is_at_most_32_base64url_characters() {
        let t = topic(&alert(None));
        assert_eq!(t.len(), 32);
        assert!(
            t.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
    }

    #[test]
    fn the_priority_is_the_urgency_word_for_word() {
        assert_eq!(urgency(Priority::Low), "low");
        assert_eq!(urgency(Priority::Normal), "normal");
        assert_eq!(urgency(Priority::High), "high");
    }

    #[test]
    fn answers_are_classified_as_rfc_8030_says() {
        let mut headers = HeaderMap::new();
        assert!(matches!(
            classify(201, &headers),
            PushOutcome::Delivered { .. }
        ));
        assert!(matches!(
            classify(410, &headers),
            PushOutcome::DeviceGone { .. }
        ));
        assert!(matches!(
            classify(404, &headers),
            PushOutcome::DeviceGone { .. }
        ));
        assert!(matches!(
            classify(413, &headers),
            PushOutcome::Rejected { .. }
        ));
        headers.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(
            classify(429, &headers),
            PushOutcome::Retry {
                reason: "push service answered 429".into(),
                after: Some(Duration::from_secs(7)),
            }
        );
        assert!(matches!(
            classify(503, &HeaderMap::new()),
            PushOutcome::Retry { after: None, .. }
        ));
    }
}

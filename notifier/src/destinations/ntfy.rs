//! ntfy (docs.ntfy.sh/publish): JSON publishing — a POST to the server's
//! root with the topic in the body — of the message (the description, or
//! the title when there is none) within ntfy's 4096-byte message limit
//! (past it ntfy would turn the message into an attachment), the title,
//! the tags and the channel as tags, a priority, and the link as the click
//! action; with the destination's access token as a Bearer token. ntfy
//! shows the message as plain text (no `markdown`), so nothing is escaped.
//! A markdown description is sent reduced to its words too, not with
//! `markdown: true`: ntfy documents markdown as rendered by its web app
//! only (its phone apps would show the marks), and that rendering loads
//! the images a description names, which Tocsin shows only as links.

use common::store::Priority;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde_json::json;

use super::{
    Answer, Message, json_headers, post,
    text::{Counted, Measure, fit, one_line, plain, snippet},
};
use crate::{
    guarded::GuardedClient,
    push::{PushOutcome, retry_after},
    retry::classify::{Class, is_transient_status},
};

/// ntfy's default `message-size-limit`, in bytes.
const MAX_MESSAGE: usize = 4096;
/// A title is a header inside ntfy: kept short.
const MAX_TITLE: usize = 1024;
/// ntfy turns the JSON's tags into a header too.
const MAX_TAG: usize = 128;
const MAX_TAGS: usize = 25;

/// Where one destination's messages go.
pub(super) struct Endpoint<'a> {
    pub server_url: &'a str,
    pub topic: &'a str,
    pub token: Option<&'a str>,
}

/// ntfy's priorities: 2 (low), 3 (default), 5 (max, urgent).
pub(super) fn priority(priority: Priority) -> u8 {
    match priority {
        Priority::Low => 2,
        Priority::Normal => 3,
        Priority::High => 5,
    }
}

fn bytes(text: &str, max: usize) -> String {
    fit(text, max, Measure::Bytes, Counted::Sent, plain).text
}

/// The JSON published.
pub(super) fn body(topic: &str, message: &Message) -> serde_json::Value {
    let title = bytes(&one_line(&message.display_title()), MAX_TITLE);
    let text = match message.description.as_deref().map(str::trim) {
        Some(description) if !description.is_empty() => bytes(description, MAX_MESSAGE),
        _ => bytes(&title, MAX_MESSAGE),
    };
    // ntfy joins the tags with commas into one header and splits it again:
    // a comma inside a tag would make two.
    let tags: Vec<String> = message
        .tags
        .iter()
        .chain(std::iter::once(&message.channel))
        .map(|tag| bytes(one_line(tag).replace(',', " ").trim(), MAX_TAG))
        .filter(|tag| !tag.is_empty())
        .take(MAX_TAGS)
        .collect();
    let mut body = json!({
        "topic": topic,
        "message": text,
        "title": title,
        "tags": tags,
        "priority": priority(message.priority),
    });
    if let Some(url) = message.url.as_deref().and_then(|u| url::Url::parse(u).ok()) {
        body["click"] = url.as_str().into();
    }
    body
}

/// ntfy's error: `{"code": 40301, "http": 403, "error": "forbidden"}`.
#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    code: Option<u64>,
    #[serde(default)]
    error: Option<String>,
}

/// The outcome of ntfy's answer: 2xx delivered; 429 (its limits) and 5xx
/// retried; the rest refused with ntfy's code and words. ntfy has no answer
/// that means "this topic is gone" (a topic exists as soon as one publishes
/// to it; 401, 403 and 404 are credentials, access rules or a wrong server
/// URL to fix), so an ntfy destination is never disabled by an answer.
pub(super) fn classify(answer: &Answer) -> PushOutcome {
    let status = answer.status;
    if answer.is_success() {
        return PushOutcome::Delivered { apns_id: None };
    }
    let error: ErrorBody = serde_json::from_slice(&answer.body).unwrap_or_default();
    let mut reason = format!("ntfy answered {status}");
    match (error.code, error.error.as_deref().map(snippet)) {
        (Some(code), Some(words)) => reason.push_str(&format!(" ({code} {words})")),
        (Some(code), None) => reason.push_str(&format!(" ({code})")),
        (None, Some(words)) => reason.push_str(&format!(" ({words})")),
        (None, None) => {}
    }
    let class = if is_transient_status(status) {
        Class::Transient
    } else {
        Class::Permanent
    };
    class.outcome(reason, retry_after(&answer.headers))
}

pub(super) async fn send(
    client: &GuardedClient,
    endpoint: &Endpoint<'_>,
    message: &Message,
) -> PushOutcome {
    let mut headers = json_headers();
    if let Some(token) = endpoint.token.filter(|t| !t.is_empty()) {
        match HeaderValue::from_str(&format!("Bearer {token}")) {
            Ok(mut value) => {
                value.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, value);
            }
            Err(_) => {
                return PushOutcome::Rejected {
                    reason: "the ntfy access token cannot be sent in a header".into(),
                };
            }
        }
    }
    let url = endpoint.server_url.trim_end_matches('/');
    let body = body(endpoint.topic, message).to_string().into_bytes();
    match post(client, url, headers, body, "ntfy").await {
        Ok(answer) => classify(&answer),
        Err(outcome) => outcome,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::destinations::{huge, sample};

    #[test]
    fn the_json_has_topic_message_title_tags_priority_and_click() {
        let json = body("ops", &sample(Some("Card declined"), Priority::High));
        assert_eq!(
            json,
            json!({
                "topic": "ops",
                "message": "Card declined",
                "title": "💸 Payment failed",
                "tags": ["billing", "stripe", "payments"],
                "priority": 5,
                "click": "https://shop.example.com/orders/42?a=1&b=2",
            })
        );
        let untitled = body(
            "ops",
            &Message {
                url: None,
                ..sample(None, Priority::Low)
            },
        );
        assert_eq!(untitled["message"], "💸 Payment failed");
        assert!(untitled.get("click").is_none());
    }

    /// Plain text, not `markdown: true` (the module says why), and the
    /// event's link to click.
    #[test]
    fn a_markdown_event_is_plain_text_with_the_events_link() {
        assert_eq!(
            body("ops", &crate::destinations::markdown_event()),
            json!({
                "topic": "ops",
                "message": crate::push::MARKDOWN_AS_TEXT,
                "title": "Deploy 42",
                "tags": ["deploys"],
                "priority": 5,
                "click": "https://ci.example.com/runs/42?tab=log&x=%3C1%3E",
            })
        );
    }

    #[test]
    fn priorities_map_to_ntfys() {
        assert_eq!(priority(Priority::Low), 2);
        assert_eq!(priority(Priority::Normal), 3);
        assert_eq!(priority(Priority::High), 5);
    }

    #[test]
    fn a_huge_message_stays_within_4096_bytes() {
        for message in [
            huge(Priority::Normal),
            Message {
                description: Some("é😀".repeat(4000)),
                ..sample(None, Priority::Normal)
            },
        ] {
            let json = body("ops", &message);
            let text = json["message"].as_str().expect("message");
            assert!(text.len() <= MAX_MESSAGE, "{}", text.len());
            assert!(text.len() > MAX_MESSAGE - 8);
            assert!(text.ends_with('…'));
            for tag in json["tags"].as_array().expect("tags") {
                let tag = tag.as_str().expect("tag");
                assert!(tag.len() <= MAX_TAG && !tag.contains(','), "{tag}");
            }
            assert!(json["tags"].as_array().expect("tags").len() <= MAX_TAGS);
            // Within ntfy's 32 KB for a JSON body.
            assert!(json.to_string().len() < 32 * 1024);
        }
    }

    #[test]
    fn answers_are_classified() {
        let delivered = PushOutcome::Delivered { apns_id: None };
        assert_eq!(
            classify(&Answer::new(200, r#"{"id":"x","event":"message"}"#)),
            delivered
        );
        assert_eq!(
            classify(&Answer::new(
                403,
                r#"{"code":40301,"http":403,"error":"forbidden"}"#
            )),
            PushOutcome::Rejected {
                reason: "ntfy answered 403 (40301 forbidden)".into()
            }
        );
        for status in [400, 401, 404, 413] {
            assert!(
                matches!(
                    classify(&Answer::new(status, "")),
                    PushOutcome::Rejected { .. }
                ),
                "{status}"
            );
        }
        assert_eq!(
            classify(
                &Answer::new(
                    429,
                    r#"{"code":42901,"http":429,"error":"limit reached: too many requests"}"#
                )
                .with_header("retry-after", "3")
            ),
            PushOutcome::Retry {
                reason: "ntfy answered 429 (42901 limit reached: too many requests)".into(),
                after: Some(Duration::from_secs(3)),
            }
        );
        assert!(matches!(
            classify(&Answer::new(500, "")),
            PushOutcome::Retry { .. }
        ));
    }
}

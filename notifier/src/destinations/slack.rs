//! Slack incoming webhooks (api.slack.com/messaging/webhooks): the alert as
//! Block Kit — a header with the title, a section with the description as
//! mrkdwn, a context line with the channel, tags, priority and link — and
//! the title as the `text` notifications fall back to. User text in mrkdwn
//! has `&`, `<` and `>` escaped (Slack's "Escaping text"), so it cannot
//! open a link or a mention (`<!channel>`); Slack's other formatting
//! (`*bold*`) is kept, as the description's author wrote it. A description
//! written in markdown arrives reduced to plain text (`Message::description`):
//! CommonMark and mrkdwn differ (`**bold**`, `[text](url)`), and Slack would
//! show the marks.

use serde_json::{Value, json};

use super::{
    Answer, Message, json_headers, post,
    text::{Counted, Measure, fit, one_line, plain, snippet},
};
use crate::{
    guarded::GuardedClient,
    push::{PushOutcome, retry_after},
    retry::classify::{Class, is_transient_status},
};

/// A header block's text (Block Kit).
const MAX_HEADER: usize = 150;
/// A section's text.
const MAX_SECTION: usize = 3000;
/// A context element's text: a text object's limit.
const MAX_CONTEXT: usize = 3000;
/// What the context line gives the tags.
const MAX_TAGS: usize = 1000;
/// The fallback `text` (Slack truncates past 40000; a title is short).
const MAX_TEXT: usize = 3000;

/// Slack's mrkdwn control characters.
fn mrkdwn(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        _ => None,
    }
}

fn cut(text: &str, max: usize, escape: super::text::Escape) -> String {
    fit(text, max, Measure::Utf16, Counted::Sent, escape).text
}

/// A link's URL inside `<url|text>`: the URL as the URL parser writes it
/// (spaces, `<`, `>` and quotes percent-encoded), with `|`, which would end
/// it, encoded too, and `&` escaped as everywhere in mrkdwn.
fn link_url(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    let written = url
        .as_str()
        .replace('|', "%7C")
        .replace('<', "%3C")
        .replace('>', "%3E")
        .replace('&', "&amp;");
    Some(written)
}

/// The message: Block Kit, and the fallback text.
pub(super) fn render(message: &Message) -> Value {
    let title = one_line(&message.display_title());
    let title = if title.trim().is_empty() {
        "(untitled)".to_owned()
    } else {
        title
    };
    let mut blocks = vec![json!({
        "type": "header",
        // plain_text: Slack parses no markup in it, so nothing is escaped.
        "text": {"type": "plain_text", "text": cut(&title, MAX_HEADER, plain), "emoji": true},
    })];
    if let Some(description) = message.description.as_deref().map(str::trim)
        && !description.is_empty()
    {
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": cut(description, MAX_SECTION, mrkdwn)},
        }));
    }
    let mut context = vec![cut(
        &format!("#{}", one_line(&message.channel)),
        MAX_CONTEXT,
        mrkdwn,
    )];
    if !message.tags.is_empty() {
        context.push(cut(&one_line(&message.tags.join(", ")), MAX_TAGS, mrkdwn));
    }
    context.push(format!("{} priority", message.priority.as_str()));
    if let Some(url) = message.url.as_deref().and_then(link_url)
        && url.len() + "<|Open>".len() <= MAX_CONTEXT
    {
        context.push(format!("<{url}|Open>"));
    }
    blocks.push(json!({
        "type": "context",
        "elements": context
            .into_iter()
            .map(|text| json!({"type": "mrkdwn", "text": text}))
            .collect::<Vec<_>>(),
    }));
    json!({
        // What a notification shows, and where blocks cannot be shown; it
        // is mrkdwn, so it is escaped too.
        "text": cut(&title, MAX_TEXT, mrkdwn),
        "blocks": blocks,
    })
}

/// Slack's errors that say the webhook, its channel or its workspace is no
/// longer there (api.slack.com/messaging/webhooks#handling_errors):
/// `no_service` (404: the webhook is disabled, removed or invalid),
/// `no_team` and `team_disabled` (404: the workspace is gone),
/// `channel_not_found` (404: the channel was deleted) and
/// `channel_is_archived` (410). Others — `invalid_token`,
/// `action_prohibited`, `posting_to_general_channel_denied`,
/// `invalid_payload` — are settings or payloads to fix: refused, not gone.
const GONE: &[&str] = &[
    "no_service",
    "no_team",
    "team_disabled",
    "channel_not_found",
    "channel_is_archived",
];

/// The outcome of Slack's answer: 2xx (`ok`) delivered; an error code of
/// [`GONE`] disables the destination; 429 (`rate_limited`, with
/// `Retry-After`) and 5xx (`rollup_error`) are retried; the rest refused.
/// Slack answers errors as a bare word in the body.
pub(super) fn classify(answer: &Answer) -> PushOutcome {
    let status = answer.status;
    if answer.is_success() {
        return PushOutcome::Delivered { apns_id: None };
    }
    let code = snippet(&String::from_utf8_lossy(&answer.body));
    let reason = if code.is_empty() {
        format!("Slack answered {status}")
    } else {
        format!("Slack answered {status} {code}")
    };
    let class = if GONE.contains(&code.as_str()) {
        Class::DeviceGone
    } else if is_transient_status(status) {
        Class::Transient
    } else {
        Class::Permanent
    };
    class.outcome(reason, retry_after(&answer.headers))
}

pub(super) async fn send(client: &GuardedClient, url: &str, message: &Message) -> PushOutcome {
    let body = render(message).to_string().into_bytes();
    match post(client, url, json_headers(), body, "Slack").await {
        Ok(answer) => classify(&answer),
        Err(outcome) => outcome,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use common::store::Priority;

    use super::*;
    use crate::destinations::{huge, sample};

    fn utf16(v: &Value) -> usize {
        v.as_str().expect("text").encode_utf16().count()
    }

    #[test]
    fn the_blocks_carry_title_description_and_context() {
        let json = render(&sample(Some("Card *declined*"), Priority::High));
        assert_eq!(json["text"], "💸 Payment failed");
        let blocks = json["blocks"].as_array().expect("blocks");
        assert_eq!(blocks[0]["type"], "header");
        assert_eq!(blocks[0]["text"]["type"], "plain_text");
        assert_eq!(blocks[0]["text"]["emoji"], true);
        assert_eq!(blocks[0]["text"]["text"], "💸 Payment failed");
        assert_eq!(blocks[1]["text"]["type"], "mrkdwn");
        assert_eq!(blocks[1]["text"]["text"], "Card *declined*");
        let context: Vec<&str> = blocks[2]["elements"]
            .as_array()
            .expect("elements")
            .iter()
            .map(|e| e["text"].as_str().expect("text"))
            .collect();
        assert_eq!(
            context,
            [
                "#payments",
                "billing, stripe",
                "high priority",
                "<https://shop.example.com/orders/42?a=1&amp;b=2|Open>"
            ]
        );
    }

    #[test]
    fn a_markdown_event_is_plain_text_with_the_events_link() {
        let json = render(&crate::destinations::markdown_event());
        assert_eq!(
            json["blocks"][1]["text"]["text"],
            crate::push::MARKDOWN_AS_TEXT
        );
        let context = json["blocks"][2]["elements"].as_array().expect("elements");
        assert_eq!(
            context.last().expect("the link")["text"],
            "<https://ci.example.com/runs/42?tab=log&amp;x=%3C1%3E|Open>"
        );
    }

    #[test]
    fn no_description_no_section() {
        let json = render(&sample(None, Priority::Normal));
        let kinds: Vec<&str> = json["blocks"]
            .as_array()
            .expect("blocks")
            .iter()
            .map(|b| b["type"].as_str().expect("type"))
            .collect();
        assert_eq!(kinds, ["header", "context"]);
    }

    #[test]
    fn user_text_cannot_ping_or_link() {
        let message = Message {
            title: "<!channel> deploy".into(),
            description: Some("hey <!channel> & <@U123> see <https://evil|here>".into()),
            channel: "a<b".into(),
            url: Some("https://x.example/a|b<c>".into()),
            ..sample(None, Priority::Normal)
        };
        let json = render(&message);
        // The header is plain_text, which Slack does not parse: as written.
        assert_eq!(json["blocks"][0]["text"]["text"], "💸 <!channel> deploy");
        assert_eq!(json["text"], "💸 &lt;!channel&gt; deploy");
        assert_eq!(
            json["blocks"][1]["text"]["text"],
            "hey &lt;!channel&gt; &amp; &lt;@U123&gt; see &lt;https://evil|here&gt;"
        );
        let context = &json["blocks"][2]["elements"];
        assert_eq!(context[0]["text"], "#a&lt;b");
        assert_eq!(context[3]["text"], "<https://x.example/a%7Cb%3Cc%3E|Open>");
        // Only the header (plain_text) holds the title as written.
        for element in context.as_array().expect("elements") {
            let t = element["text"].as_str().expect("text");
            assert!(!t.contains("<!"), "{t}");
        }
    }

    #[test]
    fn huge_inputs_stay_within_block_kit_limits() {
        let message = Message {
            title: "t".repeat(500),
            description: Some("d<".repeat(5 * 1024)),
            ..huge(Priority::Low)
        };
        let json = render(&message);
        let blocks = json["blocks"].as_array().expect("blocks");
        assert!(utf16(&blocks[0]["text"]["text"]) <= MAX_HEADER);
        assert!(utf16(&blocks[1]["text"]["text"]) <= MAX_SECTION);
        let section = blocks[1]["text"]["text"].as_str().expect("text");
        assert!(section.ends_with('…'));
        assert!(section.trim_end_matches('…').ends_with("&lt;") || section.ends_with("d…"));
        for element in blocks[2]["elements"].as_array().expect("elements") {
            assert!(utf16(&element["text"]) <= MAX_CONTEXT);
        }
        assert!(utf16(&json["text"]) <= MAX_TEXT);
        let huge = render(&huge(Priority::High));
        let description = huge["blocks"][1]["text"]["text"].as_str().expect("text");
        assert!(description.encode_utf16().count() <= MAX_SECTION);
        assert!(!description.contains("<!channel>"));
    }

    #[test]
    fn answers_are_classified() {
        let delivered = PushOutcome::Delivered { apns_id: None };
        assert_eq!(classify(&Answer::new(200, "ok")), delivered);
        for (status, body) in [
            (404, "no_service"),
            (410, "channel_is_archived"),
            (404, "channel_not_found"),
            (404, "team_disabled"),
        ] {
            assert_eq!(
                classify(&Answer::new(status, body)),
                PushOutcome::DeviceGone {
                    reason: format!("Slack answered {status} {body}")
                }
            );
        }
        assert_eq!(
            classify(&Answer::new(429, "rate_limited").with_header("retry-after", "12")),
            PushOutcome::Retry {
                reason: "Slack answered 429 rate_limited".into(),
                after: Some(Duration::from_secs(12))
            }
        );
        assert!(matches!(
            classify(&Answer::new(500, "rollup_error")),
            PushOutcome::Retry { .. }
        ));
        for (status, body) in [
            (400, "invalid_blocks"),
            (400, "invalid_payload"),
            (403, "invalid_token"),
            (403, "action_prohibited"),
            (404, ""),
        ] {
            assert!(
                matches!(
                    classify(&Answer::new(status, body)),
                    PushOutcome::Rejected { .. }
                ),
                "{status} {body}"
            );
        }
    }
}

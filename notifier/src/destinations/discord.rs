//! Discord webhooks (discord.com/developers/docs/resources/webhook): the
//! alert as one embed — the title, the description, a colour by priority,
//! the channel, priority and tags as fields, the time, the link — within
//! Discord's embed limits (title 256, description 4096, a field's value
//! 1024, 6000 in all), with `allowed_mentions` empty so no `@everyone` or
//! role in an event ever pings.
//!
//! The title and the fields are labels: Discord's Markdown in them is
//! escaped with backslashes. A description written in markdown
//! (`parser: "markdown"`) is sent as written, links included, as the feed
//! shows it rendered: Discord renders it itself, and only `<` is escaped,
//! so it shows no mention, channel or role (nor raw HTML, which Discord
//! shows as text anyway). A text description is shown as Discord's
//! Markdown too, as its author wrote it (as Slack's section is mrkdwn),
//! except links and mentions: `[`, `]` and `<` are escaped, so it cannot
//! mask a link or show a mention.

use std::time::Duration;

use common::store::Priority;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Answer, Message, json_headers, post,
    text::{Counted, Escape, Fitted, Measure, fit, one_line, snippet},
};
use crate::{
    guarded::GuardedClient,
    push::{PushOutcome, retry_after},
    retry::classify::{Class, is_transient_status},
};

const MAX_TITLE: usize = 256;
const MAX_DESCRIPTION: usize = 4096;
const MAX_FIELD_VALUE: usize = 1024;
/// Title, description, fields' names and values, footer and author of
/// every embed of a message, together.
const MAX_EMBED_TOTAL: usize = 6000;
/// An embed's `url` Discord takes.
const MAX_URL: usize = 2048;
const FOOTER: &str = "Tocsin";

/// The colour of each priority: Discord's grey, blurple and red.
pub(super) fn color(priority: Priority) -> u32 {
    match priority {
        Priority::Low => 0x95A5A6,
        Priority::Normal => 0x5865F2,
        Priority::High => 0xED4245,
    }
}

/// Discord's Markdown, mentions and link syntax, in a label.
fn label(c: char) -> Option<&'static str> {
    Some(match c {
        '\\' => "\\\\",
        '*' => "\\*",
        '_' => "\\_",
        '~' => "\\~",
        '`' => "\\`",
        '|' => "\\|",
        '[' => "\\[",
        ']' => "\\]",
        '(' => "\\(",
        ')' => "\\)",
        '<' => "\\<",
        '>' => "\\>",
        '#' => "\\#",
        '-' => "\\-",
        _ => return None,
    })
}

/// Mention syntax (`<@id>`, `<#id>`, `<@&id>`, `<t:…>`) in a markdown
/// description; the rest is the author's markdown.
fn mention(c: char) -> Option<&'static str> {
    (c == '<').then_some("\\<")
}

/// Link and mention syntax in a text description; emphasis, code and lists
/// stay the author's.
fn description_markup(c: char) -> Option<&'static str> {
    match c {
        '[' => Some("\\["),
        ']' => Some("\\]"),
        '<' => Some("\\<"),
        _ => None,
    }
}

fn cut(text: &str, max: usize, escape: Escape) -> Fitted {
    // Discord counts characters; UTF-16 units are never fewer.
    fit(text, max, Measure::Utf16, Counted::Sent, escape)
}

/// The message: one embed, and no mention allowed.
pub(super) fn render(message: &Message) -> Value {
    let title = one_line(&message.display_title());
    let title = if title.trim().is_empty() {
        "(untitled)".to_owned()
    } else {
        title
    };
    let title = cut(&title, MAX_TITLE, label);
    let mut fields = vec![
        (
            "Channel",
            cut(
                &format!("#{}", one_line(&message.channel)),
                MAX_FIELD_VALUE,
                label,
            ),
        ),
        ("Priority", cut(message.priority.as_str(), 16, label)),
    ];
    if !message.tags.is_empty() {
        fields.push((
            "Tags",
            cut(&one_line(&message.tags.join(", ")), MAX_FIELD_VALUE, label),
        ));
    }
    let used = title.size
        + fields
            .iter()
            .map(|(name, value)| name.len() + value.size)
            .sum::<usize>()
        + FOOTER.len();
    let room = MAX_DESCRIPTION.min(MAX_EMBED_TOTAL.saturating_sub(used));
    let mut embed = json!({
        "title": title.text,
        "color": color(message.priority),
        "fields": fields
            .into_iter()
            .map(|(name, value)| json!({"name": name, "value": value.text, "inline": name != "Tags"}))
            .collect::<Vec<_>>(),
        "timestamp": message.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "footer": {"text": FOOTER},
    });
    let (description, escape): (_, Escape) = match &message.markdown {
        Some(markdown) => (Some(markdown.as_str()), mention),
        None => (message.description.as_deref(), description_markup),
    };
    if let Some(description) = description.map(str::trim) {
        let description = cut(description, room, escape);
        if !description.text.is_empty() {
            embed["description"] = description.text.into();
        }
    }
    if let Some(url) = message
        .url
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.as_str().len() <= MAX_URL)
    {
        embed["url"] = url.as_str().into();
    }
    json!({
        "embeds": [embed],
        // Nothing in the message pings: not @everyone, @here, a role or a user.
        "allowed_mentions": {"parse": []},
    })
}

/// Discord's JSON error (`{"code", "message"}`, and `retry_after` in
/// seconds on a 429).
#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    code: Option<u64>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    retry_after: Option<f64>,
}

/// Discord's "Unknown Webhook": the webhook was deleted.
const UNKNOWN_WEBHOOK: u64 = 10015;

/// The outcome of Discord's answer: 2xx (204) delivered; 404 with code
/// 10015 Unknown Webhook, the webhook deleted, disables the destination
/// (a 404 with another code, such as 10003 Unknown Channel for a bad
/// `thread_id`, is a setting to fix: refused; so is 401 50027 Invalid
/// Webhook Token); 429 is retried after the body's `retry_after` (seconds,
/// fractional) or else `Retry-After`; 5xx retried; the rest (400 50035
/// Invalid Form Body, 403) refused.
pub(super) fn classify(answer: &Answer) -> PushOutcome {
    let status = answer.status;
    if answer.is_success() {
        return PushOutcome::Delivered { apns_id: None };
    }
    let error: ErrorBody = serde_json::from_slice(&answer.body).unwrap_or_default();
    let mut reason = format!("Discord answered {status}");
    if let Some(code) = error.code.filter(|c| *c != 0) {
        reason.push_str(&format!(" {code}"));
    }
    if let Some(message) = error.message.as_deref().map(snippet)
        && !message.is_empty()
    {
        reason.push_str(&format!(" {message}"));
    }
    let class = if status == 404 && error.code == Some(UNKNOWN_WEBHOOK) {
        Class::DeviceGone
    } else if is_transient_status(status) {
        Class::Transient
    } else {
        Class::Permanent
    };
    let after = error
        .retry_after
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .filter(|_| status == 429)
        .or_else(|| retry_after(&answer.headers));
    class.outcome(reason, after)
}

pub(super) async fn send(client: &GuardedClient, url: &str, message: &Message) -> PushOutcome {
    let body = render(message).to_string().into_bytes();
    match post(client, url, json_headers(), body, "Discord").await {
        Ok(answer) => classify(&answer),
        Err(outcome) => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destinations::{huge, sample};

    fn len(v: &Value) -> usize {
        v.as_str().map_or(0, |s| s.encode_utf16().count())
    }

    /// What Discord counts against 6000.
    fn total(embed: &Value) -> usize {
        len(&embed["title"])
            + len(&embed["description"])
            + len(&embed["footer"]["text"])
            + embed["fields"]
                .as_array()
                .expect("fields")
                .iter()
                .map(|f| len(&f["name"]) + len(&f["value"]))
                .sum::<usize>()
    }

    #[test]
    fn the_embed_carries_everything() {
        let json = render(&sample(Some("Card **declined**"), Priority::High));
        assert_eq!(json["allowed_mentions"], json!({"parse": []}));
        let embed = &json["embeds"][0];
        assert_eq!(embed["title"], "💸 Payment failed");
        assert_eq!(embed["description"], "Card **declined**");
        assert_eq!(embed["color"], 0xED4245);
        assert_eq!(embed["timestamp"], "2024-05-06T07:08:09.000Z");
        assert_eq!(embed["url"], "https://shop.example.com/orders/42?a=1&b=2");
        assert_eq!(embed["footer"]["text"], "Tocsin");
        assert_eq!(
            embed["fields"],
            json!([
                {"name": "Channel", "value": "\\#payments", "inline": true},
                {"name": "Priority", "value": "high", "inline": true},
                {"name": "Tags", "value": "billing, stripe", "inline": false},
            ])
        );
    }

    #[test]
    fn colours_follow_the_priority() {
        for (priority, colour) in [
            (Priority::Low, 0x95A5A6),
            (Priority::Normal, 0x5865F2),
            (Priority::High, 0xED4245),
        ] {
            assert_eq!(
                render(&sample(None, priority))["embeds"][0]["color"],
                colour
            );
        }
    }

    #[test]
    fn links_and_mentions_are_escaped_and_never_ping() {
        let message = Message {
            title: "**@everyone** [x](https://evil)".into(),
            description: Some("@everyone <@&123> [click](https://evil.example) *ok*".into()),
            url: None,
            tags: vec![],
            ..sample(None, Priority::Normal)
        };
        let json = render(&message);
        let embed = &json["embeds"][0];
        assert_eq!(
            embed["title"],
            "💸 \\*\\*@everyone\\*\\* \\[x\\]\\(https://evil\\)"
        );
        assert_eq!(
            embed["description"],
            "@everyone \\<@&123> \\[click\\](https://evil.example) *ok*"
        );
        assert!(embed.get("url").is_none());
        assert_eq!(embed["fields"].as_array().expect("fields").len(), 2);
        assert_eq!(json["allowed_mentions"]["parse"], json!([]));
    }

    #[test]
    fn a_markdown_description_is_sent_as_written_with_its_links_but_no_mention() {
        let message = Message {
            description: Some("Deploy failed log".into()),
            markdown: Some(
                "**Deploy** failed: [log](https://ci.example.com/42) <@&123> <b>raw</b>".into(),
            ),
            ..sample(None, Priority::High)
        };
        let json = render(&message);
        let embed = &json["embeds"][0];
        assert_eq!(
            embed["description"],
            "**Deploy** failed: [log](https://ci.example.com/42) \\<@&123> \\<b>raw\\</b>"
        );
        assert_eq!(embed["url"], "https://shop.example.com/orders/42?a=1&b=2");
        assert_eq!(json["allowed_mentions"], json!({"parse": []}));
    }

    #[test]
    fn a_markdown_event_is_its_markdown_with_the_events_link() {
        let json = render(&crate::destinations::markdown_event());
        let embed = &json["embeds"][0];
        assert_eq!(embed["description"], crate::push::MARKDOWN);
        assert_eq!(
            embed["url"],
            "https://ci.example.com/runs/42?tab=log&x=%3C1%3E"
        );
    }

    #[test]
    fn huge_inputs_stay_within_every_limit() {
        for priority in Priority::ALL {
            let json = render(&huge(priority));
            let embed = &json["embeds"][0];
            assert!(len(&embed["title"]) <= MAX_TITLE);
            assert!(len(&embed["description"]) <= MAX_DESCRIPTION);
            assert!(
                len(&embed["description"]) > 1000,
                "the description keeps its room"
            );
            for field in embed["fields"].as_array().expect("fields") {
                assert!(len(&field["value"]) <= MAX_FIELD_VALUE);
                assert!(len(&field["name"]) <= 256);
            }
            assert!(total(embed) <= MAX_EMBED_TOTAL, "{}", total(embed));
            assert_eq!(json["allowed_mentions"], json!({"parse": []}));
        }
    }

    #[test]
    fn answers_are_classified() {
        let delivered = PushOutcome::Delivered { apns_id: None };
        assert_eq!(classify(&Answer::new(204, "")), delivered);
        assert_eq!(classify(&Answer::new(200, "{}")), delivered);
        assert_eq!(
            classify(&Answer::new(
                404,
                r#"{"message": "Unknown Webhook", "code": 10015}"#
            )),
            PushOutcome::DeviceGone {
                reason: "Discord answered 404 10015 Unknown Webhook".into()
            }
        );
        assert!(matches!(
            classify(&Answer::new(
                404,
                r#"{"message": "Unknown Channel", "code": 10003}"#
            )),
            PushOutcome::Rejected { .. }
        ));
        assert_eq!(
            classify(&Answer::new(
                400,
                r#"{"code": 50035, "message": "Invalid Form Body", "errors": {}}"#
            )),
            PushOutcome::Rejected {
                reason: "Discord answered 400 50035 Invalid Form Body".into()
            }
        );
        assert!(matches!(
            classify(&Answer::new(
                401,
                r#"{"message": "Invalid Webhook Token", "code": 50027}"#
            )),
            PushOutcome::Rejected { .. }
        ));
        assert_eq!(
            classify(
                &Answer::new(
                    429,
                    r#"{"message": "You are being rate limited.", "retry_after": 0.75, "global": false}"#
                )
                .with_header("retry-after", "1")
            ),
            PushOutcome::Retry {
                reason: "Discord answered 429 You are being rate limited.".into(),
                after: Some(Duration::from_millis(750)),
            }
        );
        // Cloudflare's 429 has no JSON: the header.
        assert!(matches!(
            classify(&Answer::new(429, "<html>").with_header("retry-after", "5")),
            PushOutcome::Retry { after: Some(d), .. } if d == Duration::from_secs(5)
        ));
        assert!(matches!(
            classify(&Answer::new(502, "")),
            PushOutcome::Retry { after: None, .. }
        ));
    }
}

//! Telegram (core.telegram.org/bots/api#sendmessage): the bot's
//! `sendMessage` to the destination's chat, in the HTML parse mode — the
//! title in bold, the description, a line with the channel, tags, priority
//! and an "Open" link — without a link preview, silent for a low priority.
//! Every user string has `&`, `<`, `>` and `"` escaped, and the text is
//! kept within Telegram's 4096 characters as it counts them: once entities
//! are parsed, the tags gone and the entities decoded. The description is
//! what is cut, never inside an entity. A description written in markdown
//! arrives reduced to plain text (`Message::description`): Telegram's HTML
//! mode knows none of the block tags markdown makes.
//!
//! The bot token is in the request's path: it never appears in a reason
//! (and the Bot API's descriptions carry none).

use std::time::Duration;

use common::store::Priority;
use serde::Deserialize;
use serde_json::json;

use super::{
    Answer, Message, json_headers, post,
    text::{Counted, Fitted, Measure, fit, one_line, snippet, telegram_html},
};
use crate::{
    guarded::GuardedClient,
    push::{PushOutcome, retry_after},
    retry::classify::{Class, is_transient_status},
};

/// A message's text, after entities parsing.
const MAX_TEXT: usize = 4096;
/// What the title may take of it.
const MAX_TITLE: usize = 256;
/// What the channel, tags and priority line may take of it.
const MAX_META: usize = 512;

/// Where one destination's messages go.
pub(super) struct Endpoint<'a> {
    /// The Bot API's base, without a trailing slash.
    pub base_url: &'a str,
    pub bot_token: &'a str,
    pub chat_id: &'a str,
}

/// Whether `token` has the form BotFather gives (`123456:AAE…`): the token
/// goes in the URL's path, where a `/`, `?` or `..` would change what is
/// requested.
fn token_is_well_formed(token: &str) -> bool {
    token.split_once(':').is_some_and(|(bot, secret)| {
        !bot.is_empty()
            && bot.bytes().all(|b| b.is_ascii_digit())
            && !secret.is_empty()
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

fn shown(text: &str, max: usize) -> Fitted {
    fit(text, max, Measure::Utf16, Counted::Shown, telegram_html)
}

/// The text, in Telegram's HTML, at most [`MAX_TEXT`] shown.
pub(super) fn text(message: &Message) -> String {
    let title = one_line(&message.display_title());
    let title = if title.trim().is_empty() {
        "(untitled)".to_owned()
    } else {
        title
    };
    let title = shown(&title, MAX_TITLE);
    let mut meta = format!("#{}", one_line(&message.channel));
    if !message.tags.is_empty() {
        meta.push_str(" · ");
        meta.push_str(&one_line(&message.tags.join(", ")));
    }
    meta.push_str(&format!(" · {} priority", message.priority.as_str()));
    let meta = shown(&meta, MAX_META);
    let link = message
        .url
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok())
        .map(|url| {
            let href: String = url
                .as_str()
                .chars()
                .map(|c| telegram_html(c).map_or_else(|| c.to_string(), str::to_owned))
                .collect();
            (format!(" · <a href=\"{href}\">Open</a>"), " · Open".len())
        });
    let link_size = link.as_ref().map_or(0, |(_, size)| *size);
    let mut text = format!("<b>{}</b>\n", title.text);
    // The title, its newline, the meta line and the link are shown whole;
    // the description has what is left, and a newline.
    let fixed = title.size + 1 + meta.size + link_size;
    if let Some(description) = message.description.as_deref().map(str::trim) {
        let room = MAX_TEXT.saturating_sub(fixed + 1);
        let description = shown(description, room);
        if !description.text.is_empty() {
            text.push_str(&description.text);
            text.push('\n');
        }
    }
    text.push_str(&meta.text);
    if let Some((link, _)) = link {
        text.push_str(&link);
    }
    text
}

/// The `sendMessage` request.
pub(super) fn body(chat_id: &str, message: &Message) -> serde_json::Value {
    json!({
        "chat_id": chat_id,
        "text": text(message),
        "parse_mode": "HTML",
        "link_preview_options": {"is_disabled": true},
        "disable_notification": message.priority == Priority::Low,
    })
}

/// The Bot API's answer: `{"ok": true, "result"}`, or `{"ok": false,
/// "error_code", "description", "parameters"}`.
#[derive(Deserialize, Default)]
struct Reply {
    #[serde(default)]
    ok: bool,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Deserialize, Default)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
    #[serde(default)]
    migrate_to_chat_id: Option<i64>,
}

/// The Bot API's descriptions that say the chat is out of the bot's reach
/// for good: the user blocked the bot or deleted their account, the bot was
/// removed from the group or channel, the group was deleted (403), or the
/// chat does not exist, or became a supergroup with another id (400).
/// Others — "bot can't initiate conversation with a user" (the user has
/// not pressed Start yet), "not enough rights", 401 Unauthorized (a
/// revoked token) — are settings to fix: refused, not gone.
const GONE: &[(u16, &str)] = &[
    (403, "bot was blocked by the user"),
    (403, "bot was kicked from"),
    (403, "user is deactivated"),
    (403, "bot is not a member of"),
    (403, "group chat was deleted"),
    (400, "chat not found"),
    (400, "group chat was upgraded to a supergroup chat"),
];

/// The outcome of the Bot API's answer: `ok` delivered; a [`GONE`]
/// description disables the destination; 429 is retried after
/// `parameters.retry_after` (or `Retry-After`); 5xx retried; the rest
/// refused with Telegram's description.
pub(super) fn classify(answer: &Answer) -> PushOutcome {
    let status = answer.status;
    let reply: Reply = serde_json::from_slice(&answer.body).unwrap_or_default();
    if answer.is_success() && reply.ok {
        return PushOutcome::Delivered { apns_id: None };
    }
    let description = reply
        .description
        .as_deref()
        .map(snippet)
        .unwrap_or_default();
    let mut reason = if description.is_empty() {
        format!("Telegram answered {status}")
    } else {
        format!("Telegram answered {status}: {description}")
    };
    let parameters = reply.parameters.unwrap_or_default();
    if let Some(chat) = parameters.migrate_to_chat_id {
        reason.push_str(&format!(" (the chat is now {chat})"));
    }
    let lower = description.to_ascii_lowercase();
    let class = if GONE
        .iter()
        .any(|(code, words)| *code == status && lower.contains(words))
    {
        Class::DeviceGone
    } else if is_transient_status(status) {
        Class::Transient
    } else {
        // A 2xx that is not `ok` is not the Bot API answering.
        Class::Permanent
    };
    let after = parameters
        .retry_after
        .map(Duration::from_secs)
        .or_else(|| retry_after(&answer.headers));
    class.outcome(reason, after)
}

pub(super) async fn send(
    client: &GuardedClient,
    endpoint: &Endpoint<'_>,
    message: &Message,
) -> PushOutcome {
    if !token_is_well_formed(endpoint.bot_token) {
        return PushOutcome::Rejected {
            reason: "the bot token is not of the form <digits>:<letters, digits, _ and ->".into(),
        };
    }
    let url = format!(
        "{}/bot{}/sendMessage",
        endpoint.base_url, endpoint.bot_token
    );
    let body = body(endpoint.chat_id, message).to_string().into_bytes();
    match post(client, &url, json_headers(), body, "Telegram").await {
        Ok(answer) => classify(&answer),
        Err(outcome) => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destinations::{huge, sample};

    /// Telegram's parsing: the tags gone, the entities decoded; `None`
    /// when a `<` or `&` is neither a tag of ours nor an entity.
    fn visible(html: &str) -> Option<String> {
        let mut out = String::new();
        let mut rest = html;
        while let Some(c) = rest.chars().next() {
            if c == '<' {
                let end = rest.find('>')?;
                let tag = &rest[..=end];
                if !(tag == "<b>"
                    || tag == "</b>"
                    || tag == "</a>"
                    || tag.starts_with("<a href=\""))
                {
                    return None;
                }
                rest = &rest[end + 1..];
            } else if c == '&' {
                let (entity, decoded) = [
                    ("&amp;", '&'),
                    ("&lt;", '<'),
                    ("&gt;", '>'),
                    ("&quot;", '"'),
                ]
                .into_iter()
                .find(|(e, _)| rest.starts_with(e))?;
                out.push(decoded);
                rest = &rest[entity.len()..];
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        Some(out)
    }

    #[test]
    fn the_text_is_title_description_and_meta() {
        let text = text(&sample(
            Some("Card <declined> & \"retried\""),
            Priority::High,
        ));
        assert_eq!(
            text,
            "<b>💸 Payment failed</b>\nCard &lt;declined&gt; &amp; &quot;retried&quot;\n\
             #payments · billing, stripe · high priority · \
             <a href=\"https://shop.example.com/orders/42?a=1&amp;b=2\">Open</a>"
        );
        assert_eq!(
            visible(&text).as_deref(),
            Some(
                "💸 Payment failed\nCard <declined> & \"retried\"\n\
                 #payments · billing, stripe · high priority · Open"
            )
        );
    }

    #[test]
    fn a_markdown_event_is_plain_text_with_the_events_link() {
        assert_eq!(
            text(&crate::destinations::markdown_event()),
            format!(
                "<b>Deploy 42</b>\n{}\n#deploys · high priority · \
                 <a href=\"https://ci.example.com/runs/42?tab=log&amp;x=%3C1%3E\">Open</a>",
                crate::push::MARKDOWN_AS_TEXT
            )
        );
    }

    #[test]
    fn the_request_is_html_without_preview_and_quiet_when_low() {
        let low = body("-1001", &sample(None, Priority::Low));
        assert_eq!(low["chat_id"], "-1001");
        assert_eq!(low["parse_mode"], "HTML");
        assert_eq!(low["link_preview_options"], json!({"is_disabled": true}));
        assert_eq!(low["disable_notification"], true);
        assert_eq!(
            body("1", &sample(None, Priority::High))["disable_notification"],
            false
        );
        assert_eq!(
            low["text"],
            "<b>💸 Payment failed</b>\n#payments · billing, stripe · low priority · \
             <a href=\"https://shop.example.com/orders/42?a=1&amp;b=2\">Open</a>"
        );
    }

    #[test]
    fn a_huge_text_fits_as_telegram_counts_it_and_parses() {
        for message in [
            huge(Priority::Normal),
            Message {
                description: Some("<&>".repeat(5000)),
                ..sample(None, Priority::Normal)
            },
            Message {
                description: Some("😀&".repeat(3000)),
                ..sample(None, Priority::Normal)
            },
        ] {
            let html = text(&message);
            let shown = visible(&html).expect("every < and & is a tag or an entity");
            let units = shown.encode_utf16().count();
            assert!(units <= MAX_TEXT, "{units}");
            assert!(
                units > MAX_TEXT - 8,
                "the description fills the room: {units}"
            );
            assert!(shown.contains('…'));
            // The meta line is whole.
            assert!(html.ends_with("</a>"), "{}", &html[html.len() - 40..]);
        }
    }

    #[test]
    fn a_malformed_token_is_refused_before_any_request() {
        assert!(token_is_well_formed("123456:ABC-def_GHI"));
        for token in [
            "", "123456", ":abc", "12a:abc", "1:a/b", "1:../x", "1:a?b", "1:a#b",
        ] {
            assert!(!token_is_well_formed(token), "{token}");
        }
    }

    #[test]
    fn answers_are_classified() {
        let delivered = PushOutcome::Delivered { apns_id: None };
        assert_eq!(
            classify(&Answer::new(
                200,
                r#"{"ok":true,"result":{"message_id":1}}"#
            )),
            delivered
        );
        let error = |status: u16, description: &str| {
            Answer::new(
                status,
                &json!({"ok": false, "error_code": status, "description": description}).to_string(),
            )
        };
        for (status, description) in [
            (403, "Forbidden: bot was blocked by the user"),
            (403, "Forbidden: bot was kicked from the supergroup chat"),
            (403, "Forbidden: user is deactivated"),
            (403, "Forbidden: bot is not a member of the channel chat"),
            (400, "Bad Request: chat not found"),
        ] {
            assert_eq!(
                classify(&error(status, description)),
                PushOutcome::DeviceGone {
                    reason: format!("Telegram answered {status}: {description}")
                }
            );
        }
        let migrated = Answer::new(
            400,
            r#"{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1001234}}"#,
        );
        assert!(matches!(
            classify(&migrated),
            PushOutcome::DeviceGone { reason } if reason.ends_with("(the chat is now -1001234)")
        ));
        assert_eq!(
            classify(&Answer::new(
                429,
                r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#
            )),
            PushOutcome::Retry {
                reason: "Telegram answered 429: Too Many Requests: retry after 7".into(),
                after: Some(Duration::from_secs(7)),
            }
        );
        assert!(matches!(
            classify(&error(502, "Bad Gateway")),
            PushOutcome::Retry { after: None, .. }
        ));
        for (status, description) in [
            (401, "Unauthorized"),
            (
                403,
                "Forbidden: bot can't initiate conversation with a user",
            ),
            (
                400,
                "Bad Request: can't parse entities: Unsupported start tag",
            ),
            (400, "Bad Request: message is too long"),
        ] {
            assert!(
                matches!(
                    classify(&error(status, description)),
                    PushOutcome::Rejected { .. }
                ),
                "{description}"
            );
        }
        // Not the Bot API: a 200 that is not `ok`.
        assert!(matches!(
            classify(&Answer::new(200, "<html>")),
            PushOutcome::Rejected { .. }
        ));
    }
}

//! Email through the operator's SMTP server (lettre): one
//! `multipart/alternative` message to every address of the destination —
//! a text/plain part (a markdown description reduced to its words), then a
//! text/html part (the preferred alternative comes last) with the user's
//! strings HTML-escaped and a markdown description rendered by
//! `common::markdown::to_html`, the sanitiser the feed's HTML goes through
//! (no raw HTML, no images, links to http(s) and mailto only) — with the
//! subject `[{channel}] {title}`. The transport is built once ([`Mailer`]); an SMTP
//! 5xx reply refuses the mail, a 4xx reply or no answer is retried.

use std::time::Duration;

use common::config::Secret;
use lettre::{
    AsyncSmtpTransport, AsyncTransport as _, Tokio1Executor,
    message::{Mailbox, MultiPart},
    transport::smtp::{self, authentication::Credentials},
};

use super::{
    Message, SmtpSecurity, SmtpSettings,
    text::{Counted, Measure, fit, html, one_line, plain, snippet},
};
use uuid::Uuid;

use crate::{push::PushOutcome, retry::classify};

/// A subject is folded by lettre; past this it is cut.
const MAX_SUBJECT: usize = 200;
/// Descriptions are short; a summary's may not be. Mail has no hard limit,
/// but a server's size limit is better not met.
const MAX_DESCRIPTION: usize = 64 * 1024;

/// A mailbox from its text (`Name <address>` or an address).
pub(super) fn mailbox(text: &str) -> Result<Mailbox, lettre::address::AddressError> {
    text.trim().parse()
}

/// The SMTP transport and the sender.
pub(super) struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// Kept to scrub it from reasons.
    password: Option<Secret>,
}

impl Mailer {
    /// The transport of `settings` (checked already), each command given
    /// `timeout`.
    pub(super) fn new(settings: &SmtpSettings, timeout: Duration) -> anyhow::Result<Self> {
        type Transport = AsyncSmtpTransport<Tokio1Executor>;
        let host = settings
            .host
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let builder = match settings.security {
            SmtpSecurity::Tls => Transport::relay(host)?,
            SmtpSecurity::Starttls => Transport::starttls_relay(host)?,
            SmtpSecurity::None => Transport::builder_dangerous(host),
        };
        let mut builder = builder.port(settings.port).timeout(Some(timeout));
        if let (Some(user), Some(password)) = (&settings.user, &settings.password) {
            builder =
                builder.credentials(Credentials::new(user.clone(), password.expose().to_owned()));
        }
        let from = mailbox(&settings.from)
            .map_err(|e| anyhow::anyhow!("the SMTP sender is not a mailbox: {e}"))?;
        Ok(Self {
            transport: builder.build(),
            from,
            password: settings.password.clone(),
        })
    }

    pub(super) fn password(&self) -> Option<&str> {
        self.password.as_ref().map(Secret::expose)
    }

    pub(super) async fn send(
        &self,
        destination_id: Uuid,
        to: &[String],
        message: &Message,
    ) -> PushOutcome {
        let mail = match mail(&self.from, destination_id, to, message) {
            Ok(mail) => mail,
            Err(reason) => return PushOutcome::Rejected { reason },
        };
        match self.transport.send(mail).await {
            Ok(_) => PushOutcome::Delivered { apns_id: None },
            Err(e) => outcome(&Failure::of(&e)),
        }
    }
}

/// The subject: `[{channel}] {title}`, on one line.
pub(super) fn subject(message: &Message) -> String {
    let subject = format!(
        "[{}] {}",
        message.channel.trim(),
        message.display_title().trim()
    );
    fit(
        &one_line(&subject),
        MAX_SUBJECT,
        Measure::Utf16,
        Counted::Sent,
        plain,
    )
    .text
}

fn description(message: &Message) -> Option<&str> {
    message
        .description
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
}

/// The channel, tags and priority line.
fn meta(message: &Message) -> String {
    let mut meta = format!("#{}", one_line(&message.channel));
    if !message.tags.is_empty() {
        meta.push_str(" · ");
        meta.push_str(&one_line(&message.tags.join(", ")));
    }
    meta.push_str(&format!(" · {} priority", message.priority.as_str()));
    meta
}

fn escaped(text: &str, max: usize) -> String {
    fit(text, max, Measure::Utf16, Counted::Shown, html).text
}

/// The text/plain part.
pub(super) fn text_part(message: &Message) -> String {
    let mut text = one_line(&message.display_title());
    text.push_str("\n\n");
    if let Some(description) = description(message) {
        let description = fit(
            description,
            MAX_DESCRIPTION,
            Measure::Utf16,
            Counted::Shown,
            plain,
        );
        text.push_str(&description.text);
        text.push_str("\n\n");
    }
    text.push_str(&meta(message));
    text.push('\n');
    if let Some(url) = &message.url {
        text.push_str(&format!("Open: {}\n", one_line(url)));
    }
    text
}

/// The text/html part: a small layout with inline styles (mail clients
/// ignore style sheets), every user string escaped.
pub(super) fn html_part(message: &Message) -> String {
    let title = escaped(&one_line(&message.display_title()), usize::MAX);
    let mut body = format!("<h2 style=\"margin:0 0 12px;font-size:18px;\">{title}</h2>\n");
    if let Some(markdown) = message
        .markdown
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        // Cut before rendering, so the cut never falls inside a tag.
        let markdown = fit(
            markdown,
            MAX_DESCRIPTION,
            Measure::Utf16,
            Counted::Shown,
            plain,
        );
        body.push_str(&format!(
            "<div style=\"margin:0 0 12px;\">{}</div>\n",
            common::markdown::to_html(&markdown.text)
        ));
    } else if let Some(description) = description(message) {
        body.push_str(&format!(
            "<p style=\"margin:0 0 12px;white-space:pre-wrap;\">{}</p>\n",
            escaped(description, MAX_DESCRIPTION)
        ));
    }
    body.push_str(&format!(
        "<p style=\"margin:0 0 12px;color:#6b7280;font-size:13px;\">{}</p>\n",
        escaped(&meta(message), usize::MAX)
    ));
    if let Some(url) = message.url.as_deref().and_then(|u| url::Url::parse(u).ok()) {
        body.push_str(&format!(
            "<p style=\"margin:0;\"><a href=\"{}\" style=\"color:#2563eb;\">Open</a></p>\n",
            escaped(url.as_str(), usize::MAX)
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>{title}</title></head>\n\
         <body style=\"font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;\
         color:#111827;line-height:1.5;\">\n{body}</body>\n</html>\n"
    )
}

/// `Message-ID`: the delivery's, as a webhook's `webhook-id` is — the
/// same on every retry of one delivery (a mail store that deduplicates by
/// it shows a mail sent twice once), unique otherwise — at the sender's
/// domain.
pub(super) fn message_id(from: &Mailbox, destination_id: Uuid, message_id: Uuid) -> String {
    format!(
        "<{}@{}>",
        super::webhook::webhook_id(destination_id, message_id),
        from.email.domain()
    )
}

/// The mail to `to`, from `from`, for the destination `destination_id`.
pub(super) fn mail(
    from: &Mailbox,
    destination_id: Uuid,
    to: &[String],
    message: &Message,
) -> Result<lettre::Message, String> {
    if to.is_empty() {
        return Err("the destination has no address to send to".into());
    }
    let mut builder = lettre::Message::builder()
        .from(from.clone())
        .message_id(Some(message_id(from, destination_id, message.id)))
        .subject(subject(message));
    for address in to {
        let mailbox = mailbox(address)
            .map_err(|_| format!("{:?} is not an email address", snippet(address)))?;
        builder = builder.to(mailbox);
    }
    builder
        .multipart(MultiPart::alternative_plain_html(
            text_part(message),
            html_part(message),
        ))
        .map_err(|e| format!("the mail could not be built: {e}"))
}

/// What went wrong with a mail, in the terms that decide its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// A 5xx reply: refused for good.
    Permanent { code: String, reply: String },
    /// A 4xx reply: try later.
    Transient { code: String, reply: String },
    /// Refused here before the server could say (no common
    /// authentication mechanism, a malformed reply).
    Client(String),
    /// No answer: connection, TLS, a timeout.
    Unreachable(String),
}

impl Failure {
    fn of(error: &smtp::Error) -> Self {
        // The server's reply, without lettre's "permanent error (550): ".
        let reply = std::error::Error::source(error)
            .map(|s| snippet(&s.to_string()))
            .unwrap_or_default();
        match error.status() {
            Some(code) if error.is_permanent() => Self::Permanent {
                code: code.to_string(),
                reply,
            },
            Some(code) => Self::Transient {
                code: code.to_string(),
                reply,
            },
            None if error.is_client() => Self::Client(snippet(&error.to_string())),
            None => Self::Unreachable(snippet(&error.to_string())),
        }
    }
}

/// A 5xx reply refuses the mail, with the server's code and words (the
/// SMTP conversation carries no credential back); a 4xx reply, a lost
/// connection, a timeout or a TLS failure are retried; an error of the
/// client itself is refused.
pub(super) fn outcome(failure: &Failure) -> PushOutcome {
    match failure {
        Failure::Permanent { code, reply } => PushOutcome::Rejected {
            reason: format!("the SMTP server refused the mail: {code} {reply}")
                .trim_end()
                .to_owned(),
        },
        Failure::Transient { code, reply } => classify::unanswered(
            format!("the SMTP server deferred the mail: {code} {reply}")
                .trim_end()
                .to_owned(),
        ),
        Failure::Client(detail) => PushOutcome::Rejected {
            reason: format!("the mail could not be sent: {detail}"),
        },
        Failure::Unreachable(detail) => {
            classify::unanswered(format!("the SMTP server did not answer: {detail}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use common::store::Priority;

    use super::*;
    use crate::destinations::sample;

    fn from() -> Mailbox {
        mailbox("Tocsin <alerts@example.com>").expect("mailbox")
    }

    fn formatted(mail: &lettre::Message) -> String {
        String::from_utf8(mail.formatted()).expect("utf-8")
    }

    #[test]
    fn the_mail_is_multipart_alternative_with_both_parts_and_the_subject() {
        // Without the icon, the subject is ASCII and not RFC 2047-encoded.
        let message = Message {
            icon: None,
            ..sample(Some("Card declined"), Priority::High)
        };
        let destination = Uuid::now_v7();
        let mail = mail(
            &from(),
            destination,
            &["ops@example.com".into(), "Dev <dev@example.com>".into()],
            &message,
        )
        .expect("mail");
        let raw = formatted(&mail);
        assert!(raw.contains("Subject: [payments] Payment failed"), "{raw}");
        assert!(raw.contains("From: Tocsin <alerts@example.com>"), "{raw}");
        assert!(raw.contains("ops@example.com") && raw.contains("dev@example.com"));
        assert!(raw.contains("Content-Type: multipart/alternative"), "{raw}");
        let plain_at = raw.find("Content-Type: text/plain").expect("text/plain");
        let html_at = raw.find("Content-Type: text/html").expect("text/html");
        assert!(plain_at < html_at, "the preferred alternative comes last");
        assert_eq!(mail.envelope().to().len(), 2);
        for header in ["Date: ", "MIME-Version: 1.0"] {
            assert!(raw.contains(header), "{header} in {raw}");
        }
        let id = message_id(&from(), destination, message.id);
        assert!(raw.contains(&format!("Message-ID: {id}")), "{raw}");
        assert!(id.starts_with("<msg_") && id.ends_with("@example.com>"));
        assert_ne!(id, message_id(&from(), Uuid::now_v7(), message.id));
        assert_eq!(
            subject(&sample(None, Priority::Normal)),
            "[payments] 💸 Payment failed"
        );
    }

    #[test]
    fn the_parts_say_everything_and_the_html_is_escaped() {
        let message = Message {
            title: "<script>alert(1)</script>".into(),
            description: Some("a & b <i>\"q\"</i>\nline 2".into()),
            ..sample(None, Priority::Low)
        };
        let text = text_part(&message);
        assert_eq!(
            text,
            "💸 <script>alert(1)</script>\n\na & b <i>\"q\"</i>\nline 2\n\n\
             #payments · billing, stripe · low priority\n\
             Open: https://shop.example.com/orders/42?a=1&b=2\n"
        );
        let html = html_part(&message);
        assert!(!html.contains("<script>") && !html.contains("<i>"));
        assert!(html.contains("💸 &lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("a &amp; b &lt;i&gt;&quot;q&quot;&lt;/i&gt;\nline 2"));
        assert!(html.contains("#payments · billing, stripe · low priority"));
        assert!(html.contains("<a href=\"https://shop.example.com/orders/42?a=1&amp;b=2\""));
        let no_url = html_part(&Message {
            url: None,
            ..message
        });
        assert!(!no_url.contains("Open"));
    }

    #[test]
    fn a_markdown_description_is_sanitised_html_and_plain_text() {
        let message = Message {
            description: Some("Deploy failed, see the log. alert(1)".into()),
            markdown: Some(
                "**Deploy** failed, see [the log](https://ci.example.com/42). \
                 <script>alert(1)</script> [x](javascript:alert(2))"
                    .into(),
            ),
            ..sample(None, Priority::High)
        };
        let html = html_part(&message);
        assert!(html.contains("<strong>Deploy</strong>"), "{html}");
        assert!(
            html.contains("<a href=\"https://ci.example.com/42\" rel=\"noopener noreferrer\">"),
            "{html}"
        );
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        let text = text_part(&message);
        assert!(
            text.starts_with("💸 Payment failed\n\nDeploy failed, see the log. alert(1)\n\n"),
            "{text}"
        );
        assert!(!text.contains("**"), "{text}");
    }

    #[test]
    fn a_markdown_event_is_html_and_text_with_the_events_link() {
        let message = crate::destinations::markdown_event();
        let html = html_part(&message);
        assert!(html.contains("<strong>Deploy 42</strong>"), "{html}");
        assert!(html.contains("<li>eu</li>"), "{html}");
        assert!(
            html.contains("<a href=\"https://ci.example.com/runs/42?tab=log&amp;x=%3C1%3E\""),
            "{html}"
        );
        let text = text_part(&message);
        assert!(text.contains(crate::push::MARKDOWN_AS_TEXT), "{text}");
        assert!(
            text.ends_with(&format!("Open: {}\n", crate::destinations::EVENT_URL)),
            "{text}"
        );
    }

    #[test]
    fn a_subject_is_one_line_and_cut() {
        let message = Message {
            title: "a\r\nBcc: evil@example.com".into(),
            icon: None,
            ..sample(None, Priority::Normal)
        };
        assert_eq!(subject(&message), "[payments] a  Bcc: evil@example.com");
        let long = Message {
            title: "x".repeat(1000),
            ..message
        };
        assert!(subject(&long).chars().count() <= MAX_SUBJECT);
    }

    #[test]
    fn addresses_are_checked() {
        let message = sample(None, Priority::Normal);
        assert!(mail(&from(), Uuid::nil(), &[], &message).is_err());
        let reason =
            mail(&from(), Uuid::nil(), &["not an address".into()], &message).expect_err("refused");
        assert!(reason.contains("not an email address"), "{reason}");
    }

    #[test]
    fn smtp_failures_are_classified() {
        assert_eq!(
            outcome(&Failure::Permanent {
                code: "550".into(),
                reply: "5.1.1 Mailbox unavailable".into()
            }),
            PushOutcome::Rejected {
                reason: "the SMTP server refused the mail: 550 5.1.1 Mailbox unavailable".into()
            }
        );
        assert_eq!(
            outcome(&Failure::Transient {
                code: "451".into(),
                reply: "4.3.0 local error".into()
            }),
            PushOutcome::Retry {
                reason: "the SMTP server deferred the mail: 451 4.3.0 local error".into(),
                after: None
            }
        );
        assert!(matches!(
            outcome(&Failure::Unreachable("Connection error: refused".into())),
            PushOutcome::Retry { .. }
        ));
        assert!(matches!(
            outcome(&Failure::Client(
                "No compatible authentication mechanism".into()
            )),
            PushOutcome::Rejected { .. }
        ));
    }

    #[tokio::test]
    async fn an_smtp_server_that_is_not_there_is_retried() {
        let settings = SmtpSettings {
            host: "127.0.0.1".into(),
            port: 1,
            from: "alerts@example.com".into(),
            security: SmtpSecurity::None,
            user: Some("tocsin".into()),
            password: Some(Secret::new("hunter2-password")),
        };
        let mailer = Mailer::new(&settings, Duration::from_secs(2)).expect("mailer");
        let outcome = mailer
            .send(
                Uuid::nil(),
                &["ops@example.com".into()],
                &sample(None, Priority::Normal),
            )
            .await;
        match outcome {
            PushOutcome::Retry { reason, .. } => {
                assert!(
                    reason.starts_with("the SMTP server did not answer"),
                    "{reason}"
                );
                assert!(!reason.contains("hunter2"));
            }
            other => panic!("{other:?}"),
        }
    }
}

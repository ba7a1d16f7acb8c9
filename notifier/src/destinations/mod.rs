//! Destinations' senders: one alert ([`Message`]) to one destination, by
//! kind — a Standard Webhooks POST ([`webhook`]), a Slack incoming webhook
//! ([`slack`]), a Discord webhook ([`discord`]), the Telegram Bot API
//! ([`telegram`]), an ntfy topic ([`ntfy`]) or mail through the operator's
//! SMTP server ([`email`]). Each kind renders the alert within its service's
//! limits ([`text`]), sends it, and reads the answer into a
//! [`PushOutcome`]: `Delivered`; `DeviceGone` when the service says the
//! destination no longer exists (the destination gets disabled); `Retry`
//! for throttling, server errors and no answer, no sooner than the service
//! asked; `Rejected` for anything else.
//!
//! Every HTTP send goes through the SSRF-guarded client
//! ([`crate::guarded`]) with the destinations' policy. A reason never holds
//! a secret (a webhook's signing secret, a Slack or Discord URL, a bot
//! token, an ntfy token, the SMTP password): the senders never put a URL
//! in one, reqwest's errors are shown without theirs, and [`Senders::send`]
//! scrubs what a service may have echoed.
//!
//! [`Senders`] is built once per notifier; what is stored per destination
//! (its opened [`Settings`]) comes with each send.

mod discord;
mod email;
pub mod message;
mod ntfy;
mod slack;
mod telegram;
mod test_send;
mod text;
mod webhook;

pub use message::Message;

use std::time::Duration;

use common::{config::Secret, destination::Settings, endpoint::EndpointPolicy};
use reqwest::header::{HeaderMap, HeaderValue};
use uuid::Uuid;

use crate::{
    guarded::{GuardedClient, SendError},
    push::PushOutcome,
    retry::classify,
};

/// How mail leaves: the operator's SMTP server.
#[derive(Clone)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    /// A mailbox: `Tocsin <alerts@example.com>` or a bare address.
    pub from: String,
    pub security: SmtpSecurity,
    pub user: Option<String>,
    pub password: Option<Secret>,
}

impl std::fmt::Debug for SmtpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password never reaches a log, not even masked by `Secret`.
        f.debug_struct("SmtpSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("from", &self.from)
            .field("security", &self.security)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

/// How the connection to the SMTP server is protected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SmtpSecurity {
    /// Implicit TLS from the first byte (SMTPS, RFC 8314), port 465.
    Tls,
    /// STARTTLS, required: no credentials or mail go out unencrypted when
    /// the server does not offer it.
    #[default]
    Starttls,
    /// Plain text: only for a server on the allow-list
    /// ([`SmtpSettings::check`]).
    None,
}

impl SmtpSecurity {
    /// `tls`, `starttls` or `none` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tls" => Some(Self::Tls),
            "starttls" => Some(Self::Starttls),
            "none" => Some(Self::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tls => "tls",
            Self::Starttls => "starttls",
            Self::None => "none",
        }
    }

    /// The port a server usually takes this on: 465 (submissions), 587
    /// (submission), 25.
    pub fn default_port(self) -> u16 {
        match self {
            Self::Tls => 465,
            Self::Starttls => 587,
            Self::None => 25,
        }
    }
}

impl SmtpSettings {
    /// Whether these settings can send: a host, a `from` that is a
    /// mailbox, a user and a password together or neither, and plain text
    /// (`SmtpSecurity::None`) only to a host the operator allow-listed for
    /// destinations (mail and credentials cross the network in the clear).
    pub fn check(&self, policy: &EndpointPolicy) -> Result<(), String> {
        let host = self.host.trim();
        if host.is_empty() {
            return Err("the SMTP host is empty".into());
        }
        email::mailbox(&self.from).map_err(|e| {
            format!(
                "the SMTP sender {:?} is not a mailbox (\"Name <address>\" or an address): {e}",
                self.from
            )
        })?;
        match (&self.user, &self.password) {
            (Some(_), None) => return Err("an SMTP user is set without a password".into()),
            (None, Some(_)) => return Err("an SMTP password is set without a user".into()),
            _ => {}
        }
        if self.security == SmtpSecurity::None && !host_allowed(host, policy) {
            return Err(format!(
                "SMTP security \"none\" sends mail (and credentials) in plain text: it is \
                 allowed only for a host on the destinations' allow-list, and {host:?} is not"
            ));
        }
        Ok(())
    }
}

/// Whether the allow-list holds `host` (a name, an address, `[v6]`).
fn host_allowed(host: &str, policy: &EndpointPolicy) -> bool {
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    url::Url::parse(&format!("http://{host}/")).is_ok_and(|url| {
        // A URL's host only: "a.b/c" would parse with a path.
        url.path() == "/" && policy.allowed_hosts.contains(&url)
    })
}

/// What the senders need besides each destination's settings.
#[derive(Debug, Clone)]
pub struct SenderSettings {
    /// The destinations' policy (`EndpointPolicy::hosts`).
    pub policy: EndpointPolicy,
    /// The Bot API's base, `https://api.telegram.org` unless the operator
    /// runs their own. Sent through the same guarded client: plain http is
    /// refused unless its host is allow-listed.
    pub telegram_base_url: String,
    /// `None`: email destinations are rejected with a reason that says so.
    pub smtp: Option<SmtpSettings>,
    /// Per request (HTTP) or per SMTP command.
    pub timeout: Duration,
}

/// The reason of an email when the notifier has no SMTP server.
const EMAIL_NOT_CONFIGURED: &str =
    "email is not configured on this notifier: set NOTIFIER_SMTP_HOST and NOTIFIER_SMTP_FROM";

/// The destinations' senders: one guarded HTTP client and, when SMTP is
/// configured, one mail transport, shared by every send.
pub struct Senders {
    http: GuardedClient,
    telegram_base_url: String,
    smtp: Option<email::Mailer>,
}

impl Senders {
    /// Fails on settings that could never send: SMTP settings that do not
    /// pass [`SmtpSettings::check`], a client that cannot be built.
    pub fn new(settings: SenderSettings) -> anyhow::Result<Self> {
        let smtp = match &settings.smtp {
            Some(smtp) => {
                smtp.check(&settings.policy).map_err(anyhow::Error::msg)?;
                Some(email::Mailer::new(smtp, settings.timeout)?)
            }
            None => None,
        };
        Ok(Self {
            http: GuardedClient::new(settings.policy, settings.timeout)?,
            telegram_base_url: settings.telegram_base_url.trim_end_matches('/').to_owned(),
            smtp,
        })
    }

    /// Sends `message` to the destination `destination_id` with
    /// `settings`; never panics, never puts a secret in a reason.
    pub async fn send(
        &self,
        destination_id: Uuid,
        settings: &Settings,
        message: &Message,
    ) -> PushOutcome {
        let outcome = match settings {
            Settings::Webhook { url, secret } => {
                webhook::send(&self.http, url, secret, destination_id, message).await
            }
            Settings::Slack { webhook_url } => slack::send(&self.http, webhook_url, message).await,
            Settings::Discord { webhook_url } => {
                discord::send(&self.http, webhook_url, message).await
            }
            Settings::Telegram { bot_token, chat_id } => {
                let endpoint = telegram::Endpoint {
                    base_url: &self.telegram_base_url,
                    bot_token,
                    chat_id,
                };
                telegram::send(&self.http, &endpoint, message).await
            }
            Settings::Ntfy {
                server_url,
                topic,
                token,
            } => {
                let endpoint = ntfy::Endpoint {
                    server_url,
                    topic,
                    token: token.as_deref(),
                };
                ntfy::send(&self.http, &endpoint, message).await
            }
            Settings::Email { to } => match &self.smtp {
                Some(mailer) => mailer.send(destination_id, to, message).await,
                None => PushOutcome::Rejected {
                    reason: EMAIL_NOT_CONFIGURED.into(),
                },
            },
        };
        let mut secrets = settings.secrets();
        if let Some(password) = self.smtp.as_ref().and_then(email::Mailer::password) {
            secrets.push(password);
        }
        scrub(outcome, &secrets)
    }
}

/// A service's answer, read for classification.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    /// The first [`MAX_ANSWER`] bytes of the body.
    pub body: Vec<u8>,
}

impl Answer {
    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    #[cfg(test)]
    pub(crate) fn new(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: HeaderMap::new(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[cfg(test)]
    pub(crate) fn with_header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.insert(name, HeaderValue::from_static(value));
        self
    }
}

/// The most of an answer's body that is read: error bodies are short, and
/// an endpoint that streams more is not waited for.
const MAX_ANSWER: usize = 64 * 1024;

/// What every HTTP sender sets besides its own headers.
const USER_AGENT: &str = concat!("Tocsin/", env!("CARGO_PKG_VERSION"));

/// Headers for a JSON body, with Tocsin's `User-Agent`.
pub(crate) fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        reqwest::header::USER_AGENT,
        HeaderValue::from_static(USER_AGENT),
    );
    headers
}

/// POSTs `body` to `url` through the guarded client and reads the answer;
/// `service` names the other end in reasons ("Slack", "the endpoint").
/// A refused URL is rejected (the policy will refuse it next time too);
/// no answer is retried. No reason holds the URL.
pub(crate) async fn post(
    client: &GuardedClient,
    url: &str,
    headers: HeaderMap,
    body: Vec<u8>,
    service: &str,
) -> Result<Answer, PushOutcome> {
    match client.post(url, headers, body).await {
        Ok(response) => Ok(read(response).await),
        Err(SendError::Refused(refusal)) => Err(PushOutcome::Rejected {
            reason: format!("{service} was not contacted: its URL {refusal}"),
        }),
        Err(SendError::Transport(e)) => Err(classify::unanswered(format!(
            "{service} did not answer: {}",
            unanswered_reason(e)
        ))),
    }
}

async fn read(mut response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let headers = std::mem::take(response.headers_mut());
    let mut body = Vec::new();
    // An error reading the body leaves what came: the status decides.
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = MAX_ANSWER - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ANSWER {
            break;
        }
    }
    Answer {
        status,
        headers,
        body,
    }
}

/// Why a request got no answer, without its URL (the path of a Slack,
/// Discord or Telegram URL is a credential): reqwest's words and its
/// causes' (connect, DNS, TLS), which name no URL.
fn unanswered_reason(error: reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out".into();
    }
    let error = error.without_url();
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !reason.contains(&text) {
            reason.push_str(": ");
            reason.push_str(&text);
        }
        source = cause.source();
    }
    text::snippet(&reason)
}

/// `outcome` with every secret (and a secret URL's path) taken out of its
/// reason: what a service echoed must not reach the store or a log.
fn scrub(outcome: PushOutcome, secrets: &[&str]) -> PushOutcome {
    let mut needles: Vec<String> = Vec::new();
    for secret in secrets {
        needles.push((*secret).to_owned());
        if let Some(key) = secret.strip_prefix("whsec_") {
            needles.push(key.to_owned());
        }
        if let Ok(url) = url::Url::parse(secret) {
            needles.push(url.path().to_owned());
            needles.extend(url.path_segments().into_iter().flatten().map(str::to_owned));
        }
    }
    // Short pieces ("/", "api", "v10") are not secrets and would mangle
    // every reason.
    needles.retain(|n| n.len() >= 12);
    needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let clean = |mut reason: String| {
        for needle in &needles {
            if reason.contains(needle.as_str()) {
                reason = reason.replace(needle.as_str(), "***");
            }
        }
        reason
    };
    match outcome {
        PushOutcome::Delivered { apns_id } => PushOutcome::Delivered { apns_id },
        PushOutcome::DeviceGone { reason } => PushOutcome::DeviceGone {
            reason: clean(reason),
        },
        PushOutcome::Rejected { reason } => PushOutcome::Rejected {
            reason: clean(reason),
        },
        PushOutcome::Retry { reason, after } => PushOutcome::Retry {
            reason: clean(reason),
            after,
        },
    }
}

/// The reason of an outcome that is not a delivery.
#[cfg(test)]
pub(crate) fn reason_of(outcome: &PushOutcome) -> &str {
    match outcome {
        PushOutcome::Delivered { .. } => "",
        PushOutcome::DeviceGone { reason }
        | PushOutcome::Rejected { reason }
        | PushOutcome::Retry { reason, .. } => reason,
    }
}

/// The alert the senders' unit tests render: every field set.
#[cfg(test)]
pub(crate) fn sample(description: Option<&str>, priority: common::store::Priority) -> Message {
    use chrono::TimeZone as _;
    Message {
        id: Uuid::nil(),
        title: "Payment failed".into(),
        icon: Some("💸".into()),
        description: description.map(str::to_owned),
        markdown: None,
        channel: "payments".into(),
        tags: vec!["billing".into(), "stripe".into()],
        priority,
        url: Some("https://shop.example.com/orders/42?a=1&b=2".into()),
        created_at: chrono::Utc
            .with_ymd_and_hms(2024, 5, 6, 7, 8, 9)
            .single()
            .unwrap_or_default(),
        event_type: "event.created",
        data: serde_json::json!({"id": Uuid::nil(), "title": "Payment failed"}),
    }
}

/// The link of [`markdown_event`].
#[cfg(test)]
pub(crate) const EVENT_URL: &str = "https://ci.example.com/runs/42?tab=log&x=<1>";

/// The message of an event written in markdown (`crate::push::MARKDOWN`),
/// with a `url` and an older `metadata.url`, as the worker makes it.
#[cfg(test)]
pub(crate) fn markdown_event() -> Message {
    let metadata = serde_json::json!({ "url": "https://old.example.com/orders/42" });
    Message::of_event(&common::store::Event {
        description: Some(crate::push::MARKDOWN.into()),
        parser: common::store::Parser::Markdown,
        url: Some(EVENT_URL.into()),
        metadata: metadata.as_object().cloned().unwrap_or_default(),
        ..crate::deliver::sample_event("deploys", "Deploy 42", common::store::Priority::High)
    })
}

/// A message whose every field is far over every limit.
#[cfg(test)]
pub(crate) fn huge(priority: common::store::Priority) -> Message {
    let chunk = "<&>\"' 😀 <!channel> @everyone [x](https://evil.example) *b* ";
    Message {
        title: "T<&>😀".repeat(100),
        description: Some(chunk.repeat(10 * 1024 / chunk.len() + 1)),
        channel: "c<&>".repeat(50),
        tags: (0..40)
            .map(|i| format!("tag{i}<&>,{}", "x".repeat(60)))
            .collect(),
        ..sample(None, priority)
    }
}

#[cfg(test)]
mod tests {
    use common::{endpoint::AllowedHosts, store::Priority};

    use super::*;

    fn senders(allow: &str) -> Senders {
        Senders::new(SenderSettings {
            policy: EndpointPolicy::hosts(AllowedHosts::parse(allow).expect("hosts")),
            telegram_base_url: "http://127.0.0.1:1/".into(),
            smtp: None,
            timeout: Duration::from_secs(2),
        })
        .expect("senders")
    }

    fn smtp(security: SmtpSecurity) -> SmtpSettings {
        SmtpSettings {
            host: "mail.internal".into(),
            port: 25,
            from: "Tocsin <alerts@example.com>".into(),
            security,
            user: Some("tocsin".into()),
            password: Some(Secret::new("hunter2-password")),
        }
    }

    #[test]
    fn security_parses_its_three_words() {
        assert_eq!(SmtpSecurity::parse("tls"), Some(SmtpSecurity::Tls));
        assert_eq!(
            SmtpSecurity::parse("STARTTLS"),
            Some(SmtpSecurity::Starttls)
        );
        assert_eq!(SmtpSecurity::parse("none"), Some(SmtpSecurity::None));
        assert_eq!(SmtpSecurity::parse("ssl"), None);
        assert_eq!(SmtpSecurity::default(), SmtpSecurity::Starttls);
        for s in [
            SmtpSecurity::Tls,
            SmtpSecurity::Starttls,
            SmtpSecurity::None,
        ] {
            assert_eq!(SmtpSecurity::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn plain_smtp_is_only_for_an_allowed_host() {
        let none = EndpointPolicy::default();
        let allowed = EndpointPolicy::hosts(AllowedHosts::parse("mail.internal").expect("hosts"));
        assert!(smtp(SmtpSecurity::Starttls).check(&none).is_ok());
        assert!(smtp(SmtpSecurity::Tls).check(&none).is_ok());
        assert!(smtp(SmtpSecurity::None).check(&none).is_err());
        assert!(smtp(SmtpSecurity::None).check(&allowed).is_ok());
        let loopback =
            EndpointPolicy::hosts(AllowedHosts::parse("127.0.0.0/8, ::1").expect("hosts"));
        for host in ["127.0.0.1", "::1", "[::1]"] {
            let settings = SmtpSettings {
                host: host.into(),
                ..smtp(SmtpSecurity::None)
            };
            assert!(settings.check(&loopback).is_ok(), "{host}");
            assert!(settings.check(&none).is_err(), "{host}");
        }
        let sneaky = SmtpSettings {
            host: "mail.internal/x".into(),
            ..smtp(SmtpSecurity::None)
        };
        assert!(sneaky.check(&allowed).is_err());
    }

    #[test]
    fn smtp_settings_are_checked_and_never_show_the_password() {
        let policy = EndpointPolicy::default();
        let bad_from = SmtpSettings {
            from: "not a mailbox".into(),
            ..smtp(SmtpSecurity::Tls)
        };
        assert!(bad_from.check(&policy).is_err());
        let no_password = SmtpSettings {
            password: None,
            ..smtp(SmtpSecurity::Tls)
        };
        assert!(no_password.check(&policy).is_err());
        let settings = smtp(SmtpSecurity::Tls);
        assert!(!format!("{settings:?}").contains("hunter2"));
        let refused = Senders::new(SenderSettings {
            policy,
            telegram_base_url: "https://api.telegram.org".into(),
            smtp: Some(smtp(SmtpSecurity::None)),
            timeout: Duration::from_secs(1),
        });
        assert!(refused.is_err());
    }

    #[test]
    fn scrubbing_takes_secrets_and_secret_paths_out() {
        let url = "https://hooks.slack.com/services/T000/B000/abcdefghijklmnopqrstuvwx";
        let outcome = PushOutcome::Rejected {
            reason: format!("echoed {url} and /services/T000/B000/abcdefghijklmnopqrstuvwx"),
        };
        let clean = scrub(outcome, &[url]);
        assert!(!reason_of(&clean).contains("abcdefghijklmnop"), "{clean:?}");
        let retry = scrub(
            PushOutcome::Retry {
                reason: "token 123456:ABCDEFGHIJKLMNOP".into(),
                after: None,
            },
            &["123456:ABCDEFGHIJKLMNOP"],
        );
        assert_eq!(reason_of(&retry), "token ***");
    }

    #[tokio::test]
    async fn email_without_smtp_is_rejected_with_what_to_set() {
        let outcome = senders("")
            .send(
                Uuid::nil(),
                &Settings::Email {
                    to: vec!["ops@example.com".into()],
                },
                &sample(None, Priority::Normal),
            )
            .await;
        assert_eq!(
            outcome,
            PushOutcome::Rejected {
                reason: EMAIL_NOT_CONFIGURED.into()
            }
        );
    }

    #[tokio::test]
    async fn no_reason_holds_a_url_or_a_token() {
        let message = sample(Some("x"), Priority::Normal);
        let token = "123456:ABCDEFGHIJKLMNOPQRSTUV";
        let cases = [
            // Refused by the policy: plain http to a host not allowed.
            Settings::Slack {
                webhook_url: "http://hooks.example.com/services/T0/B0/slacksecretslacksecret"
                    .into(),
            },
            Settings::Discord {
                webhook_url: "https://10.0.0.1/api/webhooks/1/discordsecretdiscordsecret".into(),
            },
            // Allowed, and nothing listens: no answer.
            Settings::Slack {
                webhook_url: "http://127.0.0.1:1/services/T0/B0/slacksecretslacksecret".into(),
            },
            Settings::Webhook {
                url: "http://127.0.0.1:1/hook/webhooksecretpath".into(),
                secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            },
            Settings::Telegram {
                bot_token: token.into(),
                chat_id: "-1001".into(),
            },
            Settings::Ntfy {
                server_url: "http://127.0.0.1:1".into(),
                topic: "alerts".into(),
                token: Some("tk_ntfysecretntfysecret".into()),
            },
        ];
        let senders = senders("127.0.0.1");
        for settings in cases {
            let outcome = senders.send(Uuid::nil(), &settings, &message).await;
            let reason = reason_of(&outcome);
            assert!(!reason.is_empty(), "{outcome:?}");
            for needle in ["secret", token, "127.0.0.1", "hooks.example", "10.0.0.1"] {
                assert!(!reason.contains(needle), "{needle} in {reason:?}");
            }
            assert!(
                matches!(
                    outcome,
                    PushOutcome::Rejected { .. } | PushOutcome::Retry { .. }
                ),
                "{outcome:?}"
            );
        }
    }
}

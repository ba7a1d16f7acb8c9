//! Destinations: the places outside Tocsin a project's alerts go besides
//! its devices (a signed webhook, Slack, Discord, Telegram, ntfy, email).
//! What each kind needs to be reached ([`Settings`]), which of it is a
//! secret and how it is shown once it is stored ([`Settings::masked`]),
//! and how a destination's id tells it apart from a device's
//! ([`is_destination_id`]) where both are recipients of one delivery.
//!
//! The secrets are sealed before they are stored ([`crate::sealed`]); the
//! store keeps the sealed text and the masked view, and only the
//! notifier (and the admin API's "send test") opens them.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::sealed::{SealError, SecretsKey};

/// Which service a destination is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DestinationKind {
    Webhook,
    Slack,
    Discord,
    Telegram,
    Ntfy,
    Email,
}

impl DestinationKind {
    pub const ALL: [Self; 6] = [
        Self::Webhook,
        Self::Slack,
        Self::Discord,
        Self::Telegram,
        Self::Ntfy,
        Self::Email,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Slack => "slack",
            Self::Discord => "discord",
            Self::Telegram => "telegram",
            Self::Ntfy => "ntfy",
            Self::Email => "email",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// What a destination needs to be reached, secrets included. Serialized
/// (camelCase, tagged by `kind`) it is the text that is sealed at rest.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Settings {
    /// Alerts POSTed as JSON, signed per the Standard Webhooks
    /// specification with `secret` (`whsec_` and base64, generated).
    Webhook { url: String, secret: String },
    /// A Slack incoming webhook (the URL is the credential).
    Slack { webhook_url: String },
    /// A Discord channel webhook (the URL is the credential).
    Discord { webhook_url: String },
    /// A Telegram bot's `sendMessage` to one chat.
    Telegram { bot_token: String, chat_id: String },
    /// A topic on an ntfy server, with an access token if it needs one.
    Ntfy {
        server_url: String,
        topic: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
    },
    /// Mail to these addresses, through the notifier's SMTP server.
    Email { to: Vec<String> },
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Tokens, signing secrets and capability URLs never reach a log.
        f.debug_struct("Settings")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

/// Shown for a secret once it is stored: enough to tell two apart.
fn hint(secret: &str) -> String {
    let tail: String = {
        let chars: Vec<char> = secret.chars().collect();
        // A short secret shows nothing of itself.
        if chars.len() < 16 {
            String::new()
        } else {
            chars[chars.len() - 4..].iter().collect()
        }
    };
    format!("…{tail}")
}

/// A capability URL once stored: its origin only.
fn url_hint(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!("{}/…", u.origin().ascii_serialization()),
        Err(_) => "…".into(),
    }
}

impl Settings {
    pub fn kind(&self) -> DestinationKind {
        match self {
            Self::Webhook { .. } => DestinationKind::Webhook,
            Self::Slack { .. } => DestinationKind::Slack,
            Self::Discord { .. } => DestinationKind::Discord,
            Self::Telegram { .. } => DestinationKind::Telegram,
            Self::Ntfy { .. } => DestinationKind::Ntfy,
            Self::Email { .. } => DestinationKind::Email,
        }
    }

    /// The settings as every read after creation shows them: secrets cut
    /// to a hint (`…1a2b`; a webhook URL of Slack or Discord to its
    /// origin), everything else as given.
    pub fn masked(&self) -> serde_json::Value {
        let masked = match self.clone() {
            Self::Webhook { url, secret } => Self::Webhook {
                url,
                secret: format!("whsec_{}", hint(&secret)),
            },
            Self::Slack { webhook_url } => Self::Slack {
                webhook_url: url_hint(&webhook_url),
            },
            Self::Discord { webhook_url } => Self::Discord {
                webhook_url: url_hint(&webhook_url),
            },
            Self::Telegram { bot_token, chat_id } => Self::Telegram {
                bot_token: hint(&bot_token),
                chat_id,
            },
            Self::Ntfy {
                server_url,
                topic,
                token,
            } => Self::Ntfy {
                server_url,
                topic,
                token: token.as_deref().map(hint),
            },
            email @ Self::Email { .. } => email,
        };
        let mut value = serde_json::to_value(masked).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.remove("kind");
        }
        value
    }

    /// The URLs the notifier will contact, for the SSRF check at creation
    /// and at send time (Telegram's API base and the SMTP server are the
    /// operator's, not the destination's).
    pub fn urls(&self) -> Vec<&str> {
        match self {
            Self::Webhook { url, .. } => vec![url],
            Self::Slack { webhook_url } | Self::Discord { webhook_url } => vec![webhook_url],
            Self::Ntfy { server_url, .. } => vec![server_url],
            Self::Telegram { .. } | Self::Email { .. } => vec![],
        }
    }

    /// Every secret in it, by its field's name: what the creation answer
    /// shows once, and what a test looks for in the logs.
    pub fn secret_fields(&self) -> Vec<(&'static str, &str)> {
        match self {
            Self::Webhook { secret, .. } => vec![("secret", secret)],
            Self::Slack { webhook_url } | Self::Discord { webhook_url } => {
                vec![("webhookUrl", webhook_url)]
            }
            Self::Telegram { bot_token, .. } => vec![("botToken", bot_token)],
            Self::Ntfy { token, .. } => {
                token.as_deref().map(|t| ("token", t)).into_iter().collect()
            }
            Self::Email { .. } => vec![],
        }
    }

    /// Every secret in it.
    pub fn secrets(&self) -> Vec<&str> {
        self.secret_fields().into_iter().map(|(_, s)| s).collect()
    }
}

impl Settings {
    /// Sealed under `key` for destination `id`: what the store keeps.
    pub fn seal(&self, key: &SecretsKey, id: Uuid) -> String {
        let plain = serde_json::to_vec(self).expect("settings always serialise");
        key.seal(&plain, id.as_bytes())
    }

    /// The settings of destination `id`, opened.
    pub fn open(key: &SecretsKey, id: Uuid, sealed: &str) -> Result<Self, SealError> {
        let plain = key.open(sealed, id.as_bytes())?;
        serde_json::from_slice(&plain).map_err(|_| SealError::Malformed)
    }
}

/// A new webhook signing secret: `whsec_` and the base64 of 32 random
/// bytes, the form the Standard Webhooks libraries take.
pub fn new_webhook_secret() -> String {
    use base64::Engine as _;
    use rand::RngCore as _;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// A new destination id: time-ordered like every id here, with UUID
/// version 8 in place of 7. Deliveries are kept per (event, recipient)
/// under one id column; the version is how a delivery says whether its
/// recipient is a device (v7, or v4 from before) or a destination.
pub fn new_destination_id() -> Uuid {
    let mut bytes = *Uuid::now_v7().as_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    Uuid::from_bytes(bytes)
}

/// Whether a recipient id is a destination's ([`new_destination_id`]).
pub fn is_destination_id(id: Uuid) -> bool {
    id.get_version_num() == 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destination_ids_are_told_apart_from_device_ids() {
        let id = new_destination_id();
        assert!(is_destination_id(id));
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        assert!(!is_destination_id(Uuid::now_v7()));
        assert!(!is_destination_id(Uuid::new_v4()));
        // Still ordered by time, as v7 ids are.
        let later = new_destination_id();
        assert!(later > id);
    }

    #[test]
    fn settings_round_trip_as_tagged_camel_case() {
        let ntfy = Settings::Ntfy {
            server_url: "https://ntfy.sh".into(),
            topic: "ops".into(),
            token: Some("tk_abcdefghijklmnop".into()),
        };
        let json = serde_json::to_value(&ntfy).expect("json");
        assert_eq!(json["kind"], "ntfy");
        assert_eq!(json["serverUrl"], "https://ntfy.sh");
        let back: Settings = serde_json::from_value(json).expect("back");
        assert_eq!(back, ntfy);
    }

    #[test]
    fn secrets_are_masked_and_the_rest_shown() {
        let slack = Settings::Slack {
            webhook_url: "https://hooks.slack.com/services/T0/B0/abcdefghijkl".into(),
        };
        assert_eq!(
            slack.masked(),
            serde_json::json!({"webhookUrl": "https://hooks.slack.com/…"})
        );
        let telegram = Settings::Telegram {
            bot_token: "123456:ABCDEFGHIJKLMNOPQRSTUV".into(),
            chat_id: "-1001".into(),
        };
        assert_eq!(
            telegram.masked(),
            serde_json::json!({"botToken": "…STUV", "chatId": "-1001"})
        );
        let secret = new_webhook_secret();
        let webhook = Settings::Webhook {
            url: "https://example.com/hook".into(),
            secret: secret.clone(),
        };
        let masked = webhook.masked();
        assert_eq!(masked["url"], "https://example.com/hook");
        let shown = masked["secret"].as_str().expect("hint");
        assert!(shown.starts_with("whsec_…") && secret.ends_with(&shown[9..]));
        assert!(!format!("{webhook:?}").contains(&secret));
    }
}

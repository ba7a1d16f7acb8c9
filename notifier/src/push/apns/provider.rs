//! The APNs provider itself: its configuration (token authentication with a
//! .p8 key), one a2 client per APNs environment, and the [`PushProvider`]
//! that builds each request (`message`), sends it and classifies the answer
//! (`outcome`).

use std::fmt;
use std::time::SystemTime;

use a2::{Client, ClientConfig, Endpoint};
use anyhow::Context as _;
use async_trait::async_trait;

use super::message::{ApnsMessage, MessageError};
use super::outcome::classify;
use crate::push::{ApnsEnvironment, Push, PushOutcome, PushProvider, PushTarget};

/// APNs device tokens are at most 100 bytes, sent as hexadecimal.
const MAX_DEVICE_TOKEN_HEX: usize = 200;

/// Credentials and app identity for token-based APNs authentication.
#[derive(Clone)]
pub struct ApnsConfig {
    /// Contents of the .p8 file (a PKCS#8 PEM P-256 key) from the Apple
    /// developer account.
    pub key_pem: String,
    /// The id of that key (10 characters, shown next to it by Apple).
    pub key_id: String,
    /// The Apple developer team id.
    pub team_id: String,
    /// The app's bundle id, sent as `apns-topic`.
    pub topic: String,
}

impl fmt::Debug for ApnsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApnsConfig")
            .field("key_pem", &"***")
            .field("key_id", &self.key_id)
            .field("team_id", &self.team_id)
            .field("topic", &self.topic)
            .finish()
    }
}

/// Sends alerts through APNs, one HTTP/2 client per environment, both made at
/// start so a bad key fails the start rather than the first push.
pub struct ApnsProvider {
    production: Client,
    sandbox: Client,
    topic: String,
}

impl fmt::Debug for ApnsProvider {
    // a2's `Client` prints its signer, whose cached JWT is a live credential.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApnsProvider")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl ApnsProvider {
    /// Checks the configuration and builds both clients. Errors name the
    /// offending field and never quote the key.
    pub fn new(config: ApnsConfig) -> anyhow::Result<Self> {
        for (field, value) in [
            ("key_id", &config.key_id),
            ("team_id", &config.team_id),
            ("topic", &config.topic),
        ] {
            // These go into HTTP headers; a bad one would fail every push at
            // run time instead of once, here.
            anyhow::ensure!(!value.is_empty(), "APNs {field} is empty");
            anyhow::ensure!(
                value.bytes().all(|b| b.is_ascii_graphic()),
                "APNs {field} must be printable ASCII without spaces"
            );
        }
        let client = |endpoint: Endpoint| {
            Client::token(
                config.key_pem.as_bytes(),
                config.key_id.clone(),
                config.team_id.clone(),
                ClientConfig::new(endpoint),
            )
            .context("APNs key_pem is not a usable .p8 key (a PKCS#8 PEM P-256 private key)")
        };
        Ok(Self {
            production: client(Endpoint::Production)?,
            sandbox: client(Endpoint::Sandbox)?,
            topic: config.topic,
        })
    }

    fn client(&self, environment: ApnsEnvironment) -> &Client {
        match environment {
            ApnsEnvironment::Production => &self.production,
            ApnsEnvironment::Sandbox => &self.sandbox,
        }
    }
}

#[async_trait]
impl PushProvider for ApnsProvider {
    fn name(&self) -> &'static str {
        "apns"
    }

    async fn send(&self, push: &Push) -> PushOutcome {
        let PushTarget::Apns { token, environment } = &push.target else {
            return PushOutcome::Rejected {
                reason: "not an APNs device".into(),
            };
        };
        if !is_device_token(token) {
            // APNs would answer BadDeviceToken; some such strings cannot even
            // be put in the request path.
            return PushOutcome::DeviceGone {
                reason: "BadDeviceToken: not a hexadecimal APNs device token (not sent)".into(),
            };
        }
        let message = match ApnsMessage::from_alert(&push.alert, &self.topic, SystemTime::now()) {
            Ok(message) => message,
            Err(error @ MessageError::TooLarge { .. }) => {
                return PushOutcome::Rejected {
                    reason: error.to_string(),
                };
            }
            Err(MessageError::Apns(error)) => return classify(Err(error)),
        };
        let payload = match message.payload(token) {
            Ok(payload) => payload,
            Err(error) => return classify(Err(error)),
        };
        // a2's `Client::send` is `#[tracing::instrument]`ed: its INFO span
        // a2 is built without its `tracing` feature (workspace Cargo.toml):
        // with it, `Client::send` opens an INFO span that records the payload
        // (with the device token) and the client (with the signed JWT).
        classify(self.client(*environment).send(payload).await)
    }
}

/// An APNs device token as APNs expects it in the request path.
fn is_device_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_DEVICE_TOKEN_HEX
        && token.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::push::Alert;
    use crate::push::apns::fixtures::{
        DEVICE_TOKEN, ED25519_KEY, alert, config, is_gone, is_rejected, now,
    };
    use crate::push::logging::capture::Capture;

    #[test]
    fn provider_is_built_from_a_p8_key_and_names_itself_apns() {
        let provider = ApnsProvider::new(config()).expect("valid config");
        assert_eq!(provider.name(), "apns");
    }

    #[test]
    fn a_key_that_is_not_a_p8_key_is_refused_without_quoting_it() {
        for key in [
            "-----BEGIN PRIVATE KEY-----\nsecretstuff\n-----END PRIVATE KEY-----",
            ED25519_KEY,
        ] {
            let error = ApnsProvider::new(ApnsConfig {
                key_pem: key.into(),
                ..config()
            })
            .expect_err("bad key");
            let shown = format!("{error:#} {error:?}");
            assert!(shown.contains("key_pem"), "{shown}");
            assert!(
                !shown.contains("secretstuff") && !shown.contains("MC4CAQAw"),
                "{shown}"
            );
        }
    }

    #[test]
    fn empty_or_spaced_header_fields_are_refused_by_name() {
        for (field, config) in [
            (
                "topic",
                ApnsConfig {
                    topic: String::new(),
                    ..config()
                },
            ),
            (
                "key_id",
                ApnsConfig {
                    key_id: "KEY 1".into(),
                    ..config()
                },
            ),
            (
                "team_id",
                ApnsConfig {
                    team_id: "T\r\n".into(),
                    ..config()
                },
            ),
        ] {
            let error = ApnsProvider::new(config).expect_err("invalid");
            assert!(error.to_string().contains(field), "{error}");
        }
    }

    #[test]
    fn debug_output_never_shows_the_key_or_the_signed_token() {
        let config = config();
        let shown = format!("{config:?}");
        assert!(!shown.contains("MIGHAgEA"), "{shown}");
        assert!(shown.contains("KEY1234567"), "{shown}");

        let provider = ApnsProvider::new(config).expect("valid config");
        let shown = format!("{provider:?}");
        // A JWT starts with the base64 of `{"`.
        assert!(
            !shown.contains("eyJ") && !shown.contains("MIGHAgEA"),
            "{shown}"
        );
        // The point of the hand-written Debug: a2's own prints the JWT.
        assert!(format!("{:?}", provider.production).contains("eyJ"));
    }

    fn push(device_token: &str, alert: Alert) -> Push {
        Push {
            device_id: Uuid::nil(),
            target: crate::push::PushTarget::Apns {
                token: device_token.into(),
                environment: ApnsEnvironment::Sandbox,
            },
            alert,
        }
    }

    #[tokio::test]
    async fn a_malformed_device_token_is_gone_without_being_sent() {
        let provider = ApnsProvider::new(config()).expect("valid config");
        for token in ["", "not-hex", "ab cd", &"a".repeat(201)] {
            let outcome = provider.send(&push(token, alert())).await;
            assert!(is_gone(&outcome), "{token:?}: {outcome:?}");
        }
    }

    #[tokio::test]
    async fn an_alert_that_cannot_fit_is_rejected_without_being_sent() {
        let provider = ApnsProvider::new(config()).expect("valid config");
        let alert = Alert {
            channel: "c".repeat(5_000),
            ..alert()
        };
        let outcome = provider.send(&push(DEVICE_TOKEN, alert)).await;
        assert!(is_rejected(&outcome), "{outcome:?}");
    }

    #[tokio::test]
    async fn sending_keeps_the_device_token_and_jwt_out_of_tracing() {
        // A topic that is not a valid header value makes a2 fail before any
        // network, once the request (path, signed JWT) has been built.
        let provider = ApnsProvider {
            topic: "bad\r\ntopic".into(),
            ..ApnsProvider::new(config()).expect("valid config")
        };
        let capture = Capture::default();
        let _guard = tracing::subscriber::set_default(capture.clone());

        let outcome = provider.send(&push(DEVICE_TOKEN, alert())).await;
        assert!(is_rejected(&outcome), "{outcome:?}");
        let sent = capture.text();
        assert!(!sent.contains(DEVICE_TOKEN), "{sent}");
        assert!(!sent.contains("eyJ"), "{sent}");

        // Control: the span a2 opens with its `tracing` feature on (the
        // arguments of `Client::send`, by `Debug`) holds both and reaches the
        // capture, so the checks above fail if that feature comes back (say,
        // enabled by another crate in the build).
        let message = ApnsMessage::from_alert(&alert(), &provider.topic, now()).expect("fits");
        let payload = message.payload(DEVICE_TOKEN).expect("payload");
        let _span = tracing::info_span!("send", client = ?provider.sandbox, ?payload);
        let instrumented = capture.text();
        assert!(instrumented.contains(DEVICE_TOKEN), "{instrumented}");
        assert!(instrumented.contains("eyJ"), "{instrumented}");
    }
}

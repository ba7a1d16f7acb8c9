//! The APNs push provider: turns an [`Alert`] into an APNs request that fits
//! Apple's payload limit ([`ApnsMessage`]), sends it through a2 with token
//! (.p8) authentication ([`ApnsProvider`]), and maps Apple's answer to a
//! [`PushOutcome`] ([`classify`]).
//!
//! Secrets stay inside: the .p8 key, the provider token (JWT) a2 signs with
//! it and device tokens never reach `Debug` output or a log line.

use std::error::Error as StdError;
use std::fmt;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2::request::payload::{Payload, PayloadLike as _};
use a2::{
    Client, ClientConfig, CollapseId, DefaultNotificationBuilder, Endpoint, ErrorReason,
    NotificationBuilder as _, NotificationOptions, Priority, PushType,
};
use anyhow::Context as _;
use async_trait::async_trait;
use tracing::instrument::WithSubscriber as _;
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Metadata, Subscriber};

use super::{Alert, ApnsEnvironment, Push, PushOutcome, PushProvider};

/// APNs refuses alert payloads (the JSON body) larger than this many bytes.
pub const MAX_PAYLOAD_BYTES: usize = 4096;

/// How long APNs keeps trying an offline device. A day-old alert is history,
/// not an alert, so it is not worth waking the phone for after that.
const EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

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
        if !is_device_token(&push.device_token) {
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
        let payload = match message.payload(&push.device_token) {
            Ok(payload) => payload,
            Err(error) => return classify(Err(error)),
        };
        // a2's `Client::send` is `#[tracing::instrument]`ed: its INFO span
        // records the payload (with the device token) and the client (with
        // the signed JWT) via `Debug`, and every event logged inside it would
        // carry them. Nothing a2 or hyper log while sending is worth that, so
        // the send runs with tracing switched off.
        let result = self
            .client(push.environment)
            .send(payload)
            .with_subscriber(SILENCE.clone())
            .await;
        classify(result)
    }
}

/// The dispatcher an APNs send runs under: it records nothing.
///
/// Not `Dispatch::none()`: tracing caches each callsite's interest when it is
/// first hit, and with a single registered subscriber it asks whichever one
/// is current. A hyper or h2 callsite first hit under `none()` would be cached
/// as "never" and stay silent for the whole process, also outside APNs sends
/// (poem's hyper shares the process in embedded mode). Registered once, this
/// one answers "sometimes", so callsites keep asking the current subscriber.
static SILENCE: LazyLock<Dispatch> = LazyLock::new(|| Dispatch::new(Silence));

struct Silence;

impl Subscriber for Silence {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }

    // Keeps the process-wide level filter where the real subscriber puts it.
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::OFF)
    }

    // Never called: nothing is enabled.
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// An APNs device token as APNs expects it in the request path.
fn is_device_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_DEVICE_TOKEN_HEX
        && token.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Why an [`Alert`] could not be made into an APNs request.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// Even with no body and no title the payload is too big: the channel
    /// name or icon alone exceed the limit.
    #[error(
        "APNs payload is {size} bytes with no body and an empty title; the limit is {MAX_PAYLOAD_BYTES}"
    )]
    TooLarge { size: usize },
    /// a2 refused the payload or its options.
    #[error(transparent)]
    Apns(#[from] a2::Error),
}

/// Everything one APNs request carries except the device token, already cut to
/// fit [`MAX_PAYLOAD_BYTES`]. The JSON is the same for every device an
/// alert goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApnsMessage {
    title: String,
    body: Option<String>,
    channel: String,
    event_id: String,
    icon: Option<String>,
    topic: String,
    /// Unix seconds after which APNs stops trying to deliver.
    expiration: u64,
}

impl ApnsMessage {
    /// The request for `alert` to the app `topic`, expiring a day after `now`.
    /// When the JSON would exceed the limit the body is cut first (it is what
    /// a reader can best spare), then dropped, then the title is cut; cuts
    /// fall on char boundaries and end in "…".
    pub fn from_alert(alert: &Alert, topic: &str, now: SystemTime) -> Result<Self, MessageError> {
        let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut message = Self {
            title: display_title(alert),
            body: alert.body.clone(),
            channel: alert.channel.clone(),
            event_id: alert.event_id.to_string(),
            icon: alert.icon.clone(),
            topic: topic.to_owned(),
            expiration: since_epoch.saturating_add(EXPIRY).as_secs(),
        };
        if message.fits()? {
            return Ok(message);
        }
        if let Some(body) = message.body.take() {
            let cut = longest_fitting_cut(&body, |candidate| {
                message.body = Some(candidate);
                message.fits()
            })?;
            message.body = cut;
            if message.body.is_some() || message.fits()? {
                return Ok(message);
            }
        }
        let title = std::mem::take(&mut message.title);
        let cut = longest_fitting_cut(&title, |candidate| {
            message.title = candidate;
            message.fits()
        })?;
        match cut {
            Some(title) => {
                message.title = title;
                Ok(message)
            }
            None => {
                message.title = String::new();
                Err(MessageError::TooLarge {
                    size: message.encoded_len()?,
                })
            }
        }
    }

    /// The a2 request for one device.
    pub fn payload<'a>(&'a self, device_token: &'a str) -> Result<Payload<'a>, a2::Error> {
        let options = NotificationOptions {
            // One event goes to many devices; each push gets its own id from
            // APNs (returned as `apns_id`) so Apple's delivery logs stay
            // readable. The collapse id is what removes duplicates.
            apns_id: None,
            apns_push_type: Some(PushType::Alert),
            apns_expiration: Some(self.expiration),
            apns_priority: Some(Priority::High),
            apns_topic: Some(&self.topic),
            // A job redelivered after a crash pushes again; with the same
            // collapse id the device replaces the first alert instead of
            // showing two.
            apns_collapse_id: Some(CollapseId::new(&self.event_id)?),
        };
        let mut builder = DefaultNotificationBuilder::new().set_title(&self.title);
        if let Some(body) = &self.body {
            builder = builder.set_body(body);
        }
        let mut payload = builder.build(device_token, options);
        payload.add_custom_data("channel", &self.channel)?;
        payload.add_custom_data("eventId", &self.event_id)?;
        if let Some(icon) = &self.icon {
            payload.add_custom_data("icon", icon)?;
        }
        Ok(payload)
    }

    /// The JSON body APNs receives (the same for every device).
    pub fn to_json(&self) -> Result<String, a2::Error> {
        // The device token travels in the path, not the body.
        self.payload("")?.to_json_string()
    }

    fn encoded_len(&self) -> Result<usize, a2::Error> {
        Ok(self.to_json()?.len())
    }

    fn fits(&self) -> Result<bool, a2::Error> {
        Ok(self.encoded_len()? <= MAX_PAYLOAD_BYTES)
    }
}

/// The title shown: the icon, a space, the title.
fn display_title(alert: &Alert) -> String {
    match alert.icon.as_deref().filter(|icon| !icon.is_empty()) {
        // `Alert::title` is documented as possibly prefixed already; whichever
        // side adds the icon, it must show once.
        Some(icon) if !alert.title.starts_with(&format!("{icon} ")) => {
            format!("{icon} {}", alert.title)
        }
        _ => alert.title.clone(),
    }
}

/// The longest cut of `text` (a prefix ending on a char boundary, trailing
/// whitespace removed, "…" appended) for which `fits` holds, or `None` if not
/// even "…" fits. The encoded size grows with the prefix, so a binary search
/// finds it; the exact check is the serialized payload, because JSON escapes
/// make a char cost anywhere from 1 to 6 bytes.
fn longest_fitting_cut(
    text: &str,
    mut fits: impl FnMut(String) -> Result<bool, a2::Error>,
) -> Result<Option<String>, a2::Error> {
    let starts: Vec<usize> = text.char_indices().map(|(at, _)| at).collect();
    // A prefix longer than the whole limit cannot fit; skip those.
    let candidates = starts.partition_point(|&at| at <= MAX_PAYLOAD_BYTES);
    let cut = |chars: usize| format!("{}…", text[..starts[chars]].trim_end());
    if candidates == 0 || !fits(cut(0))? {
        return Ok(None);
    }
    // Invariant: `lo` fits; `hi` does not, or is past the last candidate.
    let (mut lo, mut hi) = (0, candidates);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(cut(mid))? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(cut(lo)))
}

/// What an a2 answer means for the delivery.
pub fn classify(result: Result<a2::Response, a2::Error>) -> PushOutcome {
    use a2::Error as E;
    match result {
        Ok(response) | Err(E::ResponseError(response)) => classify_response(response),
        // No answer from APNs: the network or Apple's front door; the next
        // attempt may well get through.
        Err(error @ (E::ConnectionError(_) | E::ClientError(_) | E::RequestTimeout(_))) => {
            PushOutcome::Retry {
                reason: describe(&error),
                after: None,
            }
        }
        // The request could not be built or signed here: the key, the options
        // or the payload are wrong, and a retry would fail the same way.
        Err(
            error @ (E::SerializeError(_)
            | E::SignerError(_)
            | E::InvalidOptions(_)
            | E::ReadError(_)
            | E::Tls(_)
            | E::BuildRequestError(_)
            | E::UnexpectedKey(_)
            | E::InvalidCertificate),
        ) => PushOutcome::Rejected {
            reason: describe(&error),
        },
    }
}

fn classify_response(response: a2::Response) -> PushOutcome {
    use ErrorReason as R;
    let code = response.code;
    if code == 200 {
        return PushOutcome::Delivered {
            apns_id: response.apns_id,
        };
    }
    let reason = response.error.map(|body| body.reason);
    let label = match &reason {
        Some(reason) => format!("{code} {reason:?}"),
        None => format!("{code} (no reason given)"),
    };
    match reason {
        Some(R::Unregistered | R::BadDeviceToken | R::DeviceTokenNotForTopic) => {
            PushOutcome::DeviceGone { reason: label }
        }
        Some(
            R::TooManyRequests
            | R::TooManyProviderTokenUpdates
            | R::InternalServerError
            | R::ServiceUnavailable
            | R::Shutdown
            | R::IdleTimeout,
        ) => PushOutcome::Retry {
            reason: label,
            after: None,
        },
        // Listed rather than `_` so a reason added to a2 has to be placed.
        Some(
            R::BadCollapseId
            | R::BadExpirationDate
            | R::BadMessageId
            | R::BadPriority
            | R::BadTopic
            | R::DuplicateHeaders
            | R::MissingDeviceToken
            | R::MissingTopic
            | R::PayloadEmpty
            | R::TopicDisallowed
            | R::BadCertificate
            | R::BadCertificateEnvironment
            | R::ExpiredProviderToken
            | R::Forbidden
            | R::InvalidProviderToken
            | R::MissingProviderToken
            | R::BadPath
            | R::MethodNotAllowed
            | R::PayloadTooLarge,
        ) => PushOutcome::Rejected { reason: label },
        // a2 drops a body it cannot parse (a reason newer than a2): go by status.
        None => match code {
            410 => PushOutcome::DeviceGone { reason: label },
            429 | 500..=599 => PushOutcome::Retry {
                reason: label,
                after: None,
            },
            _ => PushOutcome::Rejected { reason: label },
        },
    }
}

/// The error and its causes on one line, each cause once (a2's messages often
/// repeat their source).
fn describe(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use uuid::Uuid;

    use super::*;
    use crate::push::logging::capture::Capture;

    // A P-256 key made for these tests with `openssl genpkey`; it belongs to
    // no Apple account.
    const TEST_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQggX3h7Rsc6/xB0oa4
2KZc5KXbEWmm8NRsksHS12U5MyihRANCAAQbSS83mR5/bnQpzdh0Cp/jL2lO1DAh
iCUGCyC7WNF+6y9B/N3rGgXHACxb6JKelbOmTQS2p48Bt4gmC3otdc/4
-----END PRIVATE KEY-----";
    // A valid PEM private key of the wrong kind (Ed25519, not P-256).
    const ED25519_KEY: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIEDJRwcry9am2GwC5EjDYwFi1cRVjjjsZ9c4DfqHytAT
-----END PRIVATE KEY-----";
    const DEVICE_TOKEN: &str = "5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee00";
    const TOPIC: &str = "dev.tocsin.app";

    fn config() -> ApnsConfig {
        ApnsConfig {
            key_pem: TEST_KEY.into(),
            key_id: "KEY1234567".into(),
            team_id: "TEAM123456".into(),
            topic: TOPIC.into(),
        }
    }

    fn alert() -> Alert {
        Alert {
            title: "Payment failed".into(),
            body: Some("Card declined for order 1234".into()),
            icon: Some("💸".into()),
            channel: "payments".into(),
            event_id: Uuid::from_u128(0x0195_1234_5678_7abc_8def_0123_4567_89ab),
        }
    }

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn json(message: &ApnsMessage) -> (String, Value) {
        let text = message.to_json().expect("payload serializes");
        let value = serde_json::from_str(&text).expect("payload is JSON");
        (text, value)
    }

    fn response(code: u16, reason: Option<ErrorReason>) -> a2::Response {
        a2::Response {
            error: reason.map(|reason| a2::ErrorBody {
                reason,
                timestamp: None,
            }),
            apns_id: None,
            code,
        }
    }

    fn is_gone(outcome: &PushOutcome) -> bool {
        matches!(outcome, PushOutcome::DeviceGone { .. })
    }

    fn is_retry(outcome: &PushOutcome) -> bool {
        matches!(outcome, PushOutcome::Retry { after: None, .. })
    }

    fn is_rejected(outcome: &PushOutcome) -> bool {
        matches!(outcome, PushOutcome::Rejected { .. })
    }

    // ---- payload ----

    #[test]
    fn payload_carries_the_icon_prefixed_title_the_body_and_the_custom_data() {
        let alert = alert();
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (_, value) = json(&message);
        assert_eq!(value["aps"]["alert"]["title"], "💸 Payment failed");
        assert_eq!(
            value["aps"]["alert"]["body"],
            "Card declined for order 1234"
        );
        assert_eq!(value["channel"], "payments");
        assert_eq!(value["eventId"], alert.event_id.to_string());
        assert_eq!(value["icon"], "💸");
    }

    #[test]
    fn a_title_already_carrying_its_icon_is_not_prefixed_twice() {
        let alert = Alert {
            title: "💸 Payment failed".into(),
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        assert_eq!(
            json(&message).1["aps"]["alert"]["title"],
            "💸 Payment failed"
        );
    }

    #[test]
    fn an_alert_without_icon_or_body_has_a_bare_title_and_no_icon_key() {
        let alert = Alert {
            icon: None,
            body: None,
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (_, value) = json(&message);
        assert_eq!(value["aps"]["alert"]["title"], "Payment failed");
        assert!(value["aps"]["alert"].get("body").is_none(), "{value}");
        assert!(value.get("icon").is_none(), "{value}");
    }

    #[test]
    fn options_collapse_on_the_event_id_and_ask_for_a_high_priority_alert_for_a_day() {
        let alert = alert();
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let payload = message.payload(DEVICE_TOKEN).expect("payload");
        let options = &payload.options;
        let collapse_id = options.apns_collapse_id.as_ref().map(|id| id.value);
        assert_eq!(collapse_id, Some(alert.event_id.to_string().as_str()));
        assert_eq!(options.apns_push_type, Some(PushType::Alert));
        assert_eq!(
            options.apns_priority.as_ref().map(ToString::to_string),
            Some("10".to_owned())
        );
        assert_eq!(options.apns_expiration, Some(1_700_000_000 + 86_400));
        assert_eq!(options.apns_topic, Some(TOPIC));
        assert_eq!(options.apns_id, None);
        assert_eq!(payload.device_token, DEVICE_TOKEN);
    }

    #[test]
    fn a_short_description_is_sent_whole() {
        let message = ApnsMessage::from_alert(&alert(), TOPIC, now()).expect("fits");
        assert_eq!(message.body.as_deref(), alert().body.as_deref());
    }

    #[test]
    fn a_long_multibyte_description_is_cut_on_a_char_boundary_to_fit_4096_bytes() {
        let description: String = "🚨警報データ😀é".chars().cycle().take(10_000).collect();
        let alert = Alert {
            body: Some(description.clone()),
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (text, value) = json(&message);
        assert!(text.len() <= MAX_PAYLOAD_BYTES, "{} bytes", text.len());

        let body = value["aps"]["alert"]["body"].as_str().expect("body kept");
        let kept = body
            .strip_suffix('…')
            .expect("cut body ends with an ellipsis");
        assert!(description.starts_with(kept));
        assert!(!kept.is_empty());
        assert_eq!(value["aps"]["alert"]["title"], "💸 Payment failed");

        // The cut is the longest that fits: one more char would not.
        let next = description[kept.len()..].chars().next().expect("more text");
        let longer = ApnsMessage {
            body: Some(format!("{kept}{next}…")),
            ..message.clone()
        };
        assert!(json(&longer).0.len() > MAX_PAYLOAD_BYTES);
    }

    #[test]
    fn the_cut_is_measured_on_the_escaped_json_not_the_raw_text() {
        // Each control char is 1 byte raw but 6 bytes (\u0001) in JSON.
        let description = "\u{1}".repeat(3_000);
        let alert = Alert {
            body: Some(description),
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (text, _) = json(&message);
        assert!(text.len() <= MAX_PAYLOAD_BYTES, "{} bytes", text.len());
        assert!(text.len() > MAX_PAYLOAD_BYTES - 6, "{} bytes", text.len());
    }

    #[test]
    fn a_title_too_big_on_its_own_is_cut_after_the_body_is_dropped() {
        let title: String = "緊急".repeat(5_000);
        let alert = Alert {
            title: title.clone(),
            body: Some("some detail".into()),
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (text, value) = json(&message);
        assert!(text.len() <= MAX_PAYLOAD_BYTES, "{} bytes", text.len());
        assert!(value["aps"]["alert"].get("body").is_none(), "{value}");
        let shown = value["aps"]["alert"]["title"].as_str().expect("title");
        let kept = shown
            .strip_suffix('…')
            .expect("cut title ends with an ellipsis");
        assert!(format!("💸 {title}").starts_with(kept));
        assert!(
            kept.len() > 3_000,
            "title needlessly short: {} bytes",
            kept.len()
        );
    }

    #[test]
    fn a_payload_that_cannot_fit_even_without_body_and_title_is_refused() {
        let alert = Alert {
            channel: "c".repeat(5_000),
            ..alert()
        };
        let error = ApnsMessage::from_alert(&alert, TOPIC, now()).expect_err("too big");
        assert!(
            matches!(error, MessageError::TooLarge { size } if size > MAX_PAYLOAD_BYTES),
            "{error:?}"
        );
    }

    // ---- classify: answers from APNs ----

    #[test]
    fn status_200_is_delivered_with_the_apns_id() {
        let ok = a2::Response {
            error: None,
            apns_id: Some("3F2504E0-4F89-11D3-9A0C-0305E82C3301".into()),
            code: 200,
        };
        assert_eq!(
            classify(Ok(ok)),
            PushOutcome::Delivered {
                apns_id: Some("3F2504E0-4F89-11D3-9A0C-0305E82C3301".into())
            }
        );
    }

    #[test]
    fn unregistered_bad_and_wrong_topic_tokens_mean_the_device_is_gone() {
        for (code, reason) in [
            (410, ErrorReason::Unregistered),
            (400, ErrorReason::BadDeviceToken),
            (400, ErrorReason::DeviceTokenNotForTopic),
        ] {
            let name = format!("{code} {reason:?}");
            let outcome = classify(Err(a2::Error::ResponseError(response(code, Some(reason)))));
            assert_eq!(outcome, PushOutcome::DeviceGone { reason: name });
        }
    }

    #[test]
    fn throttling_and_server_errors_are_retried() {
        for (code, reason) in [
            (429, ErrorReason::TooManyRequests),
            (429, ErrorReason::TooManyProviderTokenUpdates),
            (500, ErrorReason::InternalServerError),
            (503, ErrorReason::ServiceUnavailable),
            (503, ErrorReason::Shutdown),
            (400, ErrorReason::IdleTimeout),
        ] {
            let outcome = classify(Err(a2::Error::ResponseError(response(code, Some(reason)))));
            assert!(is_retry(&outcome), "{code}: {outcome:?}");
        }
    }

    #[test]
    fn other_client_errors_are_rejected() {
        for (code, reason) in [
            (400, ErrorReason::PayloadTooLarge),
            (413, ErrorReason::PayloadTooLarge),
            (403, ErrorReason::InvalidProviderToken),
            (403, ErrorReason::ExpiredProviderToken),
            (403, ErrorReason::MissingProviderToken),
            (400, ErrorReason::BadTopic),
            (400, ErrorReason::TopicDisallowed),
            (400, ErrorReason::BadCollapseId),
            (400, ErrorReason::BadExpirationDate),
            (405, ErrorReason::MethodNotAllowed),
        ] {
            let outcome = classify(Err(a2::Error::ResponseError(response(code, Some(reason)))));
            assert!(is_rejected(&outcome), "{code}: {outcome:?}");
        }
    }

    #[test]
    fn without_a_reason_the_status_decides() {
        let outcome = |code| classify(Err(a2::Error::ResponseError(response(code, None))));
        assert!(is_gone(&outcome(410)));
        for code in [429, 500, 502, 503] {
            assert!(is_retry(&outcome(code)), "{code}");
        }
        for code in [400, 403, 404, 413] {
            assert!(is_rejected(&outcome(code)), "{code}");
        }
    }

    // ---- classify: errors before any answer ----

    #[test]
    fn a_request_timeout_is_retried() {
        assert!(is_retry(&classify(Err(a2::Error::RequestTimeout(20)))));
    }

    #[test]
    fn local_serialization_options_and_key_errors_are_rejected() {
        let serde_error = serde_json::from_str::<u8>("x").expect_err("not a number");
        let signer_error = Client::token("not a pem".as_bytes(), "K", "T", ClientConfig::default())
            .expect_err("no PEM");
        assert!(
            matches!(signer_error, a2::Error::SignerError(_)),
            "{signer_error:?}"
        );
        let key_error = Client::token(ED25519_KEY.as_bytes(), "K", "T", ClientConfig::default())
            .expect_err("not a P-256 key");
        assert!(
            matches!(key_error, a2::Error::UnexpectedKey(_)),
            "{key_error:?}"
        );

        for error in [
            a2::Error::SerializeError(serde_error),
            a2::Error::InvalidOptions("collapse id too long".into()),
            a2::Error::ReadError(std::io::Error::other("unreadable key")),
            a2::Error::InvalidCertificate,
            signer_error,
            key_error,
        ] {
            let shown = format!("{error:?}");
            assert!(is_rejected(&classify(Err(error))), "{shown}");
        }
    }

    #[tokio::test]
    async fn a_request_a2_cannot_build_is_rejected() {
        let client = Client::token(TEST_KEY.as_bytes(), "K", "T", ClientConfig::default())
            .expect("test key loads");
        let payload =
            DefaultNotificationBuilder::new().build("bad\r\ntoken", NotificationOptions::default());
        let error = client.send(payload).await.expect_err("cannot build");
        assert!(
            matches!(error, a2::Error::BuildRequestError(_)),
            "{error:?}"
        );
        assert!(is_rejected(&classify(Err(error))));
    }

    // ---- the provider ----

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
            device_token: device_token.into(),
            environment: ApnsEnvironment::Sandbox,
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
        // network, after its span has been opened.
        let provider = ApnsProvider {
            topic: "bad\r\ntopic".into(),
            ..ApnsProvider::new(config()).expect("valid config")
        };
        let capture = Capture::default();
        let _guard = tracing::subscriber::set_default(capture.clone());

        let outcome = provider.send(&push(DEVICE_TOKEN, alert())).await;
        assert!(is_rejected(&outcome), "{outcome:?}");
        let through_provider = capture.text();
        assert!(
            !through_provider.contains(DEVICE_TOKEN),
            "{through_provider}"
        );
        assert!(!through_provider.contains("eyJ"), "{through_provider}");

        // Control: the same send straight through a2 does put both in its span,
        // so the capture above would have seen them.
        let message = ApnsMessage::from_alert(&alert(), "bad\r\ntopic", now()).expect("fits");
        let payload = message.payload(DEVICE_TOKEN).expect("payload");
        let _ = provider.sandbox.send(payload).await;
        let direct = capture.text();
        assert!(direct.contains(DEVICE_TOKEN), "{direct}");
        assert!(direct.contains("eyJ"), "{direct}");
    }
}

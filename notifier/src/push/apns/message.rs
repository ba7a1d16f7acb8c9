//! The APNs request for one alert: the JSON payload (title, body and custom
//! data: channel, event or summary id, icon, alert key, and the `url` a tap
//! opens), cut to fit Apple's payload limit, and the request options (push
//! type, priority, expiry, collapse id). The device token is added last, per
//! device, by [`ApnsMessage::payload`]. The event's priority picks the
//! interruption level, the sound and `apns-priority` ([`Loudness`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2::request::payload::{Payload, PayloadLike as _};
use a2::{
    CollapseId, DefaultNotificationBuilder, NotificationBuilder as _, NotificationOptions,
    Priority as ApnsPriority, PushType,
};

use super::loudness::{LeveledAps, LeveledPayload, Loudness};
use crate::push::Alert;

/// APNs refuses alert payloads (the JSON body) larger than this many bytes.
const MAX_PAYLOAD_BYTES: usize = 4096;

/// How long APNs keeps trying an offline device. A day-old alert is history,
/// not an alert, so it is not worth waking the phone for after that.
const EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

/// Why an [`Alert`] could not be made into an APNs request.
#[derive(Debug, thiserror::Error)]
pub(super) enum MessageError {
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
pub(super) struct ApnsMessage {
    title: String,
    body: Option<String>,
    channel: String,
    event_id: String,
    /// Whether `event_id` is a summary's (sent as `summaryId`).
    summary: bool,
    icon: Option<String>,
    alert_key: Option<String>,
    /// The custom data key `url`: where the app goes when the alert is
    /// tapped (APNs itself opens nothing; the app reads it).
    url: Option<String>,
    /// `apns-collapse-id`: the event's id or its alert key's digest.
    collapse_id: String,
    topic: String,
    /// Unix seconds after which APNs stops trying to deliver.
    expiration: u64,
    loudness: Loudness,
}

impl ApnsMessage {
    /// The request for `alert` to the app `topic`, expiring a day after `now`.
    /// When the JSON would exceed the limit the body is cut first (it is what
    /// a reader can best spare), then dropped, then the title is cut; cuts
    /// fall on char boundaries and end in "…". The URL is never cut (a cut
    /// link leads somewhere else): it is kept when the payload fits with it
    /// and the whole title, at the body's expense, and left out otherwise.
    pub(super) fn from_alert(
        alert: &Alert,
        topic: &str,
        now: SystemTime,
    ) -> Result<Self, MessageError> {
        let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut message = Self {
            title: alert.display_title(),
            body: alert.body.clone(),
            channel: alert.channel.clone(),
            event_id: alert.event_id.to_string(),
            summary: alert.summary,
            icon: alert.icon.clone(),
            alert_key: alert.alert_key.clone(),
            url: alert.url.clone(),
            collapse_id: alert.collapse_id.clone(),
            topic: topic.to_owned(),
            expiration: since_epoch.saturating_add(EXPIRY).as_secs(),
            loudness: Loudness::of(alert.priority),
        };
        if message.fits()? {
            return Ok(message);
        }
        if message.url.is_some() {
            let body = message.body.take();
            let fits_with_url = message.fits()?;
            message.body = body;
            if !fits_with_url {
                message.url = None;
                if message.fits()? {
                    return Ok(message);
                }
            }
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
    pub(super) fn payload<'a>(
        &'a self,
        device_token: &'a str,
    ) -> Result<LeveledPayload<'a>, a2::Error> {
        let options = NotificationOptions {
            // One event goes to many devices; each push gets its own id from
            // APNs (returned as `apns_id`) so Apple's delivery logs stay
            // readable. The collapse id is what removes duplicates.
            apns_id: None,
            apns_push_type: Some(PushType::Alert),
            apns_expiration: Some(self.expiration),
            apns_priority: Some(if self.loudness.at_once {
                ApnsPriority::High
            } else {
                ApnsPriority::Normal
            }),
            apns_topic: Some(&self.topic),
            // A job redelivered after a crash pushes again; with the same
            // collapse id the device replaces the first alert instead of
            // showing two. An event with an alert key replaces the alert
            // of the project's earlier events with that key.
            apns_collapse_id: Some(CollapseId::new(&self.collapse_id)?),
        };
        let mut builder = DefaultNotificationBuilder::new().set_title(&self.title);
        if let Some(body) = &self.body {
            builder = builder.set_body(body);
        }
        if let Some(sound) = self.loudness.sound {
            builder = builder.set_sound(sound);
        }
        let mut payload = builder.build(device_token, options);
        payload.add_custom_data("channel", &self.channel)?;
        let subject = if self.summary { "summaryId" } else { "eventId" };
        payload.add_custom_data(subject, &self.event_id)?;
        if let Some(icon) = &self.icon {
            payload.add_custom_data("icon", icon)?;
        }
        if let Some(alert_key) = &self.alert_key {
            payload.add_custom_data("alertKey", alert_key)?;
        }
        if let Some(url) = &self.url {
            payload.add_custom_data("url", url)?;
        }
        let Payload {
            options,
            device_token,
            aps,
            data,
        } = payload;
        Ok(LeveledPayload {
            aps: LeveledAps {
                base: aps,
                interruption_level: self.loudness.interruption_level,
                // Notification Center groups the alerts of a channel.
                thread_id: &self.channel,
            },
            data,
            options,
            device_token,
        })
    }

    /// The JSON body APNs receives (the same for every device).
    pub(super) fn to_json(&self) -> Result<String, a2::Error> {
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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::push::apns::fixtures::{DEVICE_TOKEN, TOPIC, alert, now};

    fn json(message: &ApnsMessage) -> (String, Value) {
        let text = message.to_json().expect("payload serializes");
        let value = serde_json::from_str(&text).expect("payload is JSON");
        (text, value)
    }

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
        assert_eq!(value["url"], "https://shop.example.com/orders/1234");
    }

    /// What an app shows for an event written in markdown, and where its
    /// tap leads: the event as the worker turns it into an alert.
    #[test]
    fn a_markdown_event_is_plain_text_with_its_url_beside_the_event_id() {
        let alert = crate::push::markdown_alert();
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (_, value) = json(&message);
        assert_eq!(
            value["aps"]["alert"]["body"],
            crate::push::MARKDOWN_AS_TEXT,
            "{value}"
        );
        assert_eq!(value["url"], "https://ci.example.com/runs/42?tab=log");
        assert_eq!(value["eventId"], alert.event_id.to_string());
        assert_eq!(value["channel"], "deploys");
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
            url: None,
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (_, value) = json(&message);
        assert_eq!(value["aps"]["alert"]["title"], "Payment failed");
        assert!(value["aps"]["alert"].get("body").is_none(), "{value}");
        assert!(value.get("icon").is_none(), "{value}");
        assert!(value.get("url").is_none(), "{value}");
    }

    #[test]
    fn an_alert_key_is_the_collapse_id_and_the_channel_the_thread() {
        let scope = common::store::Scope::new("acme", "shop");
        let alert = Alert {
            alert_key: Some("deploy-42".into()),
            collapse_id: crate::push::collapse_id(&scope, uuid::Uuid::nil(), Some("deploy-42")),
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let payload = message.payload(DEVICE_TOKEN).expect("payload");
        let collapse_id = payload
            .get_options()
            .apns_collapse_id
            .as_ref()
            .map(|id| id.value);
        assert_eq!(collapse_id, Some(alert.collapse_id.as_str()));
        let (_, value) = json(&message);
        assert_eq!(value["alertKey"], "deploy-42");
        assert_eq!(value["aps"]["thread-id"], "payments");
    }

    #[test]
    fn options_collapse_on_the_event_id_and_ask_for_a_high_priority_alert_for_a_day() {
        let alert = alert();
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let payload = message.payload(DEVICE_TOKEN).expect("payload");
        let options = payload.get_options();
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
        assert_eq!(payload.get_device_token(), DEVICE_TOKEN);
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
    fn a_long_description_gives_way_to_the_url_which_is_never_cut() {
        let url = format!("https://shop.example.com/orders/{}", "9".repeat(1_500));
        let alert = Alert {
            body: Some("Card declined ".repeat(1_000)),
            url: Some(url.clone()),
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (text, value) = json(&message);
        assert!(text.len() <= MAX_PAYLOAD_BYTES, "{} bytes", text.len());
        assert_eq!(value["url"], url.as_str(), "whole");
        let body = value["aps"]["alert"]["body"].as_str().expect("body kept");
        assert!(body.ends_with('…') && body.len() > 1_500, "{body}");
    }

    #[test]
    fn a_url_that_leaves_no_room_for_the_title_is_left_out_not_cut() {
        let alert = Alert {
            url: Some(format!("https://shop.example.com/{}", "a".repeat(4_100))),
            ..alert()
        };
        let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
        let (text, value) = json(&message);
        assert!(text.len() <= MAX_PAYLOAD_BYTES, "{} bytes", text.len());
        assert!(value.get("url").is_none(), "{value}");
        assert_eq!(
            value["aps"]["alert"]["body"], "Card declined for order 1234",
            "the body is whole again once the URL is gone"
        );
        assert_eq!(value["eventId"], alert.event_id.to_string());
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
}

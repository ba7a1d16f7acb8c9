//! How loud an APNs alert is: the event's priority as an interruption
//! level, a sound and an `apns-priority` ([`Loudness`]), and the payload
//! that carries the interruption level and the thread id, which a2 0.10
//! does not model ([`LeveledPayload`]).

use std::collections::BTreeMap;

use a2::NotificationOptions;
use a2::request::payload::{APS, PayloadLike};
use serde::Serialize;
use serde_json::Value;

use crate::push::Priority;

/// How an alert of each priority presents on an iPhone: `low` lands
/// quietly in the notification list (`passive`, no sound, and APNs may
/// hold it to save power: `apns-priority` 5); `normal` is `active` with the
/// default sound; `high` is `time-sensitive` (it breaks through Focus where
/// the app has that entitlement) with sound. Both are sent at once (10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Loudness {
    pub(super) interruption_level: &'static str,
    pub(super) sound: Option<&'static str>,
    /// `apns-priority` 10 (at once) rather than 5 (when the phone is awake).
    pub(super) at_once: bool,
}

impl Loudness {
    pub(super) fn of(priority: Priority) -> Self {
        match priority {
            Priority::Low => Self {
                interruption_level: "passive",
                sound: None,
                at_once: false,
            },
            Priority::Normal => Self {
                interruption_level: "active",
                sound: Some("default"),
                at_once: true,
            },
            Priority::High => Self {
                interruption_level: "time-sensitive",
                sound: Some("default"),
                at_once: true,
            },
        }
    }
}

/// a2's payload with the `aps` key a2 0.10 does not model,
/// `interruption-level` (iOS 15+); a2 sends any [`PayloadLike`].
#[derive(Debug, Serialize)]
pub(super) struct LeveledPayload<'a> {
    pub(super) aps: LeveledAps<'a>,
    #[serde(flatten)]
    pub(super) data: BTreeMap<&'a str, Value>,
    #[serde(skip)]
    pub(super) options: NotificationOptions<'a>,
    #[serde(skip)]
    pub(super) device_token: &'a str,
}

#[derive(Debug, Serialize)]
pub(super) struct LeveledAps<'a> {
    #[serde(flatten)]
    pub(super) base: APS<'a>,
    #[serde(rename = "interruption-level")]
    pub(super) interruption_level: &'static str,
    /// Which group of Notification Center the alert joins (its channel).
    #[serde(rename = "thread-id")]
    pub(super) thread_id: &'a str,
}

impl PayloadLike for LeveledPayload<'_> {
    fn get_device_token(&self) -> &str {
        self.device_token
    }

    fn get_options(&self) -> &NotificationOptions<'_> {
        &self.options
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::Alert;
    use crate::push::apns::fixtures::{DEVICE_TOKEN, TOPIC, alert, now};
    use crate::push::apns::message::ApnsMessage;

    #[test]
    fn each_priority_has_its_interruption_level_sound_and_apns_priority() {
        for (priority, level, sound, apns_priority) in [
            (Priority::Low, "passive", None, "5"),
            (Priority::Normal, "active", Some("default"), "10"),
            (Priority::High, "time-sensitive", Some("default"), "10"),
        ] {
            let alert = Alert {
                priority,
                ..alert()
            };
            let message = ApnsMessage::from_alert(&alert, TOPIC, now()).expect("fits");
            let value: serde_json::Value =
                serde_json::from_str(&message.to_json().expect("JSON")).expect("JSON");
            assert_eq!(value["aps"]["interruption-level"], level, "{priority:?}");
            assert_eq!(
                value["aps"]["sound"].as_str(),
                sound,
                "{priority:?}: {value}"
            );
            assert_eq!(value["aps"]["alert"]["title"], "💸 Payment failed");
            let payload = message.payload(DEVICE_TOKEN).expect("payload");
            assert_eq!(
                payload
                    .get_options()
                    .apns_priority
                    .as_ref()
                    .map(ToString::to_string)
                    .as_deref(),
                Some(apns_priority),
                "{priority:?}"
            );
            assert_eq!(payload.get_device_token(), DEVICE_TOKEN);
        }
    }
}

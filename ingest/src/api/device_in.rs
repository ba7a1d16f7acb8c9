//! The body of `POST /v1/devices`, one shape per kind of device (APNs, the
//! default; Web Push; FCM), and what of it is stored once a subscription's
//! endpoint passed the endpoint policy.

use common::{
    endpoint::EndpointPolicy,
    store::{DeviceRegistration, PushTarget, WebPushSubscription},
    webpush_keys::{KeyFault, SubscriptionKeys},
};
use poem_openapi::{Enum, Object, Union, types::Example};

use super::{
    device_rules::{BurstRule, QuietHoursIn, RulesIn},
    devices::Environment,
    priority::EventPriority,
};
use crate::{
    error::{ApiError, FieldError},
    types::{Change, Nullable},
};

/// `"apns"`: an iPhone app's APNs device token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum ApnsKind {
    Apns,
}

/// `"webpush"`: a browser's Web Push subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum WebPushKind {
    Webpush,
}

/// `"fcm"`: a Firebase Cloud Messaging registration token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum FcmKind {
    Fcm,
}

/// Declares a kind's registration body: its own fields, then the label and
/// the rules every kind takes, written once so the kinds never differ.
macro_rules! device_in {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            $($own)*
            /// A label to recognise the device by.
            #[oai(validator(min_length = 1, max_length = 100))]
            pub name: Option<String>,
            /// Only events of these channels are pushed to the device;
            /// absent means every channel. At most 50, each 1 to 100
            /// characters.
            #[oai(validator(max_items = 50, min_length = 1, max_length = 100))]
            pub channels: Option<Vec<String>>,
            /// Only events carrying one of these tags are pushed; absent
            /// means any event, tagged or not. 1 to 20, each 1 to 64
            /// characters.
            #[oai(validator(min_items = 1, max_items = 20, min_length = 1, max_length = 64))]
            pub tags: Option<Vec<String>>,
            /// Only events of this priority or higher are pushed; `low`
            /// when absent.
            pub min_priority: Option<EventPriority>,
            /// When alerts are held for one summary at the end; none when
            /// absent.
            pub quiet_hours: Option<QuietHoursIn>,
            /// How many alerts may come in a window before the rest wait
            /// for one digest; no limit when absent.
            pub burst: Option<BurstRule>,
        }

        impl $name {
            /// Its rules fields, taken out.
            fn rules(&mut self) -> RulesIn {
                RulesIn {
                    channels: self.channels.take(),
                    tags: self.tags.take(),
                    min_priority: self.min_priority.take(),
                    quiet_hours: self.quiet_hours.take(),
                    burst: self.burst.take(),
                }
            }
        }
    };
}

device_in! {
    /// An iPhone to push alerts to through APNs. Unknown fields are rejected.
    #[derive(Debug, Clone, Object)]
    #[oai(rename_all = "camelCase", deny_unknown_fields, example)]
    pub struct ApnsDeviceIn {
        /// `apns`, the default when absent.
        pub kind: Option<ApnsKind>,
        /// The APNs device token, in hex.
        #[oai(validator(min_length = 32, max_length = 200, pattern = "^[0-9a-fA-F]+$"))]
        pub token: String,
        pub environment: Environment,
    }
}

/// The sample body the docs show and their "Test Request" sends: a token
/// of the length APNs gives (32 bytes, 64 hex digits).
impl Example for ApnsDeviceIn {
    fn example() -> Self {
        Self {
            kind: Some(ApnsKind::Apns),
            token: "a1b2c3d4e5f60718".repeat(4),
            environment: Environment::Sandbox,
            name: Some("On-call iPhone".into()),
            channels: Some(vec!["payments".into()]),
            tags: Some(vec!["eu".into(), "card".into()]),
            min_priority: Some(EventPriority::Normal),
            quiet_hours: Some(QuietHoursIn {
                start: "22:00".into(),
                end: "07:00".into(),
                time_zone: "Europe/Berlin".into(),
                allow_priority: Change::Set(EventPriority::High),
            }),
            burst: Some(BurstRule {
                max: 5,
                per_minutes: 10,
            }),
        }
    }
}

/// The keys of a Web Push subscription.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields)]
pub struct WebPushKeys {
    /// The browser's P-256 public key, base64url.
    #[oai(validator(min_length = 80, max_length = 100, pattern = "^[A-Za-z0-9_-]+={0,2}$"))]
    pub p256dh: String,
    /// The browser's 16-byte authentication secret, base64url.
    #[oai(validator(min_length = 16, max_length = 32, pattern = "^[A-Za-z0-9_-]+={0,2}$"))]
    pub auth: String,
}

/// A browser's push subscription, exactly as `PushSubscription.toJSON()`
/// gives it.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebPushSubscriptionIn {
    /// The push service's URL for this subscription: https, on a public
    /// address.
    #[oai(validator(min_length = 1, max_length = 2048))]
    pub endpoint: String,
    /// When the subscription expires (milliseconds since the epoch), if the
    /// browser says; accepted and not used.
    pub expiration_time: Option<Nullable<f64>>,
    pub keys: WebPushKeys,
}

device_in! {
    /// A browser to push alerts to through Web Push. Unknown fields are
    /// rejected.
    #[derive(Debug, Clone, Object)]
    #[oai(rename_all = "camelCase", deny_unknown_fields)]
    pub struct WebPushDeviceIn {
        pub kind: WebPushKind,
        pub subscription: WebPushSubscriptionIn,
    }
}

device_in! {
    /// An Android phone (or any FCM client) to push alerts to through
    /// Firebase Cloud Messaging. Unknown fields are rejected.
    #[derive(Debug, Clone, Object)]
    #[oai(rename_all = "camelCase", deny_unknown_fields)]
    pub struct FcmDeviceIn {
        pub kind: FcmKind,
        /// The FCM registration token.
        #[oai(validator(min_length = 1, max_length = 4096))]
        pub token: String,
    }
}

/// A device to push alerts to, by `kind`: `apns` (the default), `webpush`
/// or `fcm`.
#[derive(Debug, Clone, Union)]
#[oai(one_of)]
pub enum DeviceIn {
    Apns(ApnsDeviceIn),
    WebPush(WebPushDeviceIn),
    Fcm(FcmDeviceIn),
}

impl DeviceIn {
    /// What to store, once the endpoint of a subscription passed the
    /// policy (a refusal is reported at its field).
    pub(crate) async fn registration(
        self,
        policy: &EndpointPolicy,
    ) -> Result<DeviceRegistration, ApiError> {
        Ok(match self {
            Self::Apns(mut d) => DeviceRegistration {
                rules: d.rules().parse()?,
                target: PushTarget::Apns {
                    // Hex is case-insensitive; one spelling keeps one device per token.
                    token: d.token.to_ascii_lowercase(),
                    environment: d.environment.into(),
                },
                name: d.name,
            },
            Self::WebPush(mut d) => {
                let rules = d.rules().parse()?;
                let keys = &d.subscription.keys;
                // A key no push could encrypt to is refused now, not at
                // every send.
                SubscriptionKeys::decode(&keys.p256dh, &keys.auth).map_err(|fault| {
                    let (field, message) = match fault {
                        KeyFault::P256dh(message) => ("p256dh", message),
                        KeyFault::Auth(message) => ("auth", message),
                    };
                    ApiError::Validation(vec![FieldError::new(
                        vec!["subscription".into(), "keys".into(), field.into()],
                        message.to_owned(),
                    )])
                })?;
                let endpoint = d.subscription.endpoint;
                policy.check(&endpoint).await.map_err(|refusal| {
                    ApiError::Validation(vec![FieldError::new(
                        vec!["subscription".into(), "endpoint".into()],
                        refusal.to_string(),
                    )])
                })?;
                DeviceRegistration {
                    target: PushTarget::WebPush(WebPushSubscription {
                        endpoint,
                        p256dh: d.subscription.keys.p256dh,
                        auth: d.subscription.keys.auth,
                    }),
                    name: d.name,
                    rules,
                }
            }
            Self::Fcm(mut d) => DeviceRegistration {
                rules: d.rules().parse()?,
                target: PushTarget::Fcm { token: d.token },
                name: d.name,
            },
        })
    }
}

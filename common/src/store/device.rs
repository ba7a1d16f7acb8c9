//! Devices: what a registration asks for and what is kept of each phone or
//! browser, by the push service that reaches it.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::model::{ApnsEnvironment, Priority, Scope};
use crate::rules::{AlertRules, Burst, QuietHours};

/// Which push service reaches a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// An iPhone app's APNs device token.
    Apns,
    /// A browser's Web Push subscription (RFC 8030).
    Webpush,
    /// A Firebase Cloud Messaging registration token.
    Fcm,
}

impl DeviceKind {
    pub const ALL: [Self; 3] = [Self::Apns, Self::Webpush, Self::Fcm];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Apns => "apns",
            Self::Webpush => "webpush",
            Self::Fcm => "fcm",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A browser's push subscription, as `PushSubscription.toJSON()` gives it.
#[derive(Clone, PartialEq, Eq)]
pub struct WebPushSubscription {
    /// The push service's URL for this subscription (checked against the
    /// endpoint policy at registration and again at every send).
    pub endpoint: String,
    /// The browser's P-256 public key (base64url, uncompressed point).
    pub p256dh: String,
    /// The 16-byte authentication secret (base64url).
    pub auth: String,
}

impl std::fmt::Debug for WebPushSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The endpoint is a capability URL and the keys decrypt the pushes:
        // none of them reaches a log line.
        f.debug_struct("WebPushSubscription")
            .finish_non_exhaustive()
    }
}

/// Where a device's pushes go: what its push service needs to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushTarget {
    Apns {
        /// The APNs device token (hex, lowercase).
        token: String,
        environment: ApnsEnvironment,
    },
    WebPush(WebPushSubscription),
    Fcm {
        /// The FCM registration token.
        token: String,
    },
}

impl PushTarget {
    pub fn kind(&self) -> DeviceKind {
        match self {
            Self::Apns { .. } => DeviceKind::Apns,
            Self::WebPush(_) => DeviceKind::Webpush,
            Self::Fcm { .. } => DeviceKind::Fcm,
        }
    }

    /// What identifies the device within its scope: the token, or the
    /// subscription's endpoint. Registering the same one again updates that
    /// device instead of adding another.
    pub fn address(&self) -> &str {
        match self {
            Self::Apns { token, .. } | Self::Fcm { token } => token,
            Self::WebPush(subscription) => &subscription.endpoint,
        }
    }
}

/// A phone or browser connected to a project, to which alerts are pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub id: Uuid,
    pub scope: Scope,
    pub target: PushTarget,
    pub name: Option<String>,
    /// Which alerts it gets, and which are held for a summary.
    pub rules: AlertRules,
    /// False once its push service said it is gone; re-registering revives it.
    pub active: bool,
    pub deactivated_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Device {
    pub fn kind(&self) -> DeviceKind {
        self.target.kind()
    }
}

/// What a device registration asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRegistration {
    pub target: PushTarget,
    pub name: Option<String>,
    pub rules: AlertRules,
}

/// A change to a device: its name (`None` left as it is, `Some(None)`
/// cleared) and its rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DevicePatch {
    pub name: Option<Option<String>>,
    pub rules: RulesPatch,
}

impl DevicePatch {
    /// Applies the change to `device`; true when something changed.
    pub fn apply(&self, device: &mut Device) -> bool {
        let before = (device.name.clone(), device.rules.clone());
        if let Some(name) = &self.name {
            device.name.clone_from(name);
        }
        self.rules.apply(&mut device.rules);
        before != (device.name.clone(), device.rules.clone())
    }
}

/// A change to a recipient's rules: each field `None` is left as it is;
/// `Some(None)` clears it (a cleared minimum priority is `low`, the
/// default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulesPatch {
    pub channels: Option<Option<Vec<String>>>,
    pub tags: Option<Option<Vec<String>>>,
    pub min_priority: Option<Option<Priority>>,
    pub quiet_hours: Option<Option<QuietHours>>,
    pub burst: Option<Option<Burst>>,
}

impl RulesPatch {
    /// Applies the change to `rules`.
    pub fn apply(&self, rules: &mut AlertRules) {
        if let Some(channels) = &self.channels {
            rules.channels.clone_from(channels);
        }
        if let Some(tags) = &self.tags {
            rules.tags.clone_from(tags);
        }
        if let Some(min_priority) = self.min_priority {
            rules.min_priority = min_priority.unwrap_or(Priority::Low);
        }
        if let Some(quiet_hours) = self.quiet_hours {
            rules.quiet_hours = quiet_hours;
        }
        if let Some(burst) = self.burst {
            rules.burst = burst;
        }
    }
}

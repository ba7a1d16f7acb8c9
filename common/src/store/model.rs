//! The records the store keeps, independent of how each backend lays them out.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The organization and project an API key belongs to. Everything a key
/// writes or reads is confined to its scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    pub org: String,
    pub project: String,
}

impl Scope {
    pub fn new(org: impl Into<String>, project: impl Into<String>) -> Self {
        Self {
            org: org.into(),
            project: project.into(),
        }
    }
}

/// An API key as stored: never the secret itself, only its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: Uuid,
    pub name: Option<String>,
    pub scope: Scope,
    /// Hex SHA-256 of the secret.
    pub hash: String,
    /// The first characters of the secret, so an operator can tell keys apart.
    pub prefix: String,
    /// Requests per minute; `None` means the service default.
    pub rate_limit: Option<u32>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl ApiKey {
    pub fn is_active(&self) -> bool {
        self.revoked_at.is_none()
    }
}

/// A recorded product moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Time-ordered (UUIDv7).
    pub id: Uuid,
    pub scope: Scope,
    pub channel_name: String,
    pub title: String,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub tags: Vec<String>,
    pub metadata: Map<String, Value>,
    pub user_id: Option<String>,
    pub notify: bool,
    pub source: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Where the event's push notification stands (the outbox state).
    pub notification: NotificationState,
    /// The HTTP request that recorded the event, carried into its jobs so a
    /// push can be traced back to it.
    pub request_id: Option<String>,
}

/// Where an event's push notification stands.
///
/// `pending` (stored, no job confirmed by the queue yet) → `queued` (a job is
/// on the queue) → `delivered` (at least one device got it), `failed` (no
/// device got it) or `skipped` (`notify` was false, or no device to send to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationState {
    Pending,
    Queued,
    Delivered,
    Failed,
    Skipped,
}

impl NotificationState {
    pub const ALL: [Self; 5] = [
        Self::Pending,
        Self::Queued,
        Self::Delivered,
        Self::Failed,
        Self::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Queued => "queued",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

/// Which APNs environment a device token belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApnsEnvironment {
    Production,
    Sandbox,
}

impl ApnsEnvironment {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Production => "production",
            Self::Sandbox => "sandbox",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Production, Self::Sandbox]
            .into_iter()
            .find(|e| e.as_str() == s)
    }
}

/// A phone connected to a project, to which alerts are pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub id: Uuid,
    pub scope: Scope,
    /// The APNs device token (hex).
    pub token: String,
    pub environment: ApnsEnvironment,
    pub name: Option<String>,
    /// Only events of these channels are pushed; `None` means every channel.
    pub channels: Option<Vec<String>>,
    /// False once APNs said the token is dead; re-registering revives it.
    pub active: bool,
    pub deactivated_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Device {
    /// Whether an event of `channel` is for this device.
    pub fn wants(&self, channel: &str) -> bool {
        self.active
            && self
                .channels
                .as_ref()
                .is_none_or(|channels| channels.iter().any(|c| c == channel))
    }
}

/// What a device registration asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRegistration {
    pub token: String,
    pub environment: ApnsEnvironment,
    pub name: Option<String>,
    pub channels: Option<Vec<String>>,
}

/// Where the push of one event to one device stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// A worker has claimed it and is sending.
    Sending,
    /// Failed transiently; a retry is scheduled.
    Retrying,
    Delivered,
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sending => "sending",
            Self::Retrying => "retrying",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Sending, Self::Retrying, Self::Delivered, Self::Failed]
            .into_iter()
            .find(|d| d.as_str() == s)
    }

    /// Whether nothing more will happen to this delivery.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Delivered | Self::Failed)
    }

    /// Whether a worker may claim a delivery in this state, claimed at
    /// `claimed`: a scheduled retry always, a send only once its claim is
    /// older than `stale_before` (its worker died). Shared by every backend.
    pub fn claimable<T: PartialOrd>(self, claimed: T, stale_before: T) -> bool {
        match self {
            Self::Retrying => true,
            Self::Sending => claimed < stale_before,
            Self::Delivered | Self::Failed => false,
        }
    }
}

/// The push of one event to one device, recorded under the unique
/// (event, device) key so a redelivered job never pushes twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub event_id: Uuid,
    pub device_id: Uuid,
    pub state: DeliveryState,
    /// Sends tried so far.
    pub attempts: u32,
    pub error: Option<String>,
    pub apns_id: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// The answer to a worker asking to send one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryClaim {
    /// Send it; this is attempt number `attempt` (1-based).
    Acquired { attempt: u32 },
    /// Already settled: do not send again.
    Settled(DeliveryState),
    /// Another worker is sending it right now.
    Busy,
}

/// A user of the caller's product, as merged from every identify call.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub user_id: String,
    pub properties: Map<String, Value>,
    /// A set, kept in first-seen order.
    pub aliases: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The response kept for an idempotency key, replayed on retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// The outcome of claiming an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyBegin {
    /// The caller owns the key now and must complete or release it.
    Started,
    /// A request with the same key and body already completed: replay this.
    Replay(StoredResponse),
    /// The key was used for a request with another method, path or body.
    Mismatch,
    /// A request with the same key is still running.
    InFlight,
}

/// Merges an identify call into what was stored: new property keys overwrite,
/// aliases are a set union in first-seen order. Shared by every backend so
/// they cannot disagree.
pub fn merge_identity_fields(
    properties: &mut Map<String, Value>,
    aliases: &mut Vec<String>,
    new_properties: Map<String, Value>,
    new_aliases: Vec<String>,
) {
    properties.extend(new_properties);
    for alias in new_aliases {
        if !aliases.contains(&alias) {
            aliases.push(alias);
        }
    }
}

//! The records the store keeps, independent of how each backend lays them out.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::rules::{FilterReason, HoldReason};

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
    /// How insistently its push alerts (sound, interruption level, urgency).
    pub priority: Priority,
    /// Its push replaces, on the device, the one of any earlier event of
    /// the project with the same key (`None`: collapsing on the event id).
    pub alert_key: Option<String>,
    /// How its description is written: plain text or markdown.
    pub parser: Parser,
    /// Where tapping its alert leads: an http(s) URL.
    pub url: Option<String>,
    /// When it happened: when it was recorded, or the past time a
    /// backfilled event was recorded at (such an event is never pushed).
    pub created_at: DateTime<Utc>,
    /// Where the event's push notification stands (the outbox state).
    pub notification: NotificationState,
    /// The HTTP request that recorded the event, carried into its jobs so a
    /// push can be traced back to it.
    pub request_id: Option<String>,
    /// While the notification is `pending` or `queued`: when the outbox
    /// relay should publish its job (again) if nothing has settled it by
    /// then. `None` once settled.
    pub notification_due_at: Option<DateTime<Utc>>,
}

impl Event {
    /// Where the event sits in recording order.
    pub fn position(&self) -> EventPosition {
        EventPosition {
            created_at: self.created_at,
            id: self.id,
        }
    }
}

/// `url` if it is a link a tap can open: an absolute http(s) URL with a
/// host. The one rule for where an event leads: the API refuses any other
/// `url`, and the notifier checks again what an event stored some other
/// way may hold.
pub fn web_link(url: &str) -> Option<url::Url> {
    url::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
}

/// Where an event sits in recording order: when it was recorded, ties
/// broken by id. Listings and streams continue from one, so they never show
/// an event twice or skip one, whatever arrives meanwhile. (Ids alone would
/// not do: an id reserved by an `Idempotency-Key` is older than the write.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventPosition {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

impl EventPosition {
    /// Before every event recorded at `t` or later.
    pub fn start_of(t: DateTime<Utc>) -> Self {
        Self {
            created_at: t,
            id: Uuid::nil(),
        }
    }
}

/// Which of a scope's events a listing wants; every field set narrows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub channel: Option<String>,
    /// Events carrying this tag.
    pub tag: Option<String>,
    /// Events about this user: recorded under its id or any of its
    /// aliases (an alias given names its user).
    pub user_id: Option<String>,
    /// Text found in the title or the description, ignoring case.
    pub text: Option<String>,
    /// Recorded at or after.
    pub since: Option<DateTime<Utc>>,
    /// Recorded before.
    pub until: Option<DateTime<Utc>>,
}

/// A channel with how many events it holds and when the last one came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelStats {
    pub name: String,
    pub event_count: u64,
    /// `None` once retention has removed all its events.
    pub last_event_at: Option<DateTime<Utc>>,
}

/// The width of a histogram bucket, aligned to the UTC hour or day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Hour,
    Day,
}

impl Bucket {
    pub fn seconds(self) -> i64 {
        match self {
            Self::Hour => 3600,
            Self::Day => 86_400,
        }
    }

    /// The start of the bucket holding `t`.
    pub fn floor(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let width = self.seconds();
        let start = t.timestamp().div_euclid(width) * width;
        DateTime::from_timestamp(start, 0).unwrap_or(t)
    }
}

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub events: u64,
    pub deliveries: u64,
    /// Summaries of held alerts (with their pushes' deliveries).
    pub summaries: u64,
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

    /// The states nothing more happens in.
    pub const SETTLED: [Self; 3] = [Self::Delivered, Self::Failed, Self::Skipped];
    pub const UNSETTLED: [Self; 2] = [Self::Pending, Self::Queued];

    /// Whether nothing more happens in this state.
    pub fn is_settled(self) -> bool {
        Self::SETTLED.contains(&self)
    }

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

/// How insistently an event's push should alert: each provider maps it to
/// its own terms (APNs interruption level and sound, Web Push `Urgency`,
/// FCM Android priority). Events stored before priorities were are
/// `normal`, as are jobs published before them. Ordered from `low` to
/// `high`, so rules can compare them.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Shown quietly: no sound, no interruption.
    Low,
    /// Shown with the default sound.
    #[default]
    Normal,
    /// Shown with sound, breaking through Focus where the platform allows.
    High,
}

impl Priority {
    pub const ALL: [Self; 3] = [Self::Low, Self::Normal, Self::High];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Normal => "normal",
            Self::High => "high",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// A stored priority; none stored (an event from before priorities
    /// were) is `normal`.
    pub fn from_stored(s: Option<&str>) -> anyhow::Result<Self> {
        s.map_or(Ok(Self::Normal), |s| {
            Self::parse(s).ok_or_else(|| anyhow::anyhow!("unknown priority {s:?}"))
        })
    }
}

/// How an event's description is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Parser {
    /// Shown as it is.
    #[default]
    Text,
    /// CommonMark: shown rendered (and sanitised) where HTML can be shown,
    /// reduced to readable text where it cannot (pushes).
    Markdown,
}

impl Parser {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Markdown => "markdown",
        }
    }

    /// A stored parser; none stored (an event from before parsers were)
    /// is `text`.
    pub fn from_stored(s: Option<&str>) -> anyhow::Result<Self> {
        match s {
            None | Some("text") => Ok(Self::Text),
            Some("markdown") => Ok(Self::Markdown),
            Some(other) => Err(anyhow::anyhow!("unknown parser {other:?}")),
        }
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

/// Where the push of one event to one device stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// A worker has claimed it and is sending.
    Sending,
    /// Failed transiently; a retry is scheduled.
    Retrying,
    Delivered,
    Failed,
    /// The device's rules say the event is not for it: never sent.
    Filtered(FilterReason),
    /// The device's rules held it back: it goes out in a summary (the end
    /// of quiet hours) or a digest (the end of a burst window) instead.
    Held(HoldReason),
}

impl DeliveryState {
    /// The state's name; [`DeliveryState::reason`] says why for
    /// `filtered` and `held`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sending => "sending",
            Self::Retrying => "retrying",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
            Self::Filtered(_) => "filtered",
            Self::Held(_) => "held",
        }
    }

    /// Why a delivery was filtered or held; `None` for the other states.
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Self::Filtered(reason) => Some(reason.as_str()),
            Self::Held(reason) => Some(reason.as_str()),
            _ => None,
        }
    }

    /// A stored state, with its reason when it has one.
    pub fn parse(state: &str, reason: Option<&str>) -> Option<Self> {
        Some(match state {
            "sending" => Self::Sending,
            "retrying" => Self::Retrying,
            "delivered" => Self::Delivered,
            "failed" => Self::Failed,
            "filtered" => Self::Filtered(FilterReason::parse(reason?)?),
            "held" => Self::Held(HoldReason::parse(reason?)?),
            _ => return None,
        })
    }

    /// Whether nothing more will happen to this delivery (a held one goes
    /// out in its summary, which is a push of its own).
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Sending | Self::Retrying)
    }
}

/// The push of one event to one device, recorded under the unique
/// (event, device) key so a redelivered job never pushes twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub event_id: Uuid,
    pub device_id: Uuid,
    pub state: DeliveryState,
    /// Sends tried so far. Each claim takes the next number, and only the
    /// holder of the latest claim may record an outcome (a fencing token).
    pub attempts: u32,
    pub error: Option<String>,
    pub apns_id: Option<String>,
    /// Which provider the outcome came from (`apns`, `webpush`, `fcm`, or
    /// `log` when pushes are only logged); `None` until an outcome is
    /// recorded, and for deliveries recorded before providers were.
    pub provider: Option<String>,
    /// A held delivery, once its summary went out: the id of that push.
    pub summary_id: Option<Uuid>,
    /// `sending`: when the claim's lease runs out (its worker is presumed
    /// dead after that); `retrying`: when the next try may start. `None`
    /// once final.
    pub lease_until: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// The answer to a worker asking to send one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryClaim {
    /// Send it; this is attempt number `attempt` (1-based), and the claim
    /// is this worker's until `lease_until`.
    Acquired {
        attempt: u32,
        lease_until: DateTime<Utc>,
        /// Taken over from an earlier claim that ran out without an
        /// outcome: that claim's push may have gone out, so this one may
        /// be a repeat.
        retaken: bool,
    },
    /// Already settled: do not send again.
    Settled(DeliveryState),
    /// Not now: another worker holds a live lease, or a retry is scheduled.
    /// Look again at `until`.
    Busy { until: DateTime<Utc> },
    /// Claimed `attempts` times without an outcome that settled it (workers
    /// kept dying on it): recorded as failed, never sent again.
    GaveUp { attempts: u32 },
}

/// What inserting an event did.
#[derive(Debug, Clone, PartialEq)]
pub enum Inserted {
    New,
    /// An event with this id was already stored; here it is.
    Existing(Box<Event>),
}

/// A user of the caller's product: what every identify call said of it,
/// and the counters its events keep (the rules are `user`'s).
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub user_id: String,
    pub properties: Map<String, Value>,
    /// A set, kept in first-seen order.
    pub aliases: Vec<String>,
    /// When its record was made: its first identify call, or the time of
    /// the event that made it.
    pub created_at: DateTime<Utc>,
    /// When identify last changed it (`created_at` if never).
    pub updated_at: DateTime<Utc>,
    /// The earliest time it was seen: an event's `created_at`, or an
    /// identify call.
    pub first_seen_at: DateTime<Utc>,
    /// The latest time it was seen.
    pub last_seen_at: DateTime<Utc>,
    /// How many events were recorded for it (under its id or an alias),
    /// retention's removals included.
    pub event_count: u64,
}

/// The response kept for an idempotency key, replayed on retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// The answer of an idempotent request, written in the same write as the
/// event it created, so the event is never stored without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotentOutcome {
    /// The request's `Idempotency-Key` (its scope is the event's).
    pub key: String,
    pub response: StoredResponse,
}

/// The outcome of claiming an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyBegin {
    /// The caller owns the key now and must complete, release or abandon
    /// it. What the request creates gets the id `resource`.
    Started { resource: Uuid },
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
pub(super) fn merge_identity_fields(
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

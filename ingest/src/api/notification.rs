//! Where an event's push notification stands, and the push to each device,
//! as `GET /v1/events/{id}` shows them.

use chrono::{DateTime, Utc};
use common::{
    destination::is_destination_id,
    rules::{FilterReason, HoldReason},
    store::{Delivery, DeliveryState, NotificationState},
};
use poem_openapi::{Enum, Object};
use serde::Serialize;
use uuid::Uuid;

use super::rendered::rfc3339;
use crate::types::Nullable;

/// Where an event's push notification stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum, Serialize)]
#[oai(rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum NotificationStateOut {
    /// Stored; the job is not on the queue yet (the relay will publish it).
    Pending,
    /// The job is on the queue.
    Queued,
    /// At least one device got the push.
    Delivered,
    /// No device got the push.
    Failed,
    /// `notify` was false, or the project had no device for the channel.
    Skipped,
}

impl From<NotificationState> for NotificationStateOut {
    fn from(s: NotificationState) -> Self {
        match s {
            NotificationState::Pending => Self::Pending,
            NotificationState::Queued => Self::Queued,
            NotificationState::Delivered => Self::Delivered,
            NotificationState::Failed => Self::Failed,
            NotificationState::Skipped => Self::Skipped,
        }
    }
}

/// Where the push of an event to one device stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum, Serialize)]
#[oai(rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStateOut {
    /// A worker has claimed it and is sending.
    Sending,
    /// Failed transiently; a retry is scheduled.
    Retrying,
    /// The push service accepted it.
    Delivered,
    /// Refused, or given up after the last retry.
    Failed,
    /// The device's rules say the event is not for it (`reason`: `channel`,
    /// `tag` or `priority`); never sent.
    Filtered,
    /// The device's rules held it back (`reason`: `quietHours` or `burst`):
    /// it goes out in one summary when quiet hours end, or in one digest
    /// when the burst window ends (`summaryId` once it has).
    Held,
}

/// Why a delivery was filtered or held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub enum DeliveryReasonOut {
    /// Not one of the device's channels.
    Channel,
    /// The device has tags, and the event carries none of them.
    Tag,
    /// Below the device's minimum priority.
    Priority,
    /// During the device's quiet hours, below their `allowPriority`.
    QuietHours,
    /// Past the device's burst limit.
    Burst,
}

impl DeliveryReasonOut {
    fn of(state: DeliveryState) -> Option<Self> {
        Some(match state {
            DeliveryState::Filtered(FilterReason::Channel) => Self::Channel,
            DeliveryState::Filtered(FilterReason::Tag) => Self::Tag,
            DeliveryState::Filtered(FilterReason::Priority) => Self::Priority,
            DeliveryState::Held(HoldReason::QuietHours) => Self::QuietHours,
            DeliveryState::Held(HoldReason::Burst) => Self::Burst,
            _ => return None,
        })
    }
}

impl From<DeliveryState> for DeliveryStateOut {
    fn from(s: DeliveryState) -> Self {
        match s {
            DeliveryState::Sending => Self::Sending,
            DeliveryState::Retrying => Self::Retrying,
            DeliveryState::Delivered => Self::Delivered,
            DeliveryState::Failed => Self::Failed,
            DeliveryState::Filtered(_) => Self::Filtered,
            DeliveryState::Held(_) => Self::Held,
        }
    }
}

/// The alert of an event to one recipient: a device's push, or a
/// destination's message (a webhook, Slack, Discord, Telegram, ntfy,
/// email). Each entry names one of the two.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct DeliveryOut {
    /// The device pushed to, for a push.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_id: Option<Uuid>,
    /// The destination sent to (`/admin/v1/projects/{projectId}/destinations`),
    /// for a destination's message.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_id: Option<Uuid>,
    pub state: DeliveryStateOut,
    /// Why it was filtered or held; null in the other states.
    pub reason: Nullable<DeliveryReasonOut>,
    /// A held delivery, once its summary or digest went out: the id of
    /// that push. Null otherwise.
    pub summary_id: Nullable<Uuid>,
    /// Sends tried so far.
    pub attempts: u32,
    /// Why the last try failed.
    pub error: Nullable<String>,
    /// Who answered the last try: `apns`, `webpush`, `fcm`, or `log` (pushes
    /// of the device's kind only logged, no credentials); a destination's
    /// kind (`webhook`, `slack`, `discord`, `telegram`, `ntfy`, `email`);
    /// null before that.
    pub provider: Nullable<String>,
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
}

impl From<Delivery> for DeliveryOut {
    fn from(d: Delivery) -> Self {
        // A destination's id says so by its version (see
        // `common::destination::is_destination_id`).
        let destination = is_destination_id(d.device_id);
        Self {
            device_id: (!destination).then_some(d.device_id),
            destination_id: destination.then_some(d.device_id),
            state: d.state.into(),
            reason: Nullable(DeliveryReasonOut::of(d.state)),
            summary_id: Nullable(d.summary_id),
            attempts: d.attempts,
            error: Nullable(d.error),
            provider: Nullable(d.provider),
            updated_at: d.updated_at,
        }
    }
}

/// An event's notification state and, when looked up, its deliveries.
#[derive(Debug, Clone, Object, Serialize)]
pub struct NotificationOut {
    pub state: NotificationStateOut,
    /// One entry per device and destination of the project the event
    /// concerned: sent, filtered or held (only in `GET /v1/events/{id}`).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<Vec<DeliveryOut>>,
}

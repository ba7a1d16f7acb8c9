//! An event's `priority` as the API takes and shows it, and its store twin.

use common::store::Priority;
use poem_openapi::Enum;

/// How insistently an event's push alerts: `low` is shown quietly (no
/// sound; APNs interruption level `passive`, Web Push `Urgency: low`, FCM
/// Android priority `normal` without sound); `normal` with the default
/// sound (APNs `active`, Web Push `normal`, FCM `normal`); `high` with
/// sound, breaking through Focus (APNs `time-sensitive`, Web Push `high`,
/// FCM `high`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum, serde::Serialize)]
#[oai(rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum EventPriority {
    Low,
    Normal,
    High,
}

impl From<EventPriority> for Priority {
    fn from(p: EventPriority) -> Self {
        match p {
            EventPriority::Low => Self::Low,
            EventPriority::Normal => Self::Normal,
            EventPriority::High => Self::High,
        }
    }
}

impl From<Priority> for EventPriority {
    fn from(p: Priority) -> Self {
        match p {
            Priority::Low => Self::Low,
            Priority::Normal => Self::Normal,
            Priority::High => Self::High,
        }
    }
}

//! What a device's rules decide for one event: send it now, or never
//! (filtered, with the reason). The decision is made once per (event,
//! device), on a job's first pass; a filtered one is recorded as the
//! delivery's outcome (`DeliveryStore::record_withheld`), so
//! `GET /v1/events/{id}` says where every alert went and why.

use chrono::{DateTime, Utc};
use common::{
    rules::FilterReason,
    store::{Delivery, DeliveryState, Device, Event},
};

/// The rules' answer for one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Send,
    Filtered(FilterReason),
}

/// What `device`'s rules say of `event`.
pub(super) fn verdict(device: &Device, event: &Event) -> Verdict {
    match device
        .rules
        .filter(&event.channel_name, &event.tags, event.priority)
    {
        Some(reason) => Verdict::Filtered(reason),
        None => Verdict::Send,
    }
}

/// The record of a delivery that is not sent: final at once, never claimed.
pub(super) fn withheld(
    event: &Event,
    device: &Device,
    state: DeliveryState,
    now: DateTime<Utc>,
) -> Delivery {
    Delivery {
        event_id: event.id,
        device_id: device.id,
        state,
        attempts: 0,
        error: None,
        apns_id: None,
        provider: None,
        summary_id: None,
        lease_until: None,
        updated_at: now,
    }
}

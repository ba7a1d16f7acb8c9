//! When an event's notification is settled by its deliveries: the one rule
//! the notifier relies on, which each store's
//! [`EventStore::settle_notification`](super::EventStore::settle_notification) applies
//! where it reads the deliveries (inside its write, for the embedded store).

use uuid::Uuid;

use super::{Delivery, DeliveryState, NotificationState};

/// The state an event's notification settles in, from its `deliveries` and
/// the devices that may still get one (`eligible`); `None` while a delivery
/// that can still happen is open. A delivery left unfinished for a device
/// that is no longer eligible (deleted, deactivated, or its channels
/// changed) will never be sent, so it does not keep the event open. A
/// delivery the device's rules filtered or held is final and counts as
/// neither sent nor failed: an event whose every delivery was filtered or
/// held is `skipped` (a held one goes out later, in its summary).
pub fn settled_state(deliveries: &[Delivery], eligible: &[Uuid]) -> Option<NotificationState> {
    let counted = deliveries
        .iter()
        .filter(|d| d.state.is_final() || eligible.contains(&d.device_id));
    let (mut any, mut delivered) = (false, false);
    for delivery in counted {
        if !delivery.state.is_final() {
            return None;
        }
        if matches!(
            delivery.state,
            DeliveryState::Filtered(_) | DeliveryState::Held(_)
        ) {
            continue;
        }
        any = true;
        delivered |= delivery.state == DeliveryState::Delivered;
    }
    Some(if !any {
        NotificationState::Skipped
    } else if delivered {
        NotificationState::Delivered
    } else {
        NotificationState::Failed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(device: u128, state: DeliveryState) -> Delivery {
        Delivery {
            event_id: Uuid::from_u128(1),
            device_id: Uuid::from_u128(device),
            state,
            attempts: 1,
            error: None,
            summary_id: None,
            apns_id: None,
            provider: None,
            lease_until: None,
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn an_event_settles_once_every_delivery_that_can_still_happen_is_final() {
        use DeliveryState::*;
        let (a, b) = (Uuid::from_u128(10), Uuid::from_u128(11));
        assert_eq!(settled_state(&[], &[]), Some(NotificationState::Skipped));
        assert_eq!(settled_state(&[], &[a]), Some(NotificationState::Skipped));
        let sent = [delivery(10, Delivered), delivery(11, Failed)];
        assert_eq!(
            settled_state(&sent, &[a, b]),
            Some(NotificationState::Delivered)
        );
        let lost = [delivery(10, Failed), delivery(11, Failed)];
        assert_eq!(
            settled_state(&lost, &[a, b]),
            Some(NotificationState::Failed)
        );
        // Open for a device that may still get it: not settled.
        let open = [delivery(10, Delivered), delivery(11, Retrying)];
        assert_eq!(settled_state(&open, &[a, b]), None);
        assert_eq!(settled_state(&[delivery(11, Sending)], &[b]), None);
        // Open for a device that no longer may: it does not count.
        assert_eq!(
            settled_state(&open, &[a]),
            Some(NotificationState::Delivered)
        );
        assert_eq!(
            settled_state(&[delivery(11, Retrying)], &[]),
            Some(NotificationState::Skipped)
        );
        // Filtered and held deliveries are final, and neither sent nor failed.
        let withheld = [
            delivery(10, Filtered(crate::rules::FilterReason::Tag)),
            delivery(11, Held(crate::rules::HoldReason::QuietHours)),
        ];
        assert_eq!(
            settled_state(&withheld, &[a, b]),
            Some(NotificationState::Skipped)
        );
        let one_failed = [withheld[0].clone(), delivery(11, Failed)];
        assert_eq!(
            settled_state(&one_failed, &[a, b]),
            Some(NotificationState::Failed)
        );
    }
}

//! What a recipient's rules decide for one event: send it now, never
//! (filtered, with the reason), or later, in a summary (held during its
//! quiet hours, or past its burst limit). The decision is made once per
//! (event, recipient), on a job's first pass; a filtered or held one is
//! recorded as the delivery's outcome (`DeliveryStore::record_withheld`),
//! so `GET /v1/events/{id}` says where every alert went and why.

use chrono::{DateTime, Utc};
use common::{
    rules::AlertRules,
    rules::{Burst, FilterReason},
    store::{Delivery, DeliveryState, Event},
};
use uuid::Uuid;

/// The rules' answer for one device, before the store is asked about its
/// burst window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Send,
    Filtered(FilterReason),
    /// In its quiet hours, which end then: hold it for their summary.
    Quiet {
        ends: DateTime<Utc>,
    },
    /// Send it if its burst window has room.
    Burst(Burst),
}

/// What a recipient's `rules` say of `event` at `now`: its filters first, then
/// its quiet hours (an event of their `allowPriority` or higher goes
/// through), then its burst limit. An event held for quiet hours does not
/// reach the device, so it does not count toward a burst.
///
/// `high` events count toward a burst and are held past it like any
/// other: the first `max` alerts of the window already woke whoever was
/// to be woken, and what a storm of urgent alerts adds is volume; its
/// digest comes within the window, as loud as the loudest alert it holds.
pub(super) fn verdict(rules: &AlertRules, event: &Event, now: DateTime<Utc>) -> Verdict {
    if let Some(reason) = rules.filter(&event.channel_name, &event.tags, event.priority) {
        return Verdict::Filtered(reason);
    }
    if let Some(quiet) = &rules.quiet_hours
        && !quiet.lets_through(event.priority)
        && let Some(ends) = quiet.ends_after(now)
    {
        return Verdict::Quiet { ends };
    }
    match rules.burst {
        Some(burst) => Verdict::Burst(burst),
        None => Verdict::Send,
    }
}

/// The record of a delivery that is not sent: final at once, never claimed.
pub(super) fn withheld(
    event: &Event,
    recipient: Uuid,
    state: DeliveryState,
    now: DateTime<Utc>,
) -> Delivery {
    Delivery {
        event_id: event.id,
        device_id: recipient,
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

#[cfg(test)]
mod tests {
    use super::*;
    use common::{
        rules::{QuietHours, QuietHoursForm},
        store::Priority,
    };

    fn event(priority: Priority) -> Event {
        crate::deliver::sample_event("payments", "Payment failed", priority)
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("a time")
    }

    #[test]
    fn quiet_hours_hold_what_is_below_their_allowed_priority_and_come_before_the_burst() {
        let burst = Burst {
            max: 5,
            per_minutes: 10,
        };
        let rules = AlertRules {
            quiet_hours: Some(
                QuietHours::try_from(QuietHoursForm {
                    start: "22:00".into(),
                    end: "07:00".into(),
                    time_zone: "Europe/Berlin".into(),
                    allow_priority: Some(Priority::High),
                })
                .expect("valid"),
            ),
            burst: Some(burst),
            ..AlertRules::every_alert()
        };
        let phone = rules;
        let night = at("2026-11-26T23:00:00Z");
        assert_eq!(
            verdict(&phone, &event(Priority::Normal), night),
            Verdict::Quiet {
                ends: at("2026-11-27T06:00:00Z")
            }
        );
        assert_eq!(
            verdict(&phone, &event(Priority::High), night),
            Verdict::Burst(burst),
            "let through, then counted"
        );
        assert_eq!(
            verdict(&phone, &event(Priority::Low), at("2026-11-26T12:00:00Z")),
            Verdict::Burst(burst)
        );
        let plain = AlertRules::every_alert();
        assert_eq!(verdict(&plain, &event(Priority::Low), night), Verdict::Send);
    }
}

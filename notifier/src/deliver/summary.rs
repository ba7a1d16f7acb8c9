//! What one summary job does: close the summary (nothing joins it after
//! that), read the events it holds, and send the device one push that
//! says what was held ("14 events while quiet: 9 in #payments, 5 in
//! #signups", "23 more in #payments") with the latest title, through the
//! same lease, retries and dead-token handling as any push (its delivery
//! is claimed under the summary's id). Once it went out, the summary is
//! done and its id is on the held deliveries; a push that is retried
//! comes back as the same job, later.

use std::collections::BTreeMap;

use common::{
    jobs::{Job, SummaryJob},
    rules::HoldReason,
    store::{Event, Summary, SummaryState},
};

use super::{DeliverError, Deliverer, JobOutcome, one_push::Sent, one_push::Subject};
use crate::{destinations::Message, metrics::RetryLabels, push::Alert, retry};

/// Most channels a summary names; the rest are counted together.
const NAMED_CHANNELS: usize = 3;

impl Deliverer {
    /// Processes one summary job.
    pub async fn summarize(&self, job: &SummaryJob) -> Result<JobOutcome, DeliverError> {
        let early = (job.due_at - self.clock.now()).to_std();
        if let Ok(early) = early.map(|d| d.max(std::time::Duration::from_millis(1))) {
            // Its window has not ended: closing it now would cut it short.
            self.summary_again(job, job.attempt, early).await?;
            return Ok(JobOutcome::Done);
        }
        let Some(summary) = self.store.close_summary(&job.scope, job.summary_id).await? else {
            tracing::warn!("summary not found; nothing to send");
            return Ok(JobOutcome::Done);
        };
        if summary.state == SummaryState::Done {
            return Ok(JobOutcome::Done);
        }
        let listed = self.recipients.list(&job.scope).await?;
        let device = listed
            .iter()
            .find(|d| d.id == summary.device_id && d.active);
        let keys: Vec<_> = summary
            .events
            .iter()
            .map(|id| (summary.scope.clone(), *id))
            .collect();
        let events: Vec<Event> = self
            .store
            .get_events(&keys)
            .await?
            .into_iter()
            .flatten()
            .collect();
        let (Some(device), Some(alert)) = (device, summary_alert(&summary, &events)) else {
            // Its device is gone, or its events (retention): nothing to
            // send, and nothing left to hold.
            tracing::info!(
                events = events.len(),
                "summary has no device or no event left; closed unsent"
            );
            self.store.finish_summary(&summary, false).await?;
            return Ok(JobOutcome::Done);
        };
        let message = device
            .is_destination()
            .then(|| Message::of_summary(&summary, &alert, &events, self.clock.now()));
        let subject = Subject {
            scope: &summary.scope,
            id: summary.id,
            alert,
            message,
        };
        let delay = self.retry.push_backoff(job.attempt + 1);
        match self.send_one(&subject, device, delay).await? {
            Sent::Delivered => {
                self.store.finish_summary(&summary, true).await?;
                self.metrics.count_summary(summary.reason);
                tracing::info!(
                    held = summary.events.len(),
                    reason = summary.reason.as_str(),
                    "summary sent"
                );
            }
            Sent::Final => self.store.finish_summary(&summary, false).await?,
            Sent::GaveUp => {
                self.store.finish_summary(&summary, false).await?;
                return Ok(JobOutcome::DeadLetter);
            }
            Sent::Retry(_, delay) => self.summary_again(job, job.attempt + 1, delay).await?,
            Sent::Wait(_, until) => {
                let delay = retry::recheck_delay(until, self.clock.now());
                self.summary_again(job, job.attempt, delay).await?;
            }
        }
        Ok(JobOutcome::Done)
    }

    async fn summary_again(
        &self,
        job: &SummaryJob,
        attempt: u32,
        delay: std::time::Duration,
    ) -> Result<(), DeliverError> {
        let again = Job::SummaryV1(SummaryJob {
            attempt,
            ..job.clone()
        });
        self.queue.publish_delayed(&again, delay).await?;
        self.metrics
            .job_retries
            .get_or_create(&RetryLabels { reason: "push" })
            .inc();
        Ok(())
    }
}

/// The push that summarises `events` (the ones of `summary` still stored);
/// `None` when there are none.
pub(super) fn summary_alert(summary: &Summary, events: &[Event]) -> Option<Alert> {
    let latest = events.iter().max_by_key(|e| e.position())?;
    let mut by_channel: BTreeMap<&str, usize> = BTreeMap::new();
    for event in events {
        *by_channel.entry(&event.channel_name).or_default() += 1;
    }
    let mut channels: Vec<(&str, usize)> = by_channel.into_iter().collect();
    channels.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let n = events.len();
    let counts = counted(&channels);
    let title = match summary.reason {
        HoldReason::QuietHours => {
            format!("{n} {} while quiet: {counts}", plural(n, "event", "events"))
        }
        HoldReason::Burst if channels.len() == 1 => format!("{n} more in #{}", channels[0].0),
        HoldReason::Burst => format!("{n} more: {counts}"),
    };
    Some(Alert {
        title,
        body: Some(format!("Latest: {}", latest.title)),
        icon: None,
        // The channel most of it came from: its thread, and where a tap
        // opens the feed.
        channel: channels[0].0.to_owned(),
        event_id: summary.id,
        // As loud as the loudest alert it holds.
        priority: events.iter().map(|e| e.priority).max().unwrap_or_default(),
        alert_key: None,
        collapse_id: summary.id.to_string(),
        summary: true,
        // A tap opens the feed at the channel: the held events' links are
        // theirs, not the summary's.
        url: None,
    })
}

/// "9 in #payments, 5 in #signups", naming at most [`NAMED_CHANNELS`].
fn counted(channels: &[(&str, usize)]) -> String {
    let mut parts: Vec<String> = channels
        .iter()
        .take(NAMED_CHANNELS)
        .map(|(name, count)| format!("{count} in #{name}"))
        .collect();
    let rest: usize = channels.iter().skip(NAMED_CHANNELS).map(|(_, c)| c).sum();
    if rest > 0 {
        let others = channels.len() - NAMED_CHANNELS;
        parts.push(format!(
            "{rest} in {others} other {}",
            plural(others, "channel", "channels")
        ));
    }
    parts.join(", ")
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::store::{Priority, Scope};
    use uuid::Uuid;

    fn event(channel: &str, title: &str, priority: Priority) -> Event {
        crate::deliver::sample_event(channel, title, priority)
    }

    fn summary(reason: HoldReason, events: &[Event]) -> Summary {
        Summary {
            id: Uuid::now_v7(),
            scope: Scope::new("o", "p"),
            device_id: Uuid::now_v7(),
            reason,
            due_at: common::time::now(),
            events: events.iter().map(|e| e.id).collect(),
            state: SummaryState::Closed,
        }
    }

    #[test]
    fn a_quiet_hours_summary_counts_by_channel_with_the_latest_title() {
        let mut events: Vec<Event> = (0..9)
            .map(|_| event("payments", "Payment failed", Priority::Low))
            .collect();
        events.extend((0..5).map(|_| event("signups", "New user", Priority::Normal)));
        events.push(event("payments", "Refund issued", Priority::Low));
        let held = summary(HoldReason::QuietHours, &events);
        let alert = summary_alert(&held, &events).expect("an alert");
        assert_eq!(
            alert.title,
            "15 events while quiet: 10 in #payments, 5 in #signups"
        );
        assert_eq!(alert.body.as_deref(), Some("Latest: Refund issued"));
        assert_eq!(alert.channel, "payments");
        assert_eq!(alert.priority, Priority::Normal, "the loudest it holds");
        assert_eq!(alert.event_id, held.id);
        assert_eq!(alert.collapse_id, held.id.to_string());
        assert!(alert.summary);
    }

    #[test]
    fn a_burst_digest_names_its_channel_and_counts_the_rest() {
        let events: Vec<Event> = (0..23)
            .map(|_| event("payments", "Payment failed", Priority::High))
            .collect();
        let alert = summary_alert(&summary(HoldReason::Burst, &events), &events).expect("alert");
        assert_eq!(alert.title, "23 more in #payments");
        assert_eq!(alert.body.as_deref(), Some("Latest: Payment failed"));
        assert_eq!(alert.priority, Priority::High);

        let mixed: Vec<Event> = ["a", "b", "b", "c", "d", "e"]
            .iter()
            .map(|c| event(c, "x", Priority::Low))
            .collect();
        let alert = summary_alert(&summary(HoldReason::Burst, &mixed), &mixed).expect("alert");
        assert_eq!(
            alert.title,
            "6 more: 2 in #b, 1 in #a, 1 in #c, 2 in 2 other channels"
        );
        let one = [event("a", "x", Priority::Low)];
        let alert = summary_alert(&summary(HoldReason::QuietHours, &one), &one).expect("alert");
        assert_eq!(alert.title, "1 event while quiet: 1 in #a");
        assert!(summary_alert(&summary(HoldReason::Burst, &[]), &[]).is_none());
    }
}

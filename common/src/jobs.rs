//! The messages ingest sends the notifier. Versioned and tagged
//! (`"type": "notify.v1"`), so producer and consumer can be upgraded apart:
//! a consumer rejects a type it does not know instead of misreading it
//! ([`JobDecodeError`], which keeps serde's error as its source).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::store::{Event, Priority, Scope};

/// A unit of work on the job queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Job {
    /// Push an event to the devices of its project.
    #[serde(rename = "notify.v1")]
    NotifyV1(NotifyJob),
    /// Send the summary of what a device's rules held back (the relay
    /// publishes it once the window has ended).
    #[serde(rename = "summary.v1")]
    SummaryV1(SummaryJob),
}

/// Send one summary (or digest) to its device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryJob {
    pub summary_id: Uuid,
    pub scope: Scope,
    pub device_id: Uuid,
    /// When its window ends: a job that arrives before (published early,
    /// by hand or by a clock ahead) waits for it instead of cutting the
    /// window short.
    pub due_at: chrono::DateTime<chrono::Utc>,
    /// 0 for the first try; each retry of a failed push adds one.
    #[serde(default)]
    pub attempt: u32,
}

/// Push one event to its project's active devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotifyJob {
    pub event_id: Uuid,
    pub scope: Scope,
    /// The id of the HTTP request that recorded the event, so the
    /// notifier's log lines can be traced back to it.
    pub request_id: Option<String>,
    /// 0 for the first try; each retry of failed deliveries adds one.
    #[serde(default)]
    pub attempt: u32,
    /// On a retry, only these devices still need the push; `None` means
    /// every active device of the project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<Uuid>>,
    /// Times processing this job failed with an error of ours (the store or
    /// the queue), as opposed to a push failing. Bounds a poison job.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// The event's priority. A field added to `notify.v1`, not a new
    /// version: jobs published before it decode as `normal`, and a consumer
    /// that predates it ignores it (unknown fields are allowed).
    #[serde(default)]
    pub priority: Priority,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Job {
    pub fn notify(event_id: Uuid, scope: Scope, request_id: Option<String>) -> Self {
        Self::NotifyV1(NotifyJob {
            event_id,
            scope,
            request_id,
            attempt: 0,
            devices: None,
            failures: 0,
            priority: Priority::Normal,
        })
    }

    /// The first job of a stored event: its id, scope, request and priority.
    pub fn for_event(event: &Event) -> Self {
        let mut job = Self::notify(event.id, event.scope.clone(), event.request_id.clone());
        if let Self::NotifyV1(notify) = &mut job {
            notify.priority = event.priority;
        }
        job
    }

    /// Its type, as tagged.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotifyV1(_) => "notify.v1",
            Self::SummaryV1(_) => "summary.v1",
        }
    }

    /// What the job is about: the event, or the summary.
    pub fn subject(&self) -> Uuid {
        match self {
            Self::NotifyV1(notify) => notify.event_id,
            Self::SummaryV1(summary) => summary.summary_id,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("jobs always serialise")
    }

    /// Reads a job from a queue message's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, JobDecodeError> {
        serde_json::from_slice(bytes).map_err(JobDecodeError)
    }
}

/// Why a message's bytes are not a job this consumer understands: not JSON,
/// a type it does not know (a newer producer's), or a field it cannot read.
/// serde's error, with the line and column, is the source.
#[derive(Debug, thiserror::Error)]
#[error("not a job this consumer understands")]
pub struct JobDecodeError(#[source] pub serde_json::Error);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_tagged_with_their_version() {
        let job = Job::notify(Uuid::nil(), Scope::new("o", "p"), Some("r".into()));
        let json: serde_json::Value = serde_json::from_slice(&job.to_bytes()).expect("JSON");
        assert_eq!(json["type"], "notify.v1");
        assert_eq!(json["eventId"], Uuid::nil().to_string());
        assert_eq!(Job::from_bytes(&job.to_bytes()).expect("parses"), job);
    }

    #[test]
    fn the_priority_travels_and_jobs_from_before_it_decode_as_normal() {
        let mut job = Job::notify(Uuid::nil(), Scope::new("o", "p"), None);
        let Job::NotifyV1(notify) = &mut job else {
            unreachable!("a notify job")
        };
        notify.priority = Priority::High;
        let json: serde_json::Value = serde_json::from_slice(&job.to_bytes()).expect("JSON");
        assert_eq!(json["priority"], "high");
        assert_eq!(Job::from_bytes(&job.to_bytes()).expect("parses"), job);

        let old = format!(
            r#"{{"type":"notify.v1","eventId":"{}","scope":{{"org":"o","project":"p"}},"requestId":null,"attempt":2}}"#,
            Uuid::nil()
        );
        let Ok(Job::NotifyV1(old)) = Job::from_bytes(old.as_bytes()) else {
            panic!("an old job decodes")
        };
        assert_eq!(old.priority, Priority::Normal);
        assert_eq!(old.attempt, 2);

        let unknown = format!(
            r#"{{"type":"notify.v1","eventId":"{}","scope":{{"org":"o","project":"p"}},"priority":"urgent"}}"#,
            Uuid::nil()
        );
        assert!(Job::from_bytes(unknown.as_bytes()).is_err(), "{unknown}");
    }

    #[test]
    fn unknown_job_types_are_refused() {
        let err = Job::from_bytes(br#"{"type":"notify.v9","eventId":"x"}"#);
        assert!(err.is_err());
    }

    /// The decoding error keeps serde's, which says what and where.
    #[test]
    fn a_decoding_error_keeps_serdes_error_as_its_source() {
        let err = Job::from_bytes(b"{not json").expect_err("not a job");
        let source = std::error::Error::source(&err).expect("a source");
        let serde = source
            .downcast_ref::<serde_json::Error>()
            .expect("serde's error");
        assert!(serde.is_syntax(), "{serde}");
        assert_eq!(serde.line(), 1);
    }
}

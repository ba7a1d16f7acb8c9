//! The messages ingest sends the notifier. Versioned and tagged
//! (`"type": "notify.v1"`), so producer and consumer can be upgraded apart:
//! a consumer rejects a type it does not know instead of misreading it.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::store::Scope;

/// A unit of work on the job queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Job {
    /// Push an event to the devices of its project.
    #[serde(rename = "notify.v1")]
    NotifyV1(NotifyJob),
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
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("jobs always serialise")
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

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
    fn unknown_job_types_are_refused() {
        let err = Job::from_bytes(br#"{"type":"notify.v9","eventId":"x"}"#);
        assert!(err.is_err());
    }
}

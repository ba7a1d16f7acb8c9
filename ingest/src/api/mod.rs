//! The HTTP API: one module per resource, each owning its request and
//! response types, plus the success envelope they all answer with.

pub mod channels;
pub(crate) mod cursor;
mod device_in;
pub mod device_rules;
pub mod devices;
pub mod events;
pub mod health;
pub mod identify;
pub mod insights;
pub mod listing;
pub mod notification;
pub mod parser;
pub mod priority;
pub mod rendered;
pub mod stats;
pub mod stream;
pub mod users;

use poem_openapi::{
    Object, Tags,
    types::{ParseFromJSON, ToJSON},
};

use crate::request_id::RequestId;

#[derive(Tags)]
pub enum ApiTags {
    /// Product moments recorded on channels.
    Events,
    /// The caller's users, their properties and aliases.
    Identities,
    /// Named live values shown as tiles above the feed (revenue today,
    /// active trials, build status).
    Insights,
    /// The phones alerts are pushed to.
    Devices,
    /// Liveness and readiness probes.
    Health,
    /// The admin API (`/admin/v1`), what the dashboard uses: organizations,
    /// projects, their API keys and devices, and the audit log. It takes an
    /// admin token (`ingest admin create`), never an API key.
    Admin,
}

/// The body of every successful response.
#[derive(Debug, Clone, Object, serde::Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct Success<T: ParseFromJSON + ToJSON> {
    /// Always true.
    pub success: bool,
    /// The resource.
    pub data: T,
    /// Id of this request (a UUID), also sent as `X-Request-Id`.
    pub request_id: String,
}

impl<T: ParseFromJSON + ToJSON> Success<T> {
    pub fn new(data: T, request_id: RequestId) -> Self {
        Self {
            success: true,
            data,
            request_id: request_id.to_string(),
        }
    }
}

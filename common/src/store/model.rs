//! The records the store keeps, independent of how each backend lays them out.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

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

/// An API key as stored: never the secret itself, only its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: Uuid,
    pub name: Option<String>,
    pub scope: Scope,
    /// Hex SHA-256 of the secret.
    pub hash: String,
    /// The first characters of the secret, so an operator can tell keys apart.
    pub prefix: String,
    /// Requests per minute; `None` means the service default.
    pub rate_limit: Option<u32>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl ApiKey {
    pub fn is_active(&self) -> bool {
        self.revoked_at.is_none()
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
    pub created_at: DateTime<Utc>,
}

/// A user of the caller's product, as merged from every identify call.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub user_id: String,
    pub properties: Map<String, Value>,
    /// A set, kept in first-seen order.
    pub aliases: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The response kept for an idempotency key, replayed on retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// The outcome of claiming an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyBegin {
    /// The caller owns the key now and must complete or release it.
    Started,
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
pub fn merge_identity_fields(
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

//! Operators: admin tokens as stored, and the audit log of what was done
//! with them (and with the CLI).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

/// An operator's admin token as stored: never the token, only its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admin {
    pub id: Uuid,
    pub name: String,
    /// Hex SHA-256 of the token.
    pub hash: String,
    /// The first characters of the token, to tell tokens apart.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl Admin {
    pub fn is_active(&self) -> bool {
        self.revoked_at.is_none()
    }
}

/// Who did something: an admin (by token) or someone at the server's shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// `admin` or `cli`.
    pub kind: String,
    /// The admin's id; none for the CLI.
    pub id: Option<Uuid>,
    pub name: String,
}

/// What an action was done to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditTarget {
    /// `organization`, `project`, `key`, `device` or `admin`.
    pub kind: String,
    pub id: Uuid,
    pub name: Option<String>,
}

/// One entry of the audit log. Never holds a secret.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// Time-ordered (UUIDv7): the log is listed newest first by id.
    pub id: Uuid,
    pub at: DateTime<Utc>,
    pub actor: Actor,
    /// Such as `key.create`, `project.rename`.
    pub action: String,
    pub target: AuditTarget,
    /// What else is worth knowing (`{"from": …, "to": …}`, the scopes).
    pub details: Map<String, Value>,
    /// The client's address; none for the CLI.
    pub address: Option<String>,
}

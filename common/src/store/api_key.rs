//! API keys as stored, and the scopes that say what each may do.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Scope;

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
    /// What the key may do, in `KeyScope::ALL` order without duplicates
    /// (see `KeyScope::canonical`).
    pub scopes: Vec<KeyScope>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// After a rotation: the hash of the secret it replaced, which keeps
    /// working until `previous_expires_at`.
    pub previous_hash: Option<String>,
    pub previous_expires_at: Option<DateTime<Utc>>,
    /// When it was last used, as last written (at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
}

impl ApiKey {
    pub fn is_active(&self) -> bool {
        self.revoked_at.is_none()
    }

    /// Whether a secret with this hash is (still) this key's at `now`: the
    /// current one, or the one it replaced while its grace lasts.
    pub fn accepts(&self, hash: &str, now: DateTime<Utc>) -> bool {
        self.hash == hash
            || (self.previous_hash.as_deref() == Some(hash)
                && self.previous_expires_at.is_some_and(|until| now < until))
    }

    /// When the secret a rotation replaced stops working, while it works.
    pub fn previous_secret_expires(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.previous_expires_at.filter(|until| now < *until)
    }

    /// Whether the key has `scope`.
    pub fn allows(&self, scope: KeyScope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// One thing an API key may be allowed to do. A key that only registers its
/// device (a phone, a browser) carries `devices:write` alone and cannot read
/// the project's events or its other devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyScope {
    /// Record events and identify users.
    EventsWrite,
    /// Read events, channels, users, the stream and the statistics.
    EventsRead,
    /// Register and delete devices.
    DevicesWrite,
    /// List devices.
    DevicesRead,
}

impl KeyScope {
    /// Every scope, in the canonical order. A new key gets them all unless
    /// told otherwise, and so do keys stored before scopes existed: they had
    /// full access.
    pub const ALL: [Self; 4] = [
        Self::EventsWrite,
        Self::EventsRead,
        Self::DevicesWrite,
        Self::DevicesRead,
    ];

    /// The name clients and operators see.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EventsWrite => "events:write",
            Self::EventsRead => "events:read",
            Self::DevicesWrite => "devices:write",
            Self::DevicesRead => "devices:read",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == s)
    }

    /// `scopes` in the canonical order, each once.
    pub fn canonical(scopes: impl IntoIterator<Item = Self>) -> Vec<Self> {
        let given: Vec<Self> = scopes.into_iter().collect();
        Self::ALL
            .into_iter()
            .filter(|scope| given.contains(scope))
            .collect()
    }

    /// The scopes a stored list of names grants. A name this version does
    /// not know (written by a newer one) grants nothing here: an unknown
    /// permission is never assumed.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<Self> {
        Self::canonical(names.into_iter().filter_map(Self::parse))
    }

    /// The names of `scopes`, as stored and shown.
    pub fn names(scopes: &[Self]) -> Vec<&'static str> {
        scopes.iter().map(|scope| scope.as_str()).collect()
    }
}

impl std::fmt::Display for KeyScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

//! Bearer API key authentication: `Authorization: Bearer <key>` → the key's
//! organization and project, and what it may do. Keys are looked up by the
//! hash of the secret.

use common::{
    keys::{hash_secret, looks_like_secret},
    store::{KeyScope, Scope, Store, StoreError},
};
use poem::http::{HeaderMap, header};
use uuid::Uuid;

/// Who is calling: the key and the organization and project it belongs to.
#[derive(Debug, Clone)]
pub struct AuthContext {
    pub key_id: Uuid,
    pub scope: Scope,
    /// The key's own requests-per-minute quota, if it has one.
    pub rate_limit: Option<u32>,
    /// What the key may do; the gate checks it against the route.
    pub scopes: Vec<KeyScope>,
}

impl AuthContext {
    pub fn allows(&self, scope: KeyScope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// Why a request is not authenticated.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("missing API key: send Authorization: Bearer <key>")]
    Missing,
    #[error("malformed Authorization header: expected Bearer <key>")]
    Malformed,
    #[error("invalid API key")]
    Unknown,
    #[error("API key has been revoked")]
    Revoked,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AuthError {
    /// The client-facing message for rejections (not for store failures).
    pub fn message(&self) -> &'static str {
        match self {
            Self::Missing => "missing API key: send Authorization: Bearer <key>",
            Self::Malformed => "malformed Authorization header: expected Bearer <key>",
            Self::Unknown => "invalid API key",
            Self::Revoked => "API key has been revoked",
            Self::Store(_) => "authentication unavailable",
        }
    }
}

/// Authenticates a request from its headers.
pub async fn authenticate(
    store: &dyn Store,
    headers: &HeaderMap,
) -> Result<AuthContext, AuthError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(AuthError::Missing)?;
    let value = value.to_str().map_err(|_| AuthError::Malformed)?.trim();
    let (scheme, secret) = value.split_once(' ').ok_or(AuthError::Malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::Malformed);
    }
    let secret = secret.trim();
    if secret.is_empty() {
        return Err(AuthError::Malformed);
    }
    // A string that cannot be one of our keys needs no database round trip.
    if !looks_like_secret(secret) {
        return Err(AuthError::Unknown);
    }
    let key = store
        .find_api_key_by_hash(&hash_secret(secret))
        .await?
        .ok_or(AuthError::Unknown)?;
    if !key.is_active() {
        return Err(AuthError::Revoked);
    }
    Ok(AuthContext {
        key_id: key.id,
        scope: key.scope,
        rate_limit: key.rate_limit,
        scopes: key.scopes,
    })
}

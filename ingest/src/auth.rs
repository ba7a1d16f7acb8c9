//! Bearer authentication: `Authorization: Bearer <secret>` → an API key's
//! organization and project and what it may do (for `/v1`), or the admin
//! whose token it is (for `/admin/v1`). Secrets are looked up by their
//! hash; a secret of the other kind is refused by its shape, before any
//! lookup, with a message naming the credential the route takes. API keys
//! are read through the [`KeyCache`].

use common::{
    keys::{SecretKind, hash_secret},
    store::{Admin, KeyScope, Scope, Store, StoreError},
};
use poem::http::{HeaderMap, header};
use uuid::Uuid;

use crate::key_cache::KeyCache;

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
    /// Refused, with the message the client gets.
    #[error("{0}")]
    Rejected(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AuthError {
    /// The client-facing message for rejections (not for store failures).
    pub fn message(&self) -> &'static str {
        match self {
            Self::Rejected(message) => message,
            Self::Store(_) => "authentication unavailable",
        }
    }
}

/// What to tell a client whose credential for a route taking `kind` is
/// missing, malformed, unknown, revoked or of the other kind.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Missing,
    Malformed,
    Unknown,
    Revoked,
    OtherKind,
}

fn rejected(kind: SecretKind, fault: Fault) -> AuthError {
    use {Fault::*, SecretKind::*};
    AuthError::Rejected(match (kind, fault) {
        (ApiKey, Missing) => "missing API key: send Authorization: Bearer <key>",
        (ApiKey, Malformed) => "malformed Authorization header: expected Bearer <key>",
        (ApiKey, Unknown) => "invalid API key",
        (ApiKey, Revoked) => "API key has been revoked",
        (ApiKey, OtherKind) => "this is an admin token; the API takes an API key",
        (AdminToken, Missing) => "missing admin token: send Authorization: Bearer <admin token>",
        (AdminToken, Malformed) => "malformed Authorization header: expected Bearer <admin token>",
        (AdminToken, Unknown) => "invalid admin token",
        (AdminToken, Revoked) => "admin token has been revoked",
        (AdminToken, OtherKind) => "this is an API key; the admin API takes an admin token",
    })
}

/// The bearer secret of a request to a route taking `kind`, if it has that
/// kind's shape.
fn presented(headers: &HeaderMap, kind: SecretKind) -> Result<&str, AuthError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(rejected(kind, Fault::Missing))?;
    let malformed = || rejected(kind, Fault::Malformed);
    let value = value.to_str().map_err(|_| malformed())?.trim();
    let (scheme, secret) = value.split_once(' ').ok_or_else(malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed());
    }
    let secret = secret.trim();
    if secret.is_empty() {
        return Err(malformed());
    }
    // A string that cannot be one of ours needs no database round trip.
    match SecretKind::of(secret) {
        Some(shape) if shape == kind => Ok(secret),
        Some(_) => Err(rejected(kind, Fault::OtherKind)),
        None => Err(rejected(kind, Fault::Unknown)),
    }
}

/// Authenticates a request to the API from its headers.
pub async fn authenticate(
    keys: &KeyCache,
    store: &dyn Store,
    headers: &HeaderMap,
) -> Result<AuthContext, AuthError> {
    let kind = SecretKind::ApiKey;
    let hash = hash_secret(presented(headers, kind)?);
    let key = keys
        .find(store, &hash)
        .await?
        // The secret a rotation replaced works only while its grace lasts.
        .filter(|key| key.accepts(&hash, common::time::now()))
        .ok_or(rejected(kind, Fault::Unknown))?;
    if !key.is_active() {
        return Err(rejected(kind, Fault::Revoked));
    }
    Ok(AuthContext {
        key_id: key.id,
        scope: key.scope.clone(),
        rate_limit: key.rate_limit,
        scopes: key.scopes.clone(),
    })
}

/// Authenticates a request to the admin API from its headers.
pub async fn authenticate_admin(
    store: &dyn Store,
    headers: &HeaderMap,
) -> Result<Admin, AuthError> {
    let kind = SecretKind::AdminToken;
    let hash = hash_secret(presented(headers, kind)?);
    let admin = store
        .find_admin_by_hash(&hash)
        .await?
        .ok_or(rejected(kind, Fault::Unknown))?;
    if !admin.is_active() {
        return Err(rejected(kind, Fault::Revoked));
    }
    Ok(admin)
}

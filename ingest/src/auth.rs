//! Authentication: who is calling. The [`authentication`] layer asks each
//! route for the credential it takes ([`routes::access`]): an API key for
//! `/v1` (its organization, project and scopes become the request's
//! [`AuthContext`]), an admin token for `/admin/v1` (the admin becomes its
//! [`AdminContext`]), nothing elsewhere.
//!
//! `Authorization: Bearer <secret>` is looked up by the secret's hash; a
//! secret of the other kind is refused by its shape, before any lookup,
//! with a message naming the credential the route takes. API keys are read
//! through the [`KeyCache`]. Every refusal of a credential counts against
//! the client address's failed-authentication quota, and an address that
//! has used it up is refused before its secret is even looked at, so
//! guessing gets no answer. A request with no credential at all guesses
//! nothing: it always gets 401, counted as an anonymous request. What an
//! authenticated caller may do is the rate limit's and the scope check's,
//! inside this layer.

use std::sync::Arc;

use common::{
    keys::{SecretKind, hash_secret},
    store::{Admin, KeyScope, Scope, Store, StoreError},
};
use poem::{
    Endpoint, Request, Response,
    http::{HeaderMap, header},
};
use uuid::Uuid;

use crate::{
    admin::AdminContext,
    error::{ApiError, call_rendered},
    key_cache::KeyCache,
    rate_limit::{Credential, Decision, client_addr, refused},
    request_id::RequestId,
    routes::{self, Access},
    state::AppState,
};

/// Who is calling: the key and the organization and project it belongs to.
#[derive(Debug, Clone)]
pub struct AuthContext {
    pub key_id: Uuid,
    pub scope: Scope,
    /// The key's own requests-per-minute quota, if it has one.
    pub rate_limit: Option<u32>,
    /// What the key may do; the scope layer checks it against the route.
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
pub(crate) fn presented(headers: &HeaderMap, kind: SecretKind) -> Result<&str, AuthError> {
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

/// The layer: `EndpointExt::around` with the app state. Puts the caller in
/// the request, or answers 401 (429 once the address's failed attempts are
/// used up; 503 when the store cannot say).
pub async fn authentication<E: Endpoint>(
    ep: Arc<E>,
    mut req: Request,
    state: Arc<AppState>,
) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    let credential = match routes::access(req.uri().path()) {
        Access::Anonymous => {
            return Ok(call_rendered(&*ep, req, request_id).await);
        }
        Access::ApiKey => Credential::ApiKey,
        Access::Admin => Credential::AdminToken,
    };
    let addr = client_addr(&req, state.config.trust_forwarded_for);
    let limits = &state.rate_limits;
    if !req.headers().contains_key(header::AUTHORIZATION) {
        return Ok(uncredentialed(&state, credential, addr, request_id));
    }
    if let Some(Decision::Limited {
        info,
        retry_after_secs,
    }) = limits.locked_out(credential, addr)
    {
        state.metrics.rate_limited("auth_failures");
        return Ok(refused(info, retry_after_secs, request_id));
    }
    let authenticated = match credential {
        Credential::AdminToken => authenticate_admin(state.store.as_ref(), req.headers())
            .await
            .map(|admin| {
                req.extensions_mut().insert(AdminContext {
                    admin,
                    address: addr,
                });
            }),
        Credential::ApiKey => authenticate(&state.keys, state.store.as_ref(), req.headers())
            .await
            .map(|auth| {
                state.last_used.record(auth.key_id, common::time::now());
                req.extensions_mut().insert(auth);
            }),
    };
    match authenticated {
        Ok(()) => Ok(call_rendered(&*ep, req, request_id).await),
        Err(AuthError::Store(e)) => {
            // No caller is known: the answer counts as the address's.
            let mut response = ApiError::from(e).render(request_id);
            limits.check_anonymous(addr).info().apply(&mut response);
            Ok(response)
        }
        Err(rejection) => {
            let decision = limits.check_auth_failure(credential, addr);
            tracing::info!(%addr, reason = rejection.message(), "authentication failed");
            let mut response = match decision {
                Decision::Allowed(_) => {
                    ApiError::Unauthorized(rejection.message()).render(request_id)
                }
                Decision::Limited {
                    retry_after_secs, ..
                } => {
                    state.metrics.rate_limited("auth_failures");
                    ApiError::RateLimited { retry_after_secs }.render(request_id)
                }
            };
            decision.info().apply(&mut response);
            Ok(response)
        }
    }
}

/// The answer to a request that offers no credential: always 401, since it
/// guesses nothing, so it neither counts toward its address's lockout nor is
/// refused by one. It is an anonymous request, counted against the address's
/// quota for routes without a key like any other (which a flood of them uses
/// up, as it would on `/healthz`), and that quota is the one its headers
/// report.
fn uncredentialed(
    state: &AppState,
    credential: Credential,
    addr: std::net::IpAddr,
    request_id: RequestId,
) -> Response {
    match state.rate_limits.check_anonymous(addr) {
        Decision::Limited {
            info,
            retry_after_secs,
        } => {
            state.metrics.rate_limited("anonymous");
            refused(info, retry_after_secs, request_id)
        }
        Decision::Allowed(info) => {
            let kind = match credential {
                Credential::ApiKey => SecretKind::ApiKey,
                Credential::AdminToken => SecretKind::AdminToken,
            };
            let mut response =
                ApiError::Unauthorized(rejected(kind, Fault::Missing).message()).render(request_id);
            info.apply(&mut response);
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        num::NonZeroU32,
        sync::atomic::{AtomicUsize, Ordering},
    };

    use common::store::Scope;
    use poem::http::StatusCode;

    use super::*;

    /// The layer alone, on an API state with one key (whose secret it
    /// holds), around an endpoint that answers with the project it was
    /// told is calling and counts its calls.
    struct Layer {
        state: Arc<AppState>,
        secret: String,
        calls: Arc<AtomicUsize>,
        _dir: tempfile::TempDir,
    }

    impl Layer {
        async fn new(failures_per_minute: u32) -> Self {
            let mut config = crate::Config::defaults();
            config.auth_failures_per_minute =
                NonZeroU32::new(failures_per_minute).expect("not zero");
            let (state, dir) = AppState::for_tests(config).await;
            let secret = crate::cli::create_key(
                state.store.as_ref(),
                Scope::new("acme", "shop"),
                None,
                None,
            )
            .await
            .expect("a key");
            Self {
                state,
                secret,
                calls: Arc::default(),
                _dir: dir,
            }
        }

        async fn call(&self, path: &str, authorization: Option<&str>) -> (StatusCode, String) {
            let calls = Arc::clone(&self.calls);
            let inner = poem::endpoint::make(move |req: Request| {
                calls.fetch_add(1, Ordering::SeqCst);
                let caller = req
                    .extensions()
                    .get::<AuthContext>()
                    .map_or("nobody".to_owned(), |auth| auth.scope.project.clone());
                async move { caller }
            });
            let mut req = Request::builder().uri_str(path);
            if let Some(value) = authorization {
                req = req.header(header::AUTHORIZATION, value);
            }
            let response = authentication(Arc::new(inner), req.finish(), Arc::clone(&self.state))
                .await
                .expect("a response");
            let status = response.status();
            let body = response.into_body().into_string().await.expect("a body");
            (status, body)
        }
    }

    #[tokio::test]
    async fn the_layer_puts_the_keys_project_in_the_request() {
        let layer = Layer::new(5).await;
        let bearer = format!("Bearer {}", layer.secret);
        assert_eq!(
            layer.call("/v1/events", Some(&bearer)).await,
            (StatusCode::OK, "shop".to_owned())
        );
        // A route that takes no credential is passed on as it is.
        assert_eq!(
            layer.call("/healthz", None).await,
            (StatusCode::OK, "nobody".to_owned())
        );
    }

    #[tokio::test]
    async fn the_layer_refuses_a_bad_key_and_then_the_address() {
        let layer = Layer::new(2).await;
        let wrong = format!("Bearer {}", common::keys::generate_secret());
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(layer.call("/v1/events", Some(&wrong)).await.0);
        }
        assert_eq!(
            statuses,
            [
                StatusCode::UNAUTHORIZED,
                StatusCode::UNAUTHORIZED,
                StatusCode::TOO_MANY_REQUESTS
            ]
        );
        // Its quota of failures used up, the address is refused even with
        // the right key, before any lookup.
        let right = format!("Bearer {}", layer.secret);
        assert_eq!(
            layer.call("/v1/events", Some(&right)).await.0,
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(layer.calls.load(Ordering::SeqCst), 0);
    }

    /// ST203: offering no credential guesses nothing. It is answered 401
    /// even from a locked-out address, and any number of such requests
    /// leave the address's failure quota as it was.
    #[tokio::test]
    async fn a_request_without_a_credential_is_always_401_and_never_locks_out() {
        let layer = Layer::new(2).await;
        for _ in 0..5 {
            let (status, body) = layer.call("/v1/events", None).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
            assert!(body.contains("missing API key"), "{body}");
        }
        // The failure quota is untouched: the right key still gets in.
        let right = format!("Bearer {}", layer.secret);
        assert_eq!(
            layer.call("/v1/events", Some(&right)).await.0,
            StatusCode::OK
        );
        // Used up by wrong keys, the lockout refuses credentials, not their
        // absence.
        let wrong = format!("Bearer {}", common::keys::generate_secret());
        for _ in 0..3 {
            layer.call("/v1/events", Some(&wrong)).await;
        }
        assert_eq!(
            layer.call("/v1/events", Some(&right)).await.0,
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            layer.call("/v1/events", None).await.0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            layer.call("/admin/v1/projects", None).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
}

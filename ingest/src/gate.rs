//! The gate every request passes: authentication for `/v1` (an API key) and
//! `/admin/v1` (an admin token), then the rate limit that applies (the
//! key's or admin's, the address's failed-authentication one for that kind
//! of credential, or the address's anonymous one), then the scope the route
//! needs. Whatever
//! the outcome, the response carries the `X-RateLimit-*` headers of the
//! limit that was applied.

use std::{net::IpAddr, sync::Arc};

use poem::{Endpoint, IntoResponse, Request, Response, web::RemoteAddr};

use crate::{
    admin::AdminContext,
    auth::{AuthError, authenticate, authenticate_admin},
    error::{ApiError, rendered},
    rate_limit::{Credential, Decision},
    request_id::RequestId,
    routes::{self, Access},
    state::AppState,
};

/// The client's address: the socket peer, or the first `X-Forwarded-For`
/// entry when the operator said a trusted proxy sets it.
fn client_addr(req: &Request, trust_forwarded_for: bool) -> IpAddr {
    let forwarded = trust_forwarded_for
        .then(|| req.headers().get("x-forwarded-for"))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .and_then(|first| first.trim().parse().ok());
    forwarded.unwrap_or_else(|| match req.remote_addr() {
        RemoteAddr(poem::Addr::SocketAddr(addr)) => addr.ip(),
        _ => IpAddr::from([0, 0, 0, 0]),
    })
}

/// The middleware: `EndpointExt::around` with the app state.
pub async fn gate<E: Endpoint>(
    ep: Arc<E>,
    mut req: Request,
    state: Arc<AppState>,
) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    let addr = client_addr(&req, state.config.trust_forwarded_for);
    let limits = &state.rate_limits;

    let access = routes::access(req.uri().path());
    let anonymous = access == Access::Anonymous;
    let credential = match access {
        Access::Admin => Credential::AdminToken,
        _ => Credential::ApiKey,
    };
    // A key without the route's scope is authenticated: its refusal counts
    // against the key's quota like any request, never as a failed
    // authentication of the address.
    let mut missing_scope = None;
    let decision = if anonymous {
        limits.check_anonymous(addr)
    } else if let Some(Decision::Limited {
        info,
        retry_after_secs,
    }) = limits.locked_out(credential, addr)
    {
        // This address has used up its failed-authentication quota: refuse
        // before even looking the secret up, so guessing gets no answer.
        state.metrics.rate_limited("auth_failures");
        return Ok(limited(info, retry_after_secs, request_id));
    } else {
        let authenticated = if access == Access::Admin {
            authenticate_admin(state.store.as_ref(), req.headers())
                .await
                .map(|admin| {
                    let decision = limits.check_key(admin.id, None);
                    req.extensions_mut().insert(AdminContext {
                        admin,
                        address: addr,
                    });
                    decision
                })
        } else {
            authenticate(&state.keys, state.store.as_ref(), req.headers())
                .await
                .map(|auth| {
                    let decision = limits.check_key(auth.key_id, auth.rate_limit);
                    state.last_used.record(auth.key_id, common::time::now());
                    missing_scope = routes::required_scope(req.method(), req.uri().path())
                        .filter(|scope| !auth.allows(*scope));
                    req.extensions_mut().insert(auth);
                    decision
                })
        };
        match authenticated {
            Ok(decision) => decision,
            Err(AuthError::Store(e)) => {
                let mut response = ApiError::from(e).render(request_id);
                limits.check_anonymous(addr).info().apply(&mut response);
                return Ok(response);
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
                return Ok(response);
            }
        }
    };

    let mut response = match (decision, missing_scope) {
        (Decision::Allowed(_), Some(scope)) => ApiError::MissingScope(scope).render(request_id),
        (Decision::Allowed(_), None) => rendered(
            ep.call(req).await.map(IntoResponse::into_response),
            request_id,
        ),
        (
            Decision::Limited {
                info,
                retry_after_secs,
            },
            _,
        ) => {
            state
                .metrics
                .rate_limited(if anonymous { "anonymous" } else { "key" });
            return Ok(limited(info, retry_after_secs, request_id));
        }
    };
    decision.info().apply(&mut response);
    Ok(response)
}

fn limited(
    info: crate::rate_limit::RateLimitInfo,
    retry_after_secs: u64,
    request_id: RequestId,
) -> Response {
    let mut response = ApiError::RateLimited { retry_after_secs }.render(request_id);
    info.apply(&mut response);
    response
}

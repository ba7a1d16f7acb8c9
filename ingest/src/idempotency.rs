//! Idempotency keys, after the IETF Idempotency-Key draft and Stripe.
//!
//! Scope is (organization, project, key). The first request with a key claims
//! it with a fingerprint of method, path and body; a retry of a completed
//! request replays its status and body with `X-Idempotent-Replay: true`; the
//! same key with a different request gets 422, and while the first is still
//! running 409. Validation failures (400) release the key: nothing was
//! written, so a corrected retry must be able to run. Server errors (5xx,
//! a store timeout among them) unlock it but keep it bound to the request:
//! the first try may have written before failing, so only the same request
//! may run again, and it reuses the id the first try reserved for what it
//! creates, finding that instead of writing it twice. 401 and 429 never
//! get this far. Claims expire after 24 hours.
//!
//! Data goes one way through this layer. In: a claimed request carries its
//! [`Claim`] (the key and the reserved id) for a handler whose write stores
//! its answer with what it creates. Out: such an answer comes back marked
//! [`OutcomeStored`], and this layer writes nothing more; any other answer
//! it settles itself (store, release or unlock the key).

use std::{sync::Arc, time::Duration};

use common::store::{IdempotencyBegin, StoredResponse};
use poem::{
    Body, Endpoint, Request, Response,
    http::{HeaderValue, Method, StatusCode, header},
};
use sha2::{Digest as _, Sha256};
use tracing::Instrument as _;

use crate::{
    auth::AuthContext,
    error::{ApiError, call_rendered},
    request_id::RequestId,
    routes,
    state::AppState,
};

pub const HEADER: &str = "idempotency-key";
pub const REPLAY_HEADER: &str = "x-idempotent-replay";
/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 255;
/// How long a key is remembered.
pub const TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// An in-flight claim older than this is presumed abandoned by a crashed
/// process and may be taken over. Far longer than any request can run.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(60);

/// The claim of a request under an Idempotency-Key, given to its handler
/// (a request extension) for a handler whose write must store its outcome
/// with what it creates ([`crate::record::Recorder`]): the key, and the id
/// reserved for what the request creates, the same on every try.
#[derive(Debug, Clone)]
pub struct Claim {
    key: String,
    resource: uuid::Uuid,
}

impl Claim {
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The id reserved for what the request creates.
    pub fn resource(&self) -> uuid::Uuid {
        self.resource
    }
}

/// Marks a response whose body is already stored as the outcome of its
/// request's claim (a response extension): this layer then writes nothing.
#[derive(Debug, Clone, Copy)]
pub struct OutcomeStored;

fn content_type(headers: &poem::http::HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned()
}

/// What becomes of a claimed key once the request has its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// The final word: keep it to replay.
    Complete,
    /// Nothing was written: forget the key.
    Release,
    /// The outcome is unknown: unlock the key for the same request only.
    Abandon,
}

fn settle_for(status: StatusCode) -> Settle {
    if status.is_server_error() {
        Settle::Abandon
    } else if status == StatusCode::BAD_REQUEST {
        Settle::Release
    } else {
        Settle::Complete
    }
}

/// The key of a request, if it sent one: 1 to 255 visible ASCII characters.
pub(crate) fn key_of(req: &Request) -> Result<Option<String>, ApiError> {
    let Some(value) = req.headers().get(HEADER) else {
        return Ok(None);
    };
    let bad = |message: String| ApiError::BadHeader {
        header: "Idempotency-Key",
        message,
    };
    let key = value
        .to_str()
        .map_err(|_| bad("must be visible ASCII characters".into()))?;
    if key.is_empty() {
        return Err(bad("must not be empty".into()));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(bad(format!(
            "must be at most {MAX_KEY_LEN} characters long"
        )));
    }
    if !key.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(bad("must be visible ASCII characters".into()));
    }
    Ok(Some(key.to_owned()))
}

fn fingerprint(method: &Method, path: &str, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(method.as_str());
    hash.update(b"\n");
    hash.update(path);
    hash.update(b"\n");
    hash.update(body);
    hex::encode(hash.finalize())
}

/// The middleware: `EndpointExt::around` with the app state. Runs inside
/// authentication (so the caller is known) and after the body limit.
pub async fn idempotency<E: Endpoint + 'static>(
    ep: Arc<E>,
    mut req: Request,
    state: Arc<AppState>,
) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    if !routes::is_idempotent(req.method(), req.uri().path()) {
        return Ok(call_rendered(&*ep, req, request_id).await);
    }
    let key = match key_of(&req) {
        Ok(Some(key)) => key,
        Ok(None) => {
            return Ok(call_rendered(&*ep, req, request_id).await);
        }
        Err(e) => return Ok(e.render(request_id)),
    };
    let Some(scope) = req
        .extensions()
        .get::<AuthContext>()
        .map(|a| a.scope.clone())
    else {
        return Ok(call_rendered(&*ep, req, request_id).await);
    };
    // The body limit has already buffered the body, so this is a cheap copy.
    let body = req.take_body().into_bytes().await?;
    let print = fingerprint(req.method(), req.uri().path(), &body);
    req.set_body(Body::from_bytes(body));

    let store = Arc::clone(&state.store);
    let begun = store
        .begin_idempotent(
            &scope,
            &key,
            &print,
            uuid::Uuid::now_v7(),
            common::time::now(),
            TTL,
            LOCK_TIMEOUT,
        )
        .await;
    match begun {
        Err(e) => {
            // The claim may still be written after the deadline; unlock it
            // (in order, behind it) so the retry is not told 409 until the
            // lock times out.
            if let Err(unlock) = store.abandon_idempotent(&scope, &key).await {
                tracing::debug!(error = %unlock, "could not unlock the idempotency key");
            }
            Ok(ApiError::from(e).render(request_id))
        }
        Ok(IdempotencyBegin::Mismatch) => Ok(ApiError::IdempotencyMismatch.render(request_id)),
        Ok(IdempotencyBegin::InFlight) => Ok(ApiError::IdempotencyInFlight.render(request_id)),
        Ok(IdempotencyBegin::Replay(stored)) => {
            state.metrics.idempotent_replays.inc();
            Ok(replay(stored))
        }
        Ok(IdempotencyBegin::Started { resource }) => {
            req.extensions_mut().insert(Claim {
                key: key.clone(),
                resource,
            });
            // Run the request to the end on its own task: if the client hangs
            // up mid-way, the outcome is still recorded, so its retry replays
            // it instead of doing the work twice.
            let work = tokio::spawn(
                async move {
                    let response = call_rendered(&*ep, req, request_id).await;
                    finish(store, scope, &key, response, request_id).await
                }
                // Its log lines still carry the request's id.
                .in_current_span(),
            );
            match work.await {
                Ok(response) => Ok(response),
                Err(e) => Ok(
                    ApiError::Internal(anyhow::anyhow!("request task failed: {e}"))
                        .render(request_id),
                ),
            }
        }
    }
}

/// Records or releases the claim according to the response, and returns it.
async fn finish(
    store: Arc<dyn common::store::Store>,
    scope: common::store::Scope,
    key: &str,
    response: Response,
    request_id: RequestId,
) -> Response {
    let unlocked = match settle_for(response.status()) {
        Settle::Complete => None,
        Settle::Release => Some(store.release_idempotent(&scope, key).await),
        Settle::Abandon => Some(store.abandon_idempotent(&scope, key).await),
    };
    if let Some(unlocked) = unlocked {
        if let Err(e) = unlocked {
            // The claim stays in flight until LOCK_TIMEOUT; retries get 409 until then.
            tracing::warn!(error = %e, "could not unlock idempotency key");
        }
        return response;
    }
    if response.extensions().get::<OutcomeStored>().is_some() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = match body.into_bytes().await {
        Ok(bytes) => bytes,
        Err(e) => {
            return ApiError::Internal(anyhow::anyhow!("response body unreadable: {e}"))
                .render(request_id);
        }
    };
    let stored = StoredResponse {
        status: parts.status.as_u16(),
        content_type: content_type(&parts.headers),
        body: bytes.to_vec(),
    };
    if let Err(e) = store.complete_idempotent(&scope, key, &stored).await {
        // The work is done and its answer goes to the client; only a later
        // replay is at risk, so this is logged rather than failed.
        tracing::error!(error = %e, "could not record idempotent response");
    }
    Response::from_parts(parts, Body::from_bytes(bytes))
}

/// The original response again, marked as a replay.
fn replay(stored: StoredResponse) -> Response {
    let mut response = Response::builder()
        .status(StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK))
        .body(stored.body);
    if let Ok(ct) = HeaderValue::from_str(&stored.content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response
        .headers_mut()
        .insert(REPLAY_HEADER, HeaderValue::from_static("true"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_differ_by_method_path_and_body() {
        let a = fingerprint(&Method::POST, "/v1/events", b"{}");
        assert_eq!(a, fingerprint(&Method::POST, "/v1/events", b"{}"));
        assert_ne!(a, fingerprint(&Method::POST, "/v1/identify", b"{}"));
        assert_ne!(a, fingerprint(&Method::POST, "/v1/events", b"{ }"));
        assert_ne!(a, fingerprint(&Method::PUT, "/v1/events", b"{}"));
    }

    #[test]
    fn validation_failures_release_the_key_and_server_errors_keep_it_bound() {
        assert_eq!(settle_for(StatusCode::CREATED), Settle::Complete);
        assert_eq!(settle_for(StatusCode::OK), Settle::Complete);
        assert_eq!(settle_for(StatusCode::NOT_FOUND), Settle::Complete);
        assert_eq!(settle_for(StatusCode::BAD_REQUEST), Settle::Release);
        assert_eq!(
            settle_for(StatusCode::INTERNAL_SERVER_ERROR),
            Settle::Abandon
        );
        assert_eq!(settle_for(StatusCode::SERVICE_UNAVAILABLE), Settle::Abandon);
    }
}

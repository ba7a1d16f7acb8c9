//! Gives every request a UUID, sends it back as `X-Request-Id`, puts it on
//! every log line of the request, and renders any error that reached the
//! outside as the envelope. The outermost layer.

use std::{fmt, sync::Arc, time::Instant};

use poem::{Endpoint, IntoResponse, Request, Response, http::HeaderValue};
use tracing::Instrument as _;
use uuid::Uuid;

use crate::error::rendered;

/// The id of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestId(pub Uuid);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl RequestId {
    /// The id of the request being handled (set by [`request_id`]).
    pub fn of(req: &Request) -> Self {
        req.extensions()
            .get::<RequestId>()
            .copied()
            .unwrap_or(RequestId(Uuid::nil()))
    }
}

pub const HEADER: &str = "x-request-id";

/// The middleware: `EndpointExt::around(request_id)`.
pub async fn request_id<E: Endpoint>(ep: Arc<E>, mut req: Request) -> poem::Result<Response> {
    let id = RequestId(Uuid::new_v4());
    req.extensions_mut().insert(id);
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %req.method(),
        path = %req.uri().path(),
    );
    let started = Instant::now();
    let result = ep
        .call(req)
        .instrument(span.clone())
        .await
        .map(IntoResponse::into_response);
    let mut response = span.in_scope(|| rendered(result, id));
    if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
        response.headers_mut().insert(HEADER, value);
    }
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            "request handled"
        );
    });
    Ok(response)
}

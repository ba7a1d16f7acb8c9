//! Gives every request a UUID, sends it back as `X-Request-Id`, puts it on
//! every log line of the request (as `requestId`, the field that follows the
//! request into its notify job and every push), renders any error that
//! reached the outside as the envelope, and records the request in the
//! metrics. The outermost layer.

use std::{fmt, sync::Arc, time::Instant};

use poem::{
    Endpoint, IntoResponse, Request, Response,
    http::{HeaderName, HeaderValue},
};
use tracing::Instrument as _;
use uuid::Uuid;

use crate::{error::rendered, metrics::RequestObserver};

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

pub const HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The middleware: `EndpointExt::around` with the observer that records
/// each request's route, status and latency in the metrics.
pub async fn request_id<E: Endpoint>(
    ep: Arc<E>,
    mut req: Request,
    observer: Arc<RequestObserver>,
) -> poem::Result<Response> {
    let id = RequestId(Uuid::new_v4());
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    req.extensions_mut().insert(id);
    let span = tracing::info_span!(
        "request",
        requestId = %id,
        method = %method,
        path = %path,
    );
    let started = Instant::now();
    let result = ep
        .call(req)
        .instrument(span.clone())
        .await
        .map(IntoResponse::into_response);
    let mut response = span.in_scope(|| rendered(result, id));
    let mut text = Uuid::encode_buffer();
    if let Ok(value) = HeaderValue::from_str(id.0.hyphenated().encode_lower(&mut text)) {
        response.headers_mut().insert(HEADER, value);
    }
    observer.observe(method.as_str(), &path, response.status(), started.elapsed());
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            "request handled"
        );
    });
    Ok(response)
}

//! Reads request bodies up to the configured size, so nothing later can be
//! made to buffer more; a larger body gets 413 before any work is done.

use std::sync::Arc;

use poem::{
    Body, Endpoint, Request, Response,
    error::ReadBodyError,
    http::{HeaderValue, header},
};

use crate::{
    error::{ApiError, call_rendered},
    request_id::RequestId,
};

/// The middleware: `EndpointExt::around` with the limit in bytes.
pub async fn limit_body<E: Endpoint>(
    ep: Arc<E>,
    mut req: Request,
    limit: usize,
) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Ok(too_large(limit, request_id));
    }
    match req.take_body().into_bytes_limit(limit).await {
        Ok(bytes) => req.set_body(Body::from_bytes(bytes)),
        Err(ReadBodyError::PayloadTooLarge) => {
            return Ok(too_large(limit, request_id));
        }
        Err(e) => {
            return Ok(
                ApiError::MalformedJson(format!("the request body could not be read: {e}"))
                    .render(request_id),
            );
        }
    }
    Ok(call_rendered(&*ep, req, request_id).await)
}

/// The 413. The rest of the body is never read, so the server closes the
/// connection after answering; `Connection: close` says so (RFC 9112 §9.6),
/// or a client would send its next request on a connection about to go.
fn too_large(limit: usize, request_id: RequestId) -> Response {
    let mut response = ApiError::PayloadTooLarge { limit }.render(request_id);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

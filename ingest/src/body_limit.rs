//! Reads request bodies up to the configured size, so nothing later can be
//! made to buffer more; a larger body gets 413 before any work is done.

use std::sync::Arc;

use poem::{Body, Endpoint, IntoResponse, Request, Response, error::ReadBodyError, http::header};

use crate::{
    error::{ApiError, rendered},
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
        return Ok(ApiError::PayloadTooLarge { limit }.render(request_id));
    }
    match req.take_body().into_bytes_limit(limit).await {
        Ok(bytes) => req.set_body(Body::from_bytes(bytes)),
        Err(ReadBodyError::PayloadTooLarge) => {
            return Ok(ApiError::PayloadTooLarge { limit }.render(request_id));
        }
        Err(e) => {
            return Ok(
                ApiError::MalformedJson(format!("the request body could not be read: {e}"))
                    .render(request_id),
            );
        }
    }
    Ok(rendered(
        ep.call(req).await.map(IntoResponse::into_response),
        request_id,
    ))
}

//! Refuses a request whose header fields are too many or too large with 431
//! and the error envelope, before any work is done for it.
//!
//! hyper refuses such requests too, but with an empty body and no request
//! id; the server gives hyper higher ceilings (see `Config::server`) so that
//! this layer answers everything up to them.

use std::sync::Arc;

use poem::{Endpoint, Request, Response};

use crate::{
    error::{ApiError, call_rendered},
    request_id::RequestId,
};

/// The configured limits on a request's header fields.
#[derive(Debug, Clone, Copy)]
pub struct HeaderLimits {
    pub max_headers: usize,
    pub max_bytes: usize,
}

/// Bytes a header field takes on the wire in HTTP/1.1: `name: value\r\n`.
fn field_bytes(name: &str, value: &[u8]) -> usize {
    name.len() + value.len() + 4
}

/// The middleware: `EndpointExt::around` with the limits.
pub async fn limit_headers<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    limits: HeaderLimits,
) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    let headers = req.headers();
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| field_bytes(name.as_str(), value.as_bytes()))
        .sum();
    if headers.len() > limits.max_headers || bytes > limits.max_bytes {
        return Ok(ApiError::HeadersTooLarge {
            max_headers: limits.max_headers,
            max_bytes: limits.max_bytes,
        }
        .render(request_id));
    }
    Ok(call_rendered(&*ep, req, request_id).await)
}

//! The one place where failures become HTTP responses: every error is the
//! spec's envelope with the request's id, internal causes are logged and
//! never shown.

use common::store::{KeyScope, StoreError};
use poem::{
    Response,
    http::{StatusCode, header},
};
use poem_openapi::{Object, types::ToJSON as _};

use crate::request_id::RequestId;

/// One fault in a request: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Object)]
pub struct FieldError {
    /// Location of the faulty field, one segment per level: `["tags", "1"]`.
    pub path: Vec<String>,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    pub fn new(path: Vec<String>, message: impl Into<String>) -> Self {
        Self {
            path,
            message: message.into(),
        }
    }
}

/// The body of every error response.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ErrorEnvelope {
    /// Always false.
    pub success: bool,
    /// What went wrong, for a person.
    pub error: String,
    /// Every fault found, for validation errors (400).
    #[oai(skip_serializing_if_is_none)]
    pub details: Option<Vec<FieldError>>,
    /// Id of this request (a UUID), also sent as `X-Request-Id`.
    pub request_id: String,
}

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error("request body is not valid JSON")]
    MalformedJson(String),
    #[error("invalid {header} header")]
    BadHeader {
        header: &'static str,
        message: String,
    },
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("this API key lacks the {0} scope")]
    MissingScope(KeyScope),
    #[error("{0}")]
    NotFound(String),
    #[error("cross-origin requests from this origin are not allowed")]
    OriginNotAllowed,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("a request with this Idempotency-Key is still in progress; retry later")]
    IdempotencyInFlight,
    /// A write the current state refuses (a name taken, a revoked key).
    #[error("{0}")]
    Conflict(String),
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error(
        "request header fields are too large: at most {max_headers} fields and {max_bytes} bytes"
    )]
    HeadersTooLarge {
        max_headers: usize,
        max_bytes: usize,
    },
    /// A request head hyper could not parse (see `server::unparsed`).
    #[error("malformed HTTP request: its request line or a header field cannot be read")]
    UnparsableRequest,
    #[error("request target is too long")]
    UriTooLong,
    #[error("Content-Type must be application/json")]
    UnsupportedMediaType,
    #[error("this Idempotency-Key was already used for a different request")]
    IdempotencyMismatch,
    #[error("rate limit exceeded; retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    #[error("this API key has {limit} streams open already; close one first")]
    TooManyStreams { limit: usize },
    #[error("service temporarily unavailable; retry later")]
    Unavailable(String),
    #[error("internal server error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Validation(_)
            | Self::MalformedJson(_)
            | Self::BadHeader { .. }
            | Self::UnparsableRequest => StatusCode::BAD_REQUEST,
            Self::UriTooLong => StatusCode::URI_TOO_LONG,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MissingScope(_) | Self::OriginNotAllowed => StatusCode::FORBIDDEN,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::IdempotencyInFlight | Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::HeadersTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::IdempotencyMismatch => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RateLimited { .. } | Self::TooManyStreams { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn details(&self) -> Option<Vec<FieldError>> {
        match self {
            Self::Validation(details) => Some(details.clone()),
            Self::MalformedJson(reason) => Some(vec![FieldError::new(vec![], reason.clone())]),
            Self::BadHeader { header, message } => Some(vec![FieldError::new(
                vec!["headers".into(), (*header).into()],
                message.clone(),
            )]),
            _ => None,
        }
    }

    /// The response for this error. Server-side failures are logged here,
    /// with their cause, under the request's id.
    pub fn render(&self, request_id: RequestId) -> Response {
        match self {
            Self::Internal(cause) => {
                tracing::error!(error = ?cause, "request failed");
            }
            Self::Unavailable(cause) => {
                tracing::warn!(cause = %cause, "store unavailable");
            }
            _ => {}
        }
        let envelope = ErrorEnvelope {
            success: false,
            error: self.to_string(),
            details: self.details(),
            request_id: request_id.to_string(),
        };
        let mut response = Response::builder()
            .status(self.status())
            .content_type("application/json; charset=utf-8")
            .body(envelope.to_json_string());
        let retry_after = match self {
            Self::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            Self::IdempotencyInFlight => Some(1),
            Self::Unavailable(_) => Some(1),
            _ => None,
        };
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, secs.into());
        }
        response
    }

    /// Turns any error poem or poem-openapi produced into ours, so unknown
    /// routes, wrong methods and unreadable requests get the same envelope.
    pub fn from_poem(err: poem::Error) -> Self {
        if err.is::<ApiError>() {
            return match err.downcast::<ApiError>() {
                Ok(api) => api,
                Err(other) => Self::Internal(anyhow::anyhow!("{other}")),
            };
        }
        match err.status() {
            StatusCode::NOT_FOUND => Self::NotFound("no such route".into()),
            StatusCode::METHOD_NOT_ALLOWED => Self::MethodNotAllowed,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Self::UnsupportedMediaType,
            status if status.is_client_error() => {
                Self::Validation(vec![FieldError::new(vec![], err.to_string())])
            }
            _ => Self::Internal(anyhow::anyhow!("{err}")),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(cause) => Self::Unavailable(format!("{cause:#}")),
            StoreError::Backend(cause) => Self::Internal(cause),
        }
    }
}

impl poem::error::ResponseError for ApiError {
    fn status(&self) -> StatusCode {
        ApiError::status(self)
    }
}

/// Renders the outcome of an inner endpoint as a response, errors included,
/// so each middleware can see and decorate the final status.
pub fn rendered(result: poem::Result<Response>, request_id: RequestId) -> Response {
    match result {
        Ok(response) => response,
        Err(err) => ApiError::from_poem(err).render(request_id),
    }
}

/// Calls the inner endpoint of a middleware and [`rendered`] its outcome.
pub async fn call_rendered<E: poem::Endpoint>(
    ep: &E,
    req: poem::Request,
    request_id: RequestId,
) -> Response {
    rendered(
        ep.call(req).await.map(poem::IntoResponse::into_response),
        request_id,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(response: Response) -> serde_json::Value {
        let bytes = response.into_body().into_bytes().await.expect("body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[tokio::test]
    async fn internal_errors_are_opaque_to_the_client() {
        let id = RequestId(uuid::Uuid::new_v4());
        let cause = anyhow::anyhow!("connection to db-7.internal:27017 reset");
        let response = ApiError::Internal(cause).render(id);
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = body_of(response).await;
        assert_eq!(
            body,
            serde_json::json!({
                "success": false,
                "error": "internal server error",
                "requestId": id.to_string(),
            })
        );
    }

    #[tokio::test]
    async fn validation_errors_carry_their_details() {
        let id = RequestId(uuid::Uuid::new_v4());
        let fault = FieldError::new(vec!["tags".into(), "1".into()], "must not be empty");
        let body = body_of(ApiError::Validation(vec![fault]).render(id)).await;
        assert_eq!(body["details"][0]["path"], serde_json::json!(["tags", "1"]));
        assert_eq!(body["details"][0]["message"], "must not be empty");
    }

    #[test]
    fn store_failures_map_to_503_or_500() {
        let unavailable = ApiError::from(StoreError::unavailable("timeout"));
        assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
        let broken = ApiError::from(StoreError::Backend(anyhow::anyhow!("bad document")));
        assert_eq!(broken.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}

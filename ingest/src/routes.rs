//! The one rule for what a route asks of a request: whether it needs an API
//! key, and whether it takes an `Idempotency-Key`. The gate, the idempotency
//! layer and the OpenAPI document all read it, so the three cannot drift.

use poem::http::Method;

/// The versioned API: every route under it needs an API key.
const API_PREFIX: &str = "/v1";

/// What a route asks for before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Health checks, the document and its page, metrics, unknown paths:
    /// limited per client address only.
    Anonymous,
    /// The API: a bearer API key, and its rate limit.
    ApiKey,
}

/// What `path` asks for.
pub fn access(path: &str) -> Access {
    let under_api = path
        .strip_prefix(API_PREFIX)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    if under_api {
        Access::ApiKey
    } else {
        Access::Anonymous
    }
}

/// Whether `method` on `path` takes an `Idempotency-Key`: the API's writes
/// (every one of them is a POST; a DELETE is idempotent by itself).
pub fn is_idempotent(method: &Method, path: &str) -> bool {
    method == Method::POST && access(path) == Access::ApiKey
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_needs_a_key_and_nothing_else_does() {
        for path in ["/v1", "/v1/events", "/v1/devices/abc"] {
            assert_eq!(access(path), Access::ApiKey, "{path}");
        }
        for path in ["/", "/v10/events", "/v1events", "/healthz", "/openapi.json"] {
            assert_eq!(access(path), Access::Anonymous, "{path}");
        }
    }

    #[test]
    fn only_the_apis_posts_are_idempotent() {
        assert!(is_idempotent(&Method::POST, "/v1/events"));
        assert!(!is_idempotent(&Method::DELETE, "/v1/devices/abc"));
        assert!(!is_idempotent(&Method::GET, "/v1/events/abc"));
        assert!(!is_idempotent(&Method::POST, "/healthz"));
    }
}

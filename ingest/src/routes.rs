//! The one rule for what a route asks of a request: whether it needs an API
//! key or an admin token, which scope the key must have, and whether it
//! takes an `Idempotency-Key`. The authentication, scope and idempotency
//! layers and the OpenAPI document all read it, so they cannot drift.

use common::store::KeyScope;
use poem::http::Method;

/// The versioned API: every route under it needs an API key.
const API_PREFIX: &str = "/v1";

/// The admin API: every route under it needs an admin token.
pub const ADMIN_PREFIX: &str = "/admin/v1";

/// What a route asks for before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Health checks, the document and its page, metrics, unknown paths:
    /// limited per client address only.
    Anonymous,
    /// The API: a bearer API key, and its rate limit.
    ApiKey,
    /// The admin API: a bearer admin token; failed attempts count in a
    /// bucket of their own.
    Admin,
}

/// Whether `path` is `prefix` or below it.
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The API routes that need no key: what a web page needs before it has one
/// (the VAPID public key it subscribes with is public by design).
const KEYLESS: &[&str] = &["/v1/webpush/key"];

/// What `path` asks for.
pub fn access(path: &str) -> Access {
    if KEYLESS.contains(&path) {
        return Access::Anonymous;
    }
    if under(path, API_PREFIX) {
        Access::ApiKey
    } else if under(path, ADMIN_PREFIX) {
        Access::Admin
    } else {
        Access::Anonymous
    }
}

/// The scope each API operation needs, by method and path template (a
/// `{name}` segment stands for any one non-empty segment). Every operation
/// under `/v1` is here: a key can do nothing its scopes do not name.
const SCOPES: &[(&str, &str, KeyScope)] = &[
    ("POST", "/v1/events", KeyScope::EventsWrite),
    ("POST", "/v1/identify", KeyScope::EventsWrite),
    ("POST", "/v1/insights", KeyScope::EventsWrite),
    ("PATCH", "/v1/insights", KeyScope::EventsWrite),
    ("DELETE", "/v1/insights/{title}", KeyScope::EventsWrite),
    ("GET", "/v1/insights", KeyScope::EventsRead),
    ("GET", "/v1/events", KeyScope::EventsRead),
    ("GET", "/v1/events/{id}", KeyScope::EventsRead),
    ("GET", "/v1/channels", KeyScope::EventsRead),
    ("GET", "/v1/users", KeyScope::EventsRead),
    ("GET", "/v1/users/{userId}", KeyScope::EventsRead),
    ("GET", "/v1/stream", KeyScope::EventsRead),
    ("GET", "/v1/stats/events", KeyScope::EventsRead),
    ("POST", "/v1/devices", KeyScope::DevicesWrite),
    ("PATCH", "/v1/devices/{id}", KeyScope::DevicesWrite),
    ("DELETE", "/v1/devices/{id}", KeyScope::DevicesWrite),
    ("GET", "/v1/devices", KeyScope::DevicesRead),
];

/// Whether `path` (a request's, or a template itself) is an instance of
/// `template`.
pub fn matches(template: &str, path: &str) -> bool {
    let mut pattern = template.split('/');
    let mut segments = path.split('/');
    loop {
        match (pattern.next(), segments.next()) {
            (None, None) => return true,
            (Some(p), Some(s)) if p == s || (p.starts_with('{') && !s.is_empty()) => {}
            _ => return false,
        }
    }
}

/// The scope a key needs for `method` on `path`; `None` for what is not an
/// API operation (an unknown route or method, answered 404 or 405 after
/// authentication). HEAD is GET without the body, so it needs what GET
/// needs.
pub fn required_scope(method: &Method, path: &str) -> Option<KeyScope> {
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    SCOPES
        .iter()
        .find(|(m, template, _)| method.as_str() == *m && matches(template, path))
        .map(|(_, _, scope)| *scope)
}

/// The API's PATCHes that take an `Idempotency-Key`: those that are not
/// idempotent by themselves (an increment sent twice adds twice; a PATCH
/// that sets fields is the same change however often it is sent).
const IDEMPOTENT_PATCHES: &[&str] = &["/v1/insights"];

/// Whether `method` on `path` takes an `Idempotency-Key`: the API's writes
/// that are not idempotent by themselves: every POST, and the PATCHes of
/// [`IDEMPOTENT_PATCHES`] (a DELETE is idempotent by itself).
pub fn is_idempotent(method: &Method, path: &str) -> bool {
    access(path) == Access::ApiKey
        && (method == Method::POST
            || (method == Method::PATCH && IDEMPOTENT_PATCHES.contains(&path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_needs_a_key_and_nothing_else_does() {
        for path in ["/v1", "/v1/events", "/v1/devices/abc"] {
            assert_eq!(access(path), Access::ApiKey, "{path}");
        }
        for path in [
            "/admin/v1",
            "/admin/v1/projects",
            "/admin/v1/keys/abc/rotate",
        ] {
            assert_eq!(access(path), Access::Admin, "{path}");
        }
        for path in [
            "/",
            "/v10/events",
            "/v1events",
            "/healthz",
            "/openapi.json",
            "/admin",
            "/admin/v10",
            "/dashboard",
        ] {
            assert_eq!(access(path), Access::Anonymous, "{path}");
        }
    }

    #[test]
    fn each_operation_needs_its_scope() {
        use KeyScope::*;
        for (method, path, scope) in [
            (Method::POST, "/v1/events", EventsWrite),
            (Method::POST, "/v1/identify", EventsWrite),
            (Method::POST, "/v1/insights", EventsWrite),
            (Method::PATCH, "/v1/insights", EventsWrite),
            (Method::DELETE, "/v1/insights/Revenue%20today", EventsWrite),
            (Method::GET, "/v1/insights", EventsRead),
            (Method::GET, "/v1/events", EventsRead),
            (Method::HEAD, "/v1/events", EventsRead),
            (Method::GET, "/v1/events/0195a1b2", EventsRead),
            (Method::GET, "/v1/events/{id}", EventsRead),
            (Method::GET, "/v1/channels", EventsRead),
            (Method::GET, "/v1/users", EventsRead),
            (Method::GET, "/v1/users/user_7", EventsRead),
            (Method::GET, "/v1/stream", EventsRead),
            (Method::GET, "/v1/stats/events", EventsRead),
            (Method::POST, "/v1/devices", DevicesWrite),
            (Method::PATCH, "/v1/devices/0195a1b2", DevicesWrite),
            (Method::DELETE, "/v1/devices/0195a1b2", DevicesWrite),
            (Method::GET, "/v1/devices", DevicesRead),
        ] {
            assert_eq!(
                required_scope(&method, path),
                Some(scope),
                "{method} {path}"
            );
        }
        for (method, path) in [
            (Method::PUT, "/v1/events"),
            (Method::GET, "/v1/events/"),
            (Method::GET, "/v1/events/a/b"),
            (Method::GET, "/v1/users/"),
            (Method::GET, "/healthz"),
            (Method::OPTIONS, "/v1/devices"),
        ] {
            assert_eq!(required_scope(&method, path), None, "{method} {path}");
        }
    }

    #[test]
    fn only_the_apis_posts_and_increments_are_idempotent() {
        assert!(is_idempotent(&Method::POST, "/v1/events"));
        assert!(is_idempotent(&Method::PATCH, "/v1/insights"));
        assert!(!is_idempotent(&Method::PATCH, "/v1/devices/abc"));
        assert!(!is_idempotent(&Method::DELETE, "/v1/insights/abc"));
        assert!(!is_idempotent(&Method::DELETE, "/v1/devices/abc"));
        assert!(!is_idempotent(&Method::GET, "/v1/events/abc"));
        assert!(!is_idempotent(&Method::POST, "/healthz"));
        assert!(!is_idempotent(&Method::POST, "/admin/v1/organizations"));
    }
}

//! Cross-origin calls from web pages (CORS) for the origins the operator
//! lists in `cors_origins`. Inside the request-id layer and outside authentication:
//! a browser's preflight is answered here, before authentication and the
//! rate limits (it carries no key, and must never count as a failed
//! authentication), and every answer to a listed origin, 401 and 429
//! included, carries the headers that let the page read it.
//!
//! Keys travel as bearer tokens, never cookies, so credentials are not
//! enabled (no `Access-Control-Allow-Credentials`).

use std::{collections::BTreeSet, sync::Arc};

use poem::{
    Endpoint, Request, Response,
    http::{HeaderName, HeaderValue, Method, StatusCode, header},
};

use crate::{
    allow::AllowedMethods,
    error::{ApiError, call_rendered},
    request_id::RequestId,
};

/// Headers a page may always send: the key, the JSON body, the
/// idempotency key.
const ALLOWED_HEADERS: [&str; 3] = ["authorization", "content-type", "idempotency-key"];

/// Response headers a page may read besides the CORS-safelisted ones.
const EXPOSED_HEADERS: &str = "X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, \
                               X-RateLimit-Reset, Retry-After, X-Idempotent-Replay";

/// How long a browser may reuse a preflight's answer, in seconds: two hours,
/// Chromium's ceiling (Firefox would keep it a day). A changed
/// `cors_origins` reaches browsers within it.
const MAX_AGE_SECS: u32 = 7200;

/// The origins allowed to call the API from a browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origins {
    /// None (the default): every preflight is refused, no CORS headers.
    None,
    /// `*`: any origin.
    Any,
    /// These origins, as browsers serialise them (`https://app.example`).
    Listed(BTreeSet<String>),
}

impl Origins {
    /// Reads the setting: empty, `*`, or comma-separated origins, each a
    /// `scheme://host[:port]` without path, query or user.
    pub fn parse(setting: &str) -> Result<Self, String> {
        let entries: Vec<&str> = setting
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.is_empty() {
            return Ok(Self::None);
        }
        if entries.contains(&"*") {
            return if entries.len() == 1 {
                Ok(Self::Any)
            } else {
                Err("`*` allows every origin and cannot be combined with others".into())
            };
        }
        entries
            .into_iter()
            .map(origin)
            .collect::<Result<_, _>>()
            .map(Self::Listed)
    }

    fn allows(&self, origin: &HeaderValue) -> bool {
        match self {
            Self::None => false,
            Self::Any => true,
            Self::Listed(origins) => origin.to_str().is_ok_and(|o| origins.contains(o)),
        }
    }
}

/// One origin, normalised as a browser sends it in `Origin`: scheme and host
/// in lower case, the scheme's default port left out.
fn origin(entry: &str) -> Result<String, String> {
    let problem = |what: &str| {
        Err(format!(
            "{entry:?} is not an origin ({what}); write scheme://host[:port], \
             such as https://app.example.com"
        ))
    };
    let Some((scheme, authority)) = entry.split_once("://") else {
        return problem("no scheme");
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return problem("a bad scheme");
    }
    if authority.contains(['/', '?', '#']) {
        return problem("an origin has no path");
    }
    if authority.contains('@') {
        return problem("an origin has no user");
    }
    // `[::1]:8080` splits at its last colon; `[::1]` alone has no port.
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '[' | ']' | ':'))
        && (!host.contains(':') || (host.starts_with('[') && host.ends_with(']')));
    if !host_ok {
        return problem("a bad host");
    }
    let (scheme, host) = (scheme.to_ascii_lowercase(), host.to_ascii_lowercase());
    let port = match port.map(str::parse::<u16>) {
        None => None,
        Some(Ok(port)) if port > 0 => Some(port),
        Some(_) => return problem("a bad port"),
    };
    let default_port = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Ok(match port.filter(|p| Some(*p) != default_port) {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

/// The policy the middleware applies.
pub struct Cors {
    pub origins: Origins,
    /// Each route's methods, for `Access-Control-Allow-Methods`.
    pub allowed: Arc<AllowedMethods>,
}

/// The middleware: `EndpointExt::around` with the policy.
pub async fn cors<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    cors: Arc<Cors>,
) -> poem::Result<Response> {
    let origin = req.headers().get(header::ORIGIN).cloned();
    let preflight = req.method() == Method::OPTIONS
        && origin.is_some()
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let allowed_origin = origin.filter(|o| cors.origins.allows(o));
    let mut response = if preflight {
        preflight_response(&req, allowed_origin.as_ref(), &cors)
    } else {
        let request_id = RequestId::of(&req);
        let mut response = call_rendered(&*ep, req, request_id).await;
        if let Some(origin) = allowed_origin {
            let headers = response.headers_mut();
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            headers.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static(EXPOSED_HEADERS),
            );
        }
        response
    };
    if cors.origins != Origins::None {
        // The answer depends on `Origin`: caches must keep one per origin.
        response
            .headers_mut()
            .append(header::VARY, HeaderValue::from_static("origin"));
    }
    Ok(response)
}

/// The answer to a preflight. An origin not allowed gets 403 with the error
/// envelope and no CORS headers, so the browser refuses the call and whoever
/// reads the network log sees why; a route that does not exist, 404.
fn preflight_response(req: &Request, origin: Option<&HeaderValue>, cors: &Cors) -> Response {
    let request_id = RequestId::of(req);
    let Some(origin) = origin else {
        return ApiError::OriginNotAllowed.render(request_id);
    };
    let Some(methods) = cors.allowed.for_path(req.uri().path()) else {
        return ApiError::NotFound("no such route".into()).render(request_id);
    };
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .header(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone())
        .header(header::ACCESS_CONTROL_ALLOW_METHODS, methods.clone())
        .header(header::ACCESS_CONTROL_ALLOW_HEADERS, allowed_headers(req))
        .header(header::ACCESS_CONTROL_MAX_AGE, MAX_AGE_SECS)
        .finish()
}

/// The three headers the API reads, and any other well-formed name the page
/// asked for: with no cookies involved, a header restriction protects
/// nothing here, and the client library lets callers add their own (a
/// tracing header, say), which must not break the call.
fn allowed_headers(req: &Request) -> String {
    let requested = req
        .headers()
        .get_all(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::try_from(name.trim()).ok())
        .map(|name| name.as_str().to_owned());
    let mut names: Vec<String> = ALLOWED_HEADERS.map(String::from).into();
    for name in requested {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(origins: &[&str]) -> Origins {
        Origins::Listed(origins.iter().map(|o| (*o).to_owned()).collect())
    }

    #[test]
    fn the_setting_reads_as_none_any_or_normalised_origins() {
        assert_eq!(Origins::parse(""), Ok(Origins::None));
        assert_eq!(Origins::parse(" , "), Ok(Origins::None));
        assert_eq!(Origins::parse(" * "), Ok(Origins::Any));
        assert_eq!(
            Origins::parse("HTTPS://App.Example:443, http://localhost:3000,http://[::1]:80"),
            Ok(listed(&[
                "https://app.example",
                "http://localhost:3000",
                "http://[::1]",
            ]))
        );
        assert_eq!(
            Origins::parse("tauri://localhost"),
            Ok(listed(&["tauri://localhost"]))
        );
    }

    #[test]
    fn anything_but_an_origin_is_refused_with_the_entry() {
        for bad in [
            "app.example",
            "https://app.example/",
            "https://app.example/path",
            "https://app.example?x",
            "https://user@app.example",
            "https://",
            "https://app.example:0",
            "https://app.example:99999",
            "https://app.example:x",
            "https://::1",
            "1http://app.example",
            "https://app example",
            "*, https://app.example",
        ] {
            let err = Origins::parse(bad).expect_err(bad);
            assert!(
                err.contains(bad.split(", ").last().expect("entry")) || err.contains('*'),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn only_listed_origins_are_allowed() {
        let origins = Origins::parse("https://app.example").expect("valid");
        assert!(origins.allows(&HeaderValue::from_static("https://app.example")));
        assert!(!origins.allows(&HeaderValue::from_static("https://app.example:8443")));
        assert!(!origins.allows(&HeaderValue::from_static("null")));
        assert!(!Origins::None.allows(&HeaderValue::from_static("https://app.example")));
        assert!(Origins::Any.allows(&HeaderValue::from_static("null")));
    }
}

//! `Allow` on every 405 (RFC 9110 §15.5.6 requires it): the methods the
//! requested route does support, read from the paths the OpenAPI document
//! publishes, so the header and `/openapi.json` cannot disagree.

use std::{collections::HashMap, sync::Arc};

use poem::{
    Endpoint, Request, Response,
    http::{HeaderValue, StatusCode, header},
};
use serde_json::Value;

use crate::{error::call_rendered, metrics::Routes, request_id::RequestId};

/// Methods in the order `Allow` lists them.
const METHODS: [&str; 6] = ["get", "head", "post", "put", "patch", "delete"];

/// The `Allow` value of every route.
pub struct AllowedMethods {
    routes: Routes,
    by_route: HashMap<String, HeaderValue>,
}

impl AllowedMethods {
    /// The routes of `document` with the methods it declares for each, and
    /// `get_only`, routes served outside the document that answer GET alone.
    pub fn new(document: &Value, get_only: &[&str]) -> Self {
        let mut declared: HashMap<String, Vec<String>> = get_only
            .iter()
            .map(|route| ((*route).to_owned(), vec!["get".to_owned()]))
            .collect();
        if let Some(paths) = document["paths"].as_object() {
            for (route, item) in paths {
                let methods = item.as_object().into_iter().flat_map(|i| i.keys().cloned());
                declared.entry(route.clone()).or_default().extend(methods);
            }
        }
        let by_route = declared
            .iter()
            .map(|(route, methods)| {
                // poem answers HEAD on every GET route (the GET response
                // without its body).
                let allowed = METHODS
                    .iter()
                    .filter(|m| {
                        methods.iter().any(|d| d == *m)
                            || (**m == "head" && methods.iter().any(|d| d == "get"))
                    })
                    .map(|m| m.to_ascii_uppercase())
                    .collect::<Vec<_>>()
                    .join(", ");
                let value = HeaderValue::from_str(&allowed).expect("method names are ASCII");
                (route.clone(), value)
            })
            .collect();
        Self {
            routes: Routes::new(declared.into_keys()),
            by_route,
        }
    }

    /// The `Allow` value for a request path, if it names a route.
    pub fn for_path(&self, path: &str) -> Option<&HeaderValue> {
        self.by_route.get(self.routes.template(path).as_str())
    }
}

/// The middleware: `EndpointExt::around` with the table. Outside the
/// idempotency layer, so a replayed 405 gets the header too.
pub async fn allow<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    allowed: Arc<AllowedMethods>,
) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    let path = req.uri().path().to_owned();
    let mut response = call_rendered(&*ep, req, request_id).await;
    if response.status() == StatusCode::METHOD_NOT_ALLOWED
        && let Some(value) = allowed.for_path(&path)
    {
        response.headers_mut().insert(header::ALLOW, value.clone());
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_allows_its_declared_methods_and_head_with_get() {
        let document = serde_json::json!({ "paths": {
            "/v1/events": { "post": {} },
            "/v1/devices": { "post": {}, "get": {} },
            "/v1/devices/{id}": { "delete": {} },
        }});
        let allowed = AllowedMethods::new(&document, &["/metrics"]);
        let allow = |path| allowed.for_path(path).map(|v| v.to_str().expect("ASCII"));
        assert_eq!(allow("/v1/events"), Some("POST"));
        assert_eq!(allow("/v1/devices"), Some("GET, HEAD, POST"));
        assert_eq!(allow("/v1/devices/0193"), Some("DELETE"));
        assert_eq!(allow("/metrics"), Some("GET, HEAD"));
        assert_eq!(allow("/v1/nothing"), None);
    }
}

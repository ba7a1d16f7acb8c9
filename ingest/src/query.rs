//! Query strings checked against the parameters each operation publishes:
//! an unknown name is refused (a misspelt filter would otherwise be
//! ignored and list everything), a repeated one too, and a value that does
//! not parse gets a sentence from its published schema — all as 400s with
//! the path `["query", name]`, like faults in a body.

use std::{collections::HashMap, sync::Arc};

use poem::{Endpoint, IntoResponse, Request, Response};
use poem_openapi::error::ParseParamError;
use serde_json::Value;

use crate::{
    error::{ApiError, FieldError, call_rendered, rendered},
    metrics::Routes,
    request_id::RequestId,
    validation::{PATTERN_WORDS, closest_name},
};

/// A parameter as the document publishes it.
struct Param {
    name: String,
    /// `query`, `header` or `path`: the first segment of a fault's path.
    location: &'static str,
    /// What a valid value looks like, for a person.
    expected: String,
}

/// Every operation's parameters, by route template and method.
pub struct QueryRules {
    routes: Routes,
    /// By route template, then by method (upper case).
    params: HashMap<String, HashMap<String, Vec<Param>>>,
}

impl QueryRules {
    pub fn new(document: &Value) -> Self {
        let mut params = HashMap::new();
        let paths = document["paths"].as_object().into_iter().flatten();
        for (template, item) in paths {
            for (method, operation) in item.as_object().into_iter().flatten() {
                let declared = operation["parameters"].as_array().into_iter().flatten();
                let list = declared
                    .filter_map(|p| {
                        let location = match p["in"].as_str()? {
                            "query" => "query",
                            "header" => "headers",
                            "path" => "path",
                            _ => return None,
                        };
                        Some(Param {
                            name: p["name"].as_str()?.to_owned(),
                            location,
                            expected: expected(&p["schema"], document),
                        })
                    })
                    .collect();
                params
                    .entry(template.clone())
                    .or_insert_with(HashMap::new)
                    .insert(method.to_ascii_uppercase(), list);
            }
        }
        let routes = Routes::new(params.keys().cloned());
        Self { routes, params }
    }

    /// The faults of `query` for `params`: unknown and repeated names.
    fn check(&self, params: &[Param], query: &str) -> Vec<FieldError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
        let known: Vec<&str> = params
            .iter()
            .filter(|p| p.location == "query")
            .map(|p| p.name.as_str())
            .collect();
        let mut faults = Vec::new();
        let mut given = Vec::new();
        for (name, _) in &pairs {
            let path = vec!["query".to_owned(), name.clone()];
            if !known.contains(&name.as_str()) {
                let message = match closest_name(name, &known) {
                    Some(meant) => format!("unknown parameter; did you mean `{meant}`?"),
                    None if known.is_empty() => "unknown parameter: this route takes none".into(),
                    None => format!(
                        "unknown parameter; the parameters are {}",
                        known
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                faults.push(FieldError::new(path, message));
            } else if given.contains(name) {
                faults.push(FieldError::new(path, "is given more than once"));
            } else {
                given.push(name.clone());
            }
        }
        faults
    }
}

/// The middleware: `EndpointExt::around` with the rules.
pub async fn check_query<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    rules: Arc<QueryRules>,
) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    let template = rules.routes.template(req.uri().path());
    let params = rules
        .params
        .get(template.as_str())
        .and_then(|methods| methods.get(req.method().as_str()));
    let Some(params) = params else {
        return Ok(call_rendered(&*ep, req, request_id).await);
    };
    let faults = rules.check(params, req.uri().query().unwrap_or(""));
    if !faults.is_empty() {
        return Ok(ApiError::Validation(faults).render(request_id));
    }
    let result = ep.call(req).await;
    let result = match result {
        Err(e) if e.is::<ParseParamError>() => {
            let name = e.downcast_ref::<ParseParamError>().map_or("", |p| p.name);
            let (location, expected) = params
                .iter()
                .find(|p| p.name == name)
                .map_or(("query", "is not valid"), |p| {
                    (p.location, p.expected.as_str())
                });
            Err(ApiError::Validation(vec![FieldError::new(
                vec![location.into(), name.into()],
                expected,
            )])
            .into())
        }
        // poem's router drops a path segment that is not UTF-8 once
        // percent-decoded, then refuses the request naming nothing; the
        // route's template names the parameters it was to fill.
        Err(e) if e.is::<poem::error::ParsePathError>() => match undecodable(params) {
            faults if faults.is_empty() => Err(e),
            faults => Err(ApiError::Validation(faults).into()),
        },
        other => other.map(IntoResponse::into_response),
    };
    Ok(rendered(result, request_id))
}

/// The faults of a request whose path parameters did not decode: each of
/// the route's, as the segment at fault is not known.
fn undecodable(params: &[Param]) -> Vec<FieldError> {
    params
        .iter()
        .filter(|p| p.location == "path")
        .map(|p| {
            FieldError::new(
                vec![p.location.into(), p.name.clone()],
                "must be UTF-8 text once percent-decoded",
            )
        })
        .collect()
}

/// What `schema` accepts, in words.
fn expected(schema: &Value, document: &Value) -> String {
    let schema = match schema["$ref"].as_str() {
        Some(reference) => document
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or(schema),
        None => schema,
    };
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
        return format!("must be one of: {}", values.join(", "));
    }
    match (schema["type"].as_str(), schema["format"].as_str()) {
        (Some("integer"), _) => match (schema["minimum"].as_f64(), schema["maximum"].as_f64()) {
            (Some(min), Some(max)) => format!("must be a whole number from {min} to {max}"),
            _ => "must be a whole number".into(),
        },
        (Some("string"), Some("date-time")) => {
            "must be an RFC 3339 date and time, such as 2026-11-23T06:40:00Z".into()
        }
        (Some("string"), Some("uuid")) => "must be a UUID".into(),
        // A pattern is read to no one: each published one has its words.
        (Some("string"), _) if schema["pattern"].is_string() => PATTERN_WORDS
            .iter()
            .find(|(pattern, _)| schema["pattern"] == *pattern)
            .map_or("is not in the expected form".into(), |(_, words)| {
                format!("must be {words}")
            }),
        (Some("string"), _) => match (schema["minLength"].as_u64(), schema["maxLength"].as_u64()) {
            (Some(min), Some(max)) => format!("must be {min} to {max} characters long"),
            _ => "must be a string".into(),
        },
        _ => "is not valid".into(),
    }
}

#[cfg(test)]
mod tests {
    use poem::{Route, endpoint::make_sync, get, http::StatusCode};

    use super::*;

    /// The rules of one route with a path parameter, around the router
    /// the API nests its operations in.
    async fn get_user(path: &str) -> (StatusCode, Value) {
        let document = serde_json::json!({ "paths": { "/v1/users/{userId}": { "get": {
            "parameters": [{ "in": "path", "name": "userId", "schema": { "type": "string" } }],
        } } } });
        let rules = Arc::new(QueryRules::new(&document));
        let routes = Route::new().nest(
            "/",
            Route::new().at("/v1/users/:userId", get(make_sync(|_| "a user"))),
        );
        let request = Request::builder().uri_str(path).finish();
        let response = check_query(Arc::new(routes), request, rules)
            .await
            .expect("a response");
        let status = response.status();
        let body = response.into_body().into_json().await.unwrap_or_default();
        (status, body)
    }

    /// Found by the `query` fuzz target: a segment that percent-decodes to
    /// bytes that are not UTF-8 (here 0x92) was refused with a fault at the
    /// body's root, `[]`, and poem's "invalid path params".
    #[tokio::test]
    async fn a_path_parameter_that_is_not_utf8_is_named() {
        let (status, body) = get_user("/v1/users/a%92b").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            body["details"],
            serde_json::json!([{
                "path": ["path", "userId"],
                "message": "must be UTF-8 text once percent-decoded",
            }])
        );
        assert_eq!(get_user("/v1/users/caf%C3%A9").await.0, StatusCode::OK);
    }
}

//! What the middleware layers do to each operation, written into the
//! document: the headers on every response, the `Idempotency-Key` parameter,
//! the formats of path parameters, the key scope it needs, and every error
//! status the operation can answer, each with the error envelope.

use common::store::KeyScope;
use poem_openapi::{registry::MetaSchemaRef, types::Type};
use serde_json::{Map, Value, json};

use poem::http::Method;

use crate::{
    error::ErrorEnvelope,
    idempotency::MAX_KEY_LEN,
    routes::{self, Access},
};

/// What `Idempotency-Key` accepts: visible ASCII, spaces allowed inside. HTTP
/// strips spaces around a header value, so a key cannot start or end with one.
const IDEMPOTENCY_KEY_PATTERN: &str = "^[!-~](?:[ -~]*[!-~])?$";

fn error_schema_ref() -> Value {
    match ErrorEnvelope::schema_ref() {
        MetaSchemaRef::Reference(name) => json!({ "$ref": format!("#/components/schemas/{name}") }),
        MetaSchemaRef::Inline(schema) => serde_json::to_value(schema).expect("schemas serialise"),
    }
}

fn header(description: &str, schema: Value) -> Value {
    json!({ "description": description, "required": true, "schema": schema })
}

/// Headers on every response.
fn common_headers() -> Map<String, Value> {
    let int = json!({ "type": "integer", "minimum": 0 });
    let mut h = Map::new();
    h.insert(
        "X-RateLimit-Limit".into(),
        header("Requests allowed per minute.", int.clone()),
    );
    h.insert(
        "X-RateLimit-Remaining".into(),
        header("Requests left in the current window.", int.clone()),
    );
    h.insert(
        "X-RateLimit-Reset".into(),
        header(
            "Unix time (seconds) when the full quota is available again.",
            int,
        ),
    );
    h.insert(
        "X-Request-Id".into(),
        header(
            "Id of this request, as in the body's `requestId`.",
            json!({ "type": "string", "format": "uuid" }),
        ),
    );
    h
}

fn error_response(description: &str, retry_after: bool) -> Value {
    let mut headers = common_headers();
    if retry_after {
        headers.insert(
            "Retry-After".into(),
            header(
                "Seconds to wait before retrying.",
                json!({ "type": "integer", "minimum": 1 }),
            ),
        );
    }
    json!({
        "description": description,
        "headers": headers,
        "content": { "application/json": { "schema": error_schema_ref() } },
    })
}

fn replay_header() -> Value {
    json!({
        "description": "`true` when this is a replay of the original response.",
        "schema": { "type": "string", "enum": ["true"] },
    })
}

/// What one operation is, as far as the middleware is concerned.
struct Shape {
    /// What the authentication layer asks for.
    access: Access,
    /// The scope the scope layer asks the key to have.
    scope: Option<KeyScope>,
    /// The idempotency layer reads `Idempotency-Key`.
    idempotent: bool,
    /// Its path names a resource by id, which may not exist.
    names_a_resource: bool,
    /// It reads a JSON body.
    has_body: bool,
    /// It changes something (POST, PATCH).
    writes: bool,
    /// It answers 404 while a feature it serves is not configured, and why.
    unconfigured: Option<&'static str>,
    /// It answers 409 when the state refuses the write, and when.
    conflict: Option<&'static str>,
}

/// Operations that serve an optional feature, and what their 404 means.
const OPTIONAL_FEATURES: &[(&str, &str)] = &[(
    "/v1/webpush/key",
    "Web Push is not configured on this server (it has no VAPID key).",
)];

/// Why a write that would create an insight can be refused.
const INSIGHTS_FULL: &str =
    "the project has as many insights as it may have, and this is not one of them";

/// API writes the current state can refuse with a 409, and when, by
/// method and path.
const CONFLICTS: &[(&str, &str, &str)] = &[
    ("POST", "/v1/insights", INSIGHTS_FULL),
    ("PATCH", "/v1/insights", INSIGHTS_FULL),
];

/// Every error status an operation can answer, with when. The layers run
/// for every route, so an operation that reads no body can still get 413 for
/// a large one, or 400 for one that cannot be read.
fn errors(shape: &Shape) -> Vec<(&'static str, Value)> {
    let invalid = if shape.has_body || shape.idempotent {
        "Invalid request: `details` lists every fault with its path (the body's fields, \
         or `[\"headers\", \"Idempotency-Key\"]`)."
    } else {
        "The request could not be read (for example a body cut short)."
    };
    let mut errors = vec![
        ("400", error_response(invalid, false)),
        (
            "413",
            error_response(
                "The body is larger than the limit (64 KiB by default).",
                false,
            ),
        ),
        ("429", error_response("Rate limit exceeded.", true)),
        (
            "431",
            error_response("Too many or too large header fields.", false),
        ),
        (
            "500",
            error_response("Internal error; the body has only the request id.", false),
        ),
        (
            "503",
            error_response("The store is unreachable; retry later.", true),
        ),
    ];
    match shape.access {
        Access::ApiKey => errors.push((
            "401",
            error_response(
                "Missing, malformed, unknown or revoked API key (or an admin token).",
                false,
            ),
        )),
        Access::Admin => errors.push((
            "401",
            error_response(
                "Missing, malformed, unknown or revoked admin token (or an API key).",
                false,
            ),
        )),
        Access::Anonymous => {}
    }
    if shape.access == Access::Admin && shape.writes {
        errors.push((
            "409",
            error_response(
                "The name is taken within its parent, or the key is revoked.",
                false,
            ),
        ));
    }
    if let Some(scope) = shape.scope {
        errors.push((
            "403",
            error_response(
                &format!("The API key lacks the `{scope}` scope this operation needs."),
                false,
            ),
        ));
    }
    if shape.names_a_resource {
        errors.push((
            "404",
            error_response(
                "The caller's project has nothing with this id (or it is not a UUID).",
                false,
            ),
        ));
    }
    if let Some(why) = shape.unconfigured {
        errors.push(("404", error_response(why, false)));
    }
    if shape.has_body {
        errors.push((
            "415",
            error_response(
                "The body is not JSON (`Content-Type: application/json`).",
                false,
            ),
        ));
    }
    if let (Some(why), false) = (shape.conflict, shape.idempotent) {
        errors.push((
            "409",
            error_response(&format!("{}.", capitalized(why)), false),
        ));
    }
    if shape.idempotent {
        let in_progress = "A request with this Idempotency-Key is still in progress";
        let conflict = match shape.conflict {
            None => error_response(&format!("{in_progress}."), true),
            Some(why) => {
                // Two reasons, and only the first is worth retrying: the
                // header says which.
                let mut either = error_response(
                    &format!("{in_progress} (with `Retry-After`), or {why} (without)."),
                    true,
                );
                either["headers"]["Retry-After"]["required"] = json!(false);
                either
            }
        };
        errors.extend([
            ("409", conflict),
            (
                "422",
                error_response(
                    "This Idempotency-Key was used with a different request.",
                    false,
                ),
            ),
        ]);
    }
    errors
}

/// Adds to each operation what the middleware layers do for it.
pub fn complete(doc: &mut Value) {
    let paths = doc
        .get_mut("paths")
        .and_then(Value::as_object_mut)
        .expect("the API has paths");
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            let Some(op) = op.as_object_mut() else {
                continue;
            };
            let method = Method::from_bytes(method.to_uppercase().as_bytes())
                .expect("the document's operations are HTTP methods");
            let shape = Shape {
                access: routes::access(path),
                scope: routes::required_scope(&method, path),
                idempotent: routes::is_idempotent(&method, path),
                names_a_resource: path.contains('{'),
                has_body: op.contains_key("requestBody"),
                writes: method == Method::POST || method == Method::PATCH,
                unconfigured: OPTIONAL_FEATURES
                    .iter()
                    .find(|(template, _)| template == path)
                    .map(|(_, why)| *why),
                conflict: CONFLICTS
                    .iter()
                    .find(|(m, template, _)| *m == method.as_str() && template == path)
                    .map(|(_, _, why)| *why),
            };
            complete_operation(op, &shape);
        }
    }
    let components = doc
        .get_mut("components")
        .and_then(Value::as_object_mut)
        .expect("the API has components");
    components.insert(
        "securitySchemes".into(),
        json!({
            "bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "tocsin_ followed by 43 base64url characters",
                "description": "An API key created with `ingest keys create` or the admin API.",
            },
            "adminToken": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "tocsinadm_ followed by 43 base64url characters",
                "description": "An admin token created with `ingest admin create`.",
            },
        }),
    );
    let mut method_not_allowed =
        error_response("The route exists but not with this method.", false);
    method_not_allowed["headers"]["Allow"] = header(
        "The methods the route supports, such as `GET, HEAD`.",
        json!({ "type": "string" }),
    );
    components.insert(
        "responses".into(),
        json!({
            "NotFound": error_response("No such route or resource.", false),
            "MethodNotAllowed": method_not_allowed,
        }),
    );
}

/// `why` as the start of a sentence.
fn capitalized(why: &str) -> String {
    let mut chars = why.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn complete_operation(op: &mut Map<String, Value>, shape: &Shape) {
    if let Some(scope) = shape.scope {
        let needs = format!("Needs the `{scope}` scope.");
        let description = match op.get("description").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => format!("{text}\n\n{needs}"),
            _ => needs,
        };
        op.insert("description".into(), Value::String(description));
    }
    let responses = op
        .entry("responses")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("responses is an object");
    for (status, response) in errors(shape) {
        responses.entry(status).or_insert(response);
    }
    for (status, response) in responses.iter_mut() {
        let headers = response
            .as_object_mut()
            .expect("a response is an object")
            .entry("headers")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("headers is an object");
        headers.extend(common_headers());
        // A retry replays what the first request got, unless that was a
        // validation failure, a refusal before the key was claimed (401,
        // 409, 413, 422, 429) or a server error: that leaves successes and
        // the 415 the handler gives.
        if shape.idempotent && (status.starts_with('2') || status == "415") {
            headers.insert("X-Idempotent-Replay".into(), replay_header());
        }
    }
    let parameters = op
        .entry("parameters")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .expect("parameters is an array");
    for parameter in parameters.iter_mut() {
        // The API's own ids are UUIDs (a user's id is the caller's own
        // string, and is not one of them); so is every admin path id.
        if parameter["in"] == "path" && (parameter["name"] == "id" || shape.access == Access::Admin)
        {
            parameter["schema"]["format"] = json!("uuid");
        }
    }
    if shape.idempotent {
        parameters.push(json!({
            "name": "Idempotency-Key",
            "in": "header",
            "required": false,
            "description": "Makes a retry safe: the same key and body within 24 hours \
                replays the original response. Visible ASCII characters (spaces allowed \
                inside).",
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_KEY_LEN,
                "pattern": IDEMPOTENCY_KEY_PATTERN,
            },
        }));
    }
    if parameters.is_empty() {
        op.remove("parameters");
    }
    op.insert(
        "security".into(),
        match shape.access {
            Access::ApiKey => json!([{ "bearerAuth": [] }]),
            Access::Admin => json!([{ "adminToken": [] }]),
            Access::Anonymous => json!([]),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idempotency_key_pattern_is_visible_ascii_with_inner_spaces() {
        let schema = json!({ "pattern": IDEMPOTENCY_KEY_PATTERN });
        let pattern = jsonschema::validator_for(&schema).expect("compiles");
        for key in ["a", "order-1001-paid", "a b", "~!{}"] {
            assert!(pattern.is_valid(&json!(key)), "{key:?}");
        }
        for key in ["", " ", " a", "a ", "a\tb", "clé", "a\u{7f}"] {
            assert!(!pattern.is_valid(&json!(key)), "{key:?}");
        }
    }
}

//! `request_body`: the input as the JSON body of `POST /v1/events` and of
//! `POST /v1/identify`, through the whole service in-process (every
//! middleware, the strict validator, the typed parse, the store), with a
//! valid key.
//!
//! The oracle is the document the service publishes: an independent JSON
//! Schema 2020-12 validator built from `/openapi.json`, plus the nesting
//! limit the schema cannot state. Then:
//! - a body the service accepts is one the schema accepts, and the answer
//!   holds what was sent;
//! - a body the service refuses gets a 400 envelope naming its faults, and
//!   the schema refuses it too (or it is no JSON, or nested too deep);
//! - nothing else: no 5xx, no other status.

use std::sync::LazyLock;

use ingest::fuzzing::{MAX_DEPTH, event_refused_beyond_schema, icon_as_stored, is_icon};
use serde_json::{Map, Value};

use crate::{envelope, service};

/// A route taking a JSON body, the schema of that body, and the status of
/// an accepted one.
struct Route {
    path: &'static str,
    schema: &'static str,
    accepted: u16,
    /// Whether the service refuses a body the schema accepts, by a rule no
    /// schema states.
    refuses: fn(&Value) -> bool,
    /// Checks that the answer holds what the body said.
    echoes: fn(&Value, &Value),
}

const ROUTES: [Route; 2] = [
    Route {
        path: "/v1/events",
        schema: "EventIn",
        accepted: 201,
        refuses: event_refused_beyond_schema,
        echoes: event_echoes,
    },
    Route {
        path: "/v1/identify",
        schema: "IdentifyIn",
        accepted: 200,
        refuses: |_| false,
        echoes: identity_echoes,
    },
];

/// One validator a route, compiled from the published document.
static ORACLE: LazyLock<Vec<jsonschema::Validator>> = LazyLock::new(|| {
    let answer = service::api()
        .get("/openapi.json")
        .expect("a request target");
    assert_eq!(answer.status, 200, "the document is published");
    let document: Value = serde_json::from_slice(&answer.body).expect("the document is JSON");
    ROUTES
        .iter()
        .map(|route| {
            let schema = serde_json::json!({
                "$ref": format!("#/components/schemas/{}", route.schema),
                "components": document["components"],
            });
            jsonschema::draft202012::options()
                .should_validate_formats(true)
                .with_format("emoji", is_icon)
                .build(&schema)
                .unwrap_or_else(|e| panic!("{} does not compile: {e}", route.schema))
        })
        .collect()
});

pub fn check(input: &[u8]) {
    let body: Option<Value> = serde_json::from_slice(input).ok();
    for (route, schema) in ROUTES.iter().zip(ORACLE.iter()) {
        let valid = body.as_ref().is_some_and(|body| {
            schema.is_valid(body) && depth(body) <= MAX_DEPTH && !(route.refuses)(body)
        });
        let answer = service::api().post_json(route.path, input);
        let text = String::from_utf8_lossy(&answer.body);
        if answer.status == route.accepted {
            let body = body.as_ref().expect("an accepted body is JSON");
            assert!(valid, "{} accepted a body the schema refuses", route.path);
            let answer: Value = serde_json::from_slice(&answer.body)
                .unwrap_or_else(|e| panic!("{} answered no JSON ({e}): {text}", route.path));
            (route.echoes)(body, &answer["data"]);
        } else if answer.status == 400 {
            let faults = envelope::faults(&answer.body);
            assert!(
                !valid,
                "{} refused a body the schema accepts: {faults:?}",
                route.path
            );
        } else {
            panic!("{} answered {}: {text}", route.path, answer.status);
        }
    }
}

/// How deep the deepest value sits: 0 for a scalar at the top. The
/// service refuses a body nested deeper than [`MAX_DEPTH`].
fn depth(value: &Value) -> usize {
    let children: Box<dyn Iterator<Item = &Value>> = match value {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(map) => Box::new(map.values()),
        _ => return 0,
    };
    children.map(|child| depth(child) + 1).max().unwrap_or(0)
}

/// The event recorded is the one sent: each field as given, or its default.
fn event_echoes(sent: &Value, event: &Value) {
    for field in ["channelName", "title"] {
        assert_eq!(event[field], sent[field], "{field} of {event}");
    }
    for field in ["description", "userId", "source", "url"] {
        assert_eq!(event[field], sent[field], "{field} of {event}");
    }
    let icon = sent["icon"].as_str().map(icon_as_stored).map(Value::from);
    assert_eq!(
        event["icon"],
        icon.unwrap_or(Value::Null),
        "icon of {event}"
    );
    assert_eq!(event["tags"], or(sent, "tags", Value::Array(vec![])));
    assert_eq!(event["parser"], or(sent, "parser", "text".into()));
    // History (an event with a `timestamp`) is never pushed.
    let notify = sent.get("timestamp").is_none() && or(sent, "notify", Value::Bool(true)) == true;
    assert_eq!(event["notify"], notify, "notify of {event}");
    assert_eq!(event["priority"], or(sent, "priority", "normal".into()));
    let metadata = or(sent, "metadata", Value::Object(Map::new()));
    assert!(
        same(&event["metadata"], &metadata),
        "metadata {} stored as {}",
        metadata,
        event["metadata"]
    );
}

/// The identity after the update holds every alias and property sent.
fn identity_echoes(sent: &Value, identity: &Value) {
    let aliases = identity["aliases"].as_array().expect("aliases");
    // An id that is an alias names its user: that user is updated.
    assert!(
        identity["user_id"] == sent["user_id"] || aliases.contains(&sent["user_id"]),
        "{} updated as {identity}",
        sent["user_id"]
    );
    for alias in sent["aliases"].as_array().into_iter().flatten() {
        assert!(aliases.contains(alias), "alias {alias} missing: {identity}");
    }
    let properties = identity["properties"].as_object().expect("properties");
    for (key, value) in sent["properties"].as_object().into_iter().flatten() {
        assert!(
            properties
                .get(key)
                .is_some_and(|stored| same(stored, value)),
            "property {key:?} {value} stored as {:?}",
            properties.get(key)
        );
    }
}

/// `body[field]`, or `default` where the body leaves it out or sends null.
fn or(body: &Value, field: &str, default: Value) -> Value {
    match &body[field] {
        Value::Null => default,
        given => given.clone(),
    }
}

/// Equal as JSON values, numbers by value: the service stores `2.0` as the
/// integer `2` (`ingest/src/validation.rs`, `integral_numbers`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| same(x, y)))
        }
        _ => a == b,
    }
}

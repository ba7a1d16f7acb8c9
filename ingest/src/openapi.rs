//! The published API description: poem-openapi's generated 3.0 document,
//! converted to OpenAPI 3.1 and completed with what the middleware does
//! (authentication, rate-limit and request-id headers, idempotency, and the
//! error responses every operation can give).

mod code_samples;
mod docs_page;
mod operations;
mod order;

pub use docs_page::docs_page;

use poem_openapi::{OpenApiService, registry::Registry, types::Type};
use serde_json::{Map, Value, json};

use crate::{
    admin::AdminApis,
    api::{
        channels::ChannelsApi, devices::DevicesApi, events::EventsApi, health::HealthApi,
        identify::IdentifyApi, insights::InsightsApi, stats::StatsApi, stream::StreamApi,
    },
    error::ErrorEnvelope,
};

pub type Apis = (
    EventsApi,
    IdentifyApi,
    InsightsApi,
    DevicesApi,
    ChannelsApi,
    StatsApi,
    StreamApi,
    HealthApi,
    AdminApis,
);

/// The version stamped into the document.
const API_VERSION: &str = "1.0.0";

const DESCRIPTION: &str = "\
Record product moments on channels and get real-time push alerts on the \
devices you connect.

Every request to `/v1` is authenticated with `Authorization: Bearer <API key>`. \
Every response, success or error, carries an envelope with a `requestId` \
(also in `X-Request-Id`) and the `X-RateLimit-*` headers. Errors use the \
error envelope; validation errors list every fault in `details`, each with \
the path of the faulty field.

A key has scopes, chosen when it is created (all four by default): \
`events:write` (record events, identify users, set insights), `events:read` \
(read events, channels, users, insights, the stream and statistics), \
`devices:write` (register and \
delete devices), `devices:read` (list devices). Each operation says the one \
it needs; a key without it gets 403. A key that only registers its device \
(in a phone or a browser) needs only `devices:write`.

POST requests, and the increment `PATCH /v1/insights`, accept an \
`Idempotency-Key` (1 to 255 visible ASCII characters, kept 24 hours, per \
project): a retry with the same key and body replays the original \
response with `X-Idempotent-Replay: true`; the same key with a different body \
gets 422, and while the first request is still running 409.

A method a route does not support gets 405 with `Allow` listing the ones it \
does.

The admin API under `/admin/v1` (tag Admin) is for operators and the dashboard: \
it takes an admin token (`Authorization: Bearer tocsinadm_…`, made with \
`ingest admin create`), never an API key, and an API key is never accepted there \
(401 either way).";

/// Wraps the APIs in a service with the document's metadata.
pub fn service(apis: Apis) -> OpenApiService<Apis, ()> {
    OpenApiService::new(apis, "Tocsin event alerting API", API_VERSION).description(DESCRIPTION)
}

/// The OpenAPI 3.1 document for `service`, as `/openapi.json` serves it and
/// the docs page shows it.
pub fn document(service: &OpenApiService<Apis, ()>) -> Value {
    let mut doc: Value =
        serde_json::from_str(&service.spec()).expect("poem-openapi writes valid JSON");
    add_error_schema(&mut doc);
    operations::complete(&mut doc);
    close_request_bodies(&mut doc);
    pin_success_flags(&mut doc);
    upgrade_to_31(&mut doc);
    describe_event_streams(&mut doc);
    add_links(&mut doc);
    examples_on_fields(&mut doc);
    code_samples::add(&mut doc);
    order::for_readers(&mut doc);
    doc
}

/// Every operation of the document, to change in place.
fn operations_mut(doc: &mut Value) -> impl Iterator<Item = &mut Value> {
    doc.get_mut("paths")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
}

/// A `text/event-stream` response described as its messages. poem-openapi
/// writes the stream as an array of its items, which no message is; OpenAPI
/// 3.2 describes one message with `itemSchema`, and tools reading 3.1 (such
/// as schemathesis) take the media type's `schema` as that. A message is
/// what an SSE parser yields (the HTML standard's fields): `data` is the
/// item as JSON (`contentSchema`, any of the kinds), `event` its type and
/// `id` an event's id, which `Last-Event-ID` resumes after; then one branch
/// per kind of message (`stream::MESSAGES`) pins its type to its data's
/// schema and says whether it has an id. Keep-alive comments are not
/// messages.
fn describe_event_streams(doc: &mut Value) {
    let kinds = &crate::api::stream::MESSAGES;
    let types: Vec<&str> = kinds.iter().map(|k| k.event).collect();
    let meanings: Vec<String> = kinds
        .iter()
        .map(|k| format!("`{}`, {}", k.event, k.meaning))
        .collect();
    let branches: Vec<Value> = kinds
        .iter()
        .map(|k| {
            let data = json!({ "$ref": format!("#/components/schemas/{}", k.data) });
            let mut branch = json!({
                "properties": {
                    "event": { "const": k.event },
                    "data": { "contentSchema": data },
                },
            });
            if k.has_id {
                branch["required"] = json!(["id"]);
            }
            branch
        })
        .collect();
    for op in operations_mut(doc) {
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        for response in responses.values_mut() {
            let Some(media) = response.pointer_mut("/content/text~1event-stream") else {
                continue;
            };
            let Some(item) = media.pointer("/schema/items").cloned() else {
                continue;
            };
            media["schema"] = json!({
                "type": "object",
                "description": "One message of the stream, as an SSE parser yields it.",
                "required": ["data", "event"],
                "properties": {
                    "event": { "type": "string", "enum": types,
                        "description": format!("The message's type: {}.", meanings.join("; ")) },
                    "id": { "type": "string", "format": "uuid",
                        "description": "On `event` messages: the event's id; send it as \
                            `Last-Event-ID` to resume after it. Other messages have no id \
                            line (a parser keeps the last event's)." },
                    "data": { "type": "string", "contentMediaType": "application/json",
                        "contentSchema": item,
                        "description": "The message's data as JSON: the event, or the insight, \
                            as listed." },
                    "retry": { "type": "integer", "minimum": 0,
                        "description": "How long a client waits before reconnecting, in milliseconds." }
                },
                "oneOf": branches.clone(),
            });
        }
    }
}

/// What each created resource's id is good for next, as OpenAPI links on
/// the creating operation's success responses: a reader sees where the id
/// goes, and a stateful tester (schemathesis) chains the calls, so reads,
/// renames and deletes run on records that exist.
const LINKS: &[(&str, &[Link])] = &[
    ("createEvent", &[("getEvent", "id", "/data/id")]),
    ("identify", &[("getUser", "userId", "/data/user_id")]),
    ("registerDevice", &[("deleteDevice", "id", "/data/id")]),
    ("setInsight", &[("deleteInsight", "title", "/data/title")]),
    (
        "incrementInsight",
        &[("deleteInsight", "title", "/data/title")],
    ),
    (
        "adminCreateOrganization",
        &[
            ("adminRenameOrganization", "orgId", "/data/id"),
            ("adminCreateProject", "orgId", "/data/id"),
            ("adminListOrganizationProjects", "orgId", "/data/id"),
        ],
    ),
    (
        "adminCreateProject",
        &[
            ("adminRenameProject", "projectId", "/data/id"),
            ("adminCreateKey", "projectId", "/data/id"),
            ("adminListKeys", "projectId", "/data/id"),
            ("adminListDevices", "projectId", "/data/id"),
        ],
    ),
    (
        "adminCreateKey",
        &[
            ("adminRotateKey", "keyId", "/data/key/id"),
            ("adminRevokeKey", "keyId", "/data/key/id"),
        ],
    ),
];

/// Where a link goes: the operation, the parameter it fills, and the JSON
/// pointer into the answer's body that fills it.
type Link = (&'static str, &'static str, &'static str);

fn add_links(doc: &mut Value) {
    for op in operations_mut(doc) {
        let Some(targets) = op["operationId"]
            .as_str()
            .and_then(|id| LINKS.iter().find(|(from, _)| *from == id))
            .map(|(_, targets)| *targets)
        else {
            continue;
        };
        let links: Map<String, Value> = targets
            .iter()
            .map(|(target, parameter, pointer)| {
                (
                    (*target).to_owned(),
                    json!({
                        "operationId": target,
                        "parameters": { *parameter: format!("$response.body#{pointer}") },
                    }),
                )
            })
            .collect();
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        for (status, response) in responses.iter_mut() {
            if status.starts_with('2') {
                response["links"] = Value::Object(links.clone());
            }
        }
    }
}

/// The names of the schemas used as request bodies.
fn request_body_schemas(doc: &Value) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        for op in paths
            .values()
            .filter_map(Value::as_object)
            .flat_map(|i| i.values())
        {
            let Some(content) = op
                .pointer("/requestBody/content")
                .and_then(Value::as_object)
            else {
                continue;
            };
            for media in content.values() {
                if let Some(name) = media
                    .pointer("/schema/$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/components/schemas/"))
                {
                    names.push(name.to_owned());
                }
            }
        }
    }
    names
}

/// Copies each request body's example (its type's `Example`) onto its
/// fields, so the schema view shows a valid value for every field and a
/// generator working field by field (Scalar's, a fuzzer's) builds a body the
/// service accepts.
fn examples_on_fields(doc: &mut Value) {
    for name in request_body_schemas(doc) {
        examples_of_branches(doc, &name);
        let Some(schema) = doc
            .pointer_mut(&format!("/components/schemas/{name}"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let Some(Value::Object(example)) = schema.get("examples").and_then(|e| e.get(0)).cloned()
        else {
            continue;
        };
        let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, value) in example {
            if let Some(property) = properties.get_mut(&field).and_then(Value::as_object_mut) {
                property.insert("examples".into(), json!([value]));
            }
        }
    }
}

/// A body that is one of several types (a device: APNs, Web Push or FCM)
/// has no `Example` of its own: it shows its branches' examples, so the
/// docs' "Test Request" starts from a body the service accepts. (Only the
/// APNs device has one: a Web Push example would name a real push service,
/// which a fuzzer's generated requests would then make the notifier call.)
fn examples_of_branches(doc: &mut Value, name: &str) {
    let pointer = format!("/components/schemas/{name}");
    let Some(branches) = doc
        .pointer(&format!("{pointer}/oneOf"))
        .and_then(Value::as_array)
    else {
        return;
    };
    let examples: Vec<Value> = branches
        .iter()
        .filter_map(|branch| {
            let reference = branch["$ref"].as_str()?.trim_start_matches('#');
            doc.pointer(reference)?.pointer("/examples/0").cloned()
        })
        .collect();
    if let Some(schema) = doc.pointer_mut(&pointer).and_then(Value::as_object_mut)
        && !examples.is_empty()
        && !schema.contains_key("examples")
    {
        schema.insert("examples".into(), Value::Array(examples));
    }
}

/// Registers the error envelope, which no handler returns directly.
fn add_error_schema(doc: &mut Value) {
    let mut registry = Registry::new();
    ErrorEnvelope::register(&mut registry);
    let schemas = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
        .expect("the API has component schemas");
    for (name, schema) in registry.schemas {
        schemas.insert(
            name,
            serde_json::to_value(schema).expect("schemas serialise"),
        );
    }
}

/// Request bodies reject unknown fields (a typo'd field name is an error, not
/// silently dropped data). poem-openapi does not publish its
/// `deny_unknown_fields`, so the schemas used as request bodies are closed here.
/// A union (`oneOf`, the device body by kind) is closed in each variant,
/// not itself (closed, it would admit no property at all), and the objects
/// a body holds by reference (a Web Push subscription and its keys) are
/// closed as well, however the field refers to them.
fn close_request_bodies(doc: &mut Value) {
    let mut names = request_body_schemas(doc);
    let mut closed = std::collections::HashSet::new();
    while let Some(name) = names.pop() {
        if !closed.insert(name.clone()) {
            continue;
        }
        let pointer = format!("/components/schemas/{name}");
        let Some(schema) = doc.pointer(&pointer) else {
            continue;
        };
        let referenced = |v: &Value| {
            // Directly, or through the `allOf` a documented field wraps its
            // reference in, or the `anyOf` with null of a nullable one.
            let direct = std::iter::once(v);
            let wrapped = ["allOf", "anyOf"]
                .into_iter()
                .filter_map(|k| v.get(k).and_then(Value::as_array))
                .flatten();
            direct
                .chain(wrapped)
                .find_map(|v| v.get("$ref").and_then(Value::as_str))
                .and_then(|r| r.rsplit('/').next())
                .map(str::to_owned)
        };
        let is_union = schema.get("oneOf").is_some();
        names.extend(
            schema["oneOf"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(referenced),
        );
        names.extend(
            schema["properties"]
                .as_object()
                .into_iter()
                .flat_map(|p| p.values())
                .filter_map(referenced)
                .filter(|n| {
                    doc.pointer(&format!("/components/schemas/{n}/properties"))
                        .is_some()
                }),
        );
        if let Some(schema) = doc.pointer_mut(&pointer).and_then(Value::as_object_mut) {
            if is_union {
                schema.remove("additionalProperties");
                // Each variant says its type.
                schema.remove("type");
            } else {
                schema.insert("additionalProperties".into(), Value::Bool(false));
            }
        }
    }
}

/// `success` is always true in a success envelope and false in an error
/// one; saying so lets clients tell the two apart by type.
fn pin_success_flags(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for (name, schema) in schemas.iter_mut() {
        let flag = match name.as_str() {
            "ErrorEnvelope" => false,
            n if n.starts_with("Success_") => true,
            _ => continue,
        };
        if let Some(success) = schema
            .pointer_mut("/properties/success")
            .and_then(Value::as_object_mut)
        {
            success.insert("const".into(), Value::Bool(flag));
        }
    }
}

/// Rewrites what differs between OpenAPI 3.0 and 3.1 (whose schemas are
/// JSON Schema 2020-12): the version, `nullable`, and `example`.
fn upgrade_to_31(doc: &mut Value) {
    doc["openapi"] = json!("3.1.0");
    if let Some(schemas) = doc.pointer_mut("/components/schemas") {
        upgrade_schemas(schemas);
    }
    if let Some(paths) = doc.get_mut("paths") {
        upgrade_schemas(paths);
    }
}

/// Walks every JSON object below `value` and upgrades each schema-like one.
fn upgrade_schemas(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.remove("nullable") == Some(Value::Bool(true)) {
                match map.get("type").cloned() {
                    Some(Value::String(t)) => {
                        map.insert("type".into(), json!([t, "null"]));
                    }
                    _ => {
                        let schema = Value::Object(std::mem::take(map));
                        map.insert("anyOf".into(), json!([schema, { "type": "null" }]));
                    }
                }
            }
            if let Some(example) = map.remove("example")
                && map.contains_key("type")
            {
                map.insert("examples".into(), json!([example]));
            }
            for child in map.values_mut() {
                upgrade_schemas(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(upgrade_schemas),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_becomes_a_type_array() {
        let mut v = json!({ "type": "string", "nullable": true, "maxLength": 3 });
        upgrade_schemas(&mut v);
        assert_eq!(v, json!({ "type": ["string", "null"], "maxLength": 3 }));
    }

    #[test]
    fn example_becomes_examples() {
        let mut v = json!({ "properties": { "icon": { "type": "string", "example": "🚀" } } });
        upgrade_schemas(&mut v);
        assert_eq!(
            v,
            json!({ "properties": { "icon": { "type": "string", "examples": ["🚀"] } } })
        );
    }
}

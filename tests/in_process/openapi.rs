//! `/openapi.json`: an OpenAPI 3.1 document that describes every route,
//! header, status and envelope, and states the rules the service enforces.
//! The real 3.1 validator's verdict on it: tests/tools/openapi.rs.

use serde_json::{Value, json};
use tocsin_tests::{StoreKind, TestApp, contract::document};

#[tokio::test]
async fn every_operation_documents_its_headers_statuses_and_envelopes() {
    let doc = document(&TestApp::spawn(StoreKind::Sqlite).await).await;
    for (path, method) in [("/v1/events", "post"), ("/v1/identify", "post")] {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is documented");
        assert_eq!(op["security"][0]["bearerAuth"], serde_json::json!([]));
        let params = op["parameters"].as_array().expect("parameters");
        assert!(
            params
                .iter()
                .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header")
        );
        let responses = op["responses"].as_object().expect("responses");
        for status in [
            "400", "401", "409", "413", "415", "422", "429", "431", "500", "503",
        ] {
            let r = &responses[status];
            assert_eq!(
                r["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ErrorEnvelope",
                "{method} {path} {status}"
            );
        }
        assert!(responses["429"]["headers"]["Retry-After"].is_object());
        for (status, response) in responses {
            for header in [
                "X-RateLimit-Limit",
                "X-RateLimit-Remaining",
                "X-RateLimit-Reset",
                "X-Request-Id",
            ] {
                assert!(
                    response["headers"][header].is_object(),
                    "{method} {path} {status} lacks {header}"
                );
            }
        }
        let success = responses
            .iter()
            .find(|(s, _)| s.starts_with('2'))
            .expect("a success response")
            .1;
        assert!(success["headers"]["X-Idempotent-Replay"].is_object());
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearerAuth"]["scheme"],
        "bearer"
    );
    let schemas = &doc["components"]["schemas"];
    let error = &schemas["ErrorEnvelope"];
    for field in ["success", "error", "details", "requestId"] {
        assert!(
            error["properties"][field].is_object(),
            "error envelope has {field}"
        );
    }
    assert_eq!(error["properties"]["success"]["const"], false);
    assert_eq!(schemas["EventIn"]["additionalProperties"], false);
    assert_eq!(
        schemas["EventIn"]["required"],
        serde_json::json!(["channelName", "title"])
    );
    assert_eq!(
        schemas["EventIn"]["properties"]["userId"]["type"],
        serde_json::json!(["string", "null"])
    );
    assert_eq!(schemas["EventIn"]["properties"]["icon"]["format"], "emoji");
    let success = doc["paths"]["/v1/events"]["post"]["responses"]["201"]["content"]
        .as_object()
        .expect("content")
        .values()
        .next()
        .expect("a media type")["schema"]["$ref"]
        .as_str()
        .expect("a schema reference")
        .rsplit('/')
        .next()
        .expect("a name")
        .to_owned();
    for field in ["success", "data", "requestId"] {
        assert!(
            schemas[&success]["properties"][field].is_object(),
            "success envelope has {field}"
        );
    }
    for route in ["/healthz", "/readyz"] {
        assert_eq!(
            doc["paths"][route]["get"]["security"],
            serde_json::json!([])
        );
    }
    assert!(doc["components"]["responses"]["NotFound"].is_object());
    assert!(doc["components"]["responses"]["MethodNotAllowed"].is_object());
}

/// A validator that knows only standard JSON Schema, as a client or a fuzzer
/// reading the document would: the custom `format: emoji` means nothing to it.
fn client_validator(doc: &Value, schema: Value) -> jsonschema::Validator {
    let root = json!({ "allOf": [schema], "components": doc["components"] });
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&root)
        .expect("the published schema compiles")
}

/// Whatever the service refuses, the published schema refuses too, and the
/// other way round: the document is the contract (icons, device tokens,
/// `Idempotency-Key`, path ids).
#[tokio::test]
async fn the_published_schemas_state_the_rules_the_service_enforces() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = app.new_key().await;
    let doc = document(&app).await;

    let event_in = client_validator(&doc, json!({ "$ref": "#/components/schemas/EventIn" }));
    for icon in [
        "🚀",
        "👍🏽",
        "🏳️‍🌈",
        "🇫🇷",
        "❤",
        "1️⃣",
        "ab",
        "",
        "🚀🚀",
        ":rocket:",
        "a",
        "🇫",
        "1",
    ] {
        let body = json!({ "channelName": "c", "title": "t", "icon": icon });
        let served = app.post_event(&key, &body).await.status();
        assert_eq!(
            event_in.is_valid(&body),
            served == 201,
            "icon {icon:?}: the service answered {served}"
        );
    }

    // The priority: a documented enum with an example, enforced as stated.
    assert_eq!(
        doc.pointer("/components/schemas/EventPriority/enum"),
        Some(&json!(["low", "normal", "high"])),
    );
    assert_eq!(
        doc.pointer("/components/schemas/EventIn/properties/priority/examples"),
        Some(&json!(["high"])),
    );
    assert!(
        doc.pointer("/components/schemas/EventOut/required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.contains(&json!("priority"))),
        "every event shows its priority"
    );
    for priority in [json!("low"), json!("high"), json!("urgent"), json!(1)] {
        let body = json!({ "channelName": "c", "title": "t", "priority": priority });
        let served = app.post_event(&key, &body).await.status();
        assert_eq!(
            event_in.is_valid(&body),
            served == 201,
            "priority {priority}: the service answered {served}"
        );
    }

    let device_in = client_validator(&doc, json!({ "$ref": "#/components/schemas/DeviceIn" }));
    for token in [
        "ab".repeat(16),
        "AB".repeat(40),
        "a".repeat(31),
        "xyz".repeat(12),
    ] {
        let body = json!({ "token": token, "environment": "sandbox" });
        let served = app.post("/v1/devices", &key, &body).await.status();
        assert_eq!(
            device_in.is_valid(&body),
            served.is_success(),
            "token {token:?}: the service answered {served}"
        );
    }

    let parameter = |path: &str, method: &str, name: &str| {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .unwrap_or_else(|| panic!("{method} {path} documents {name}"))["schema"]
            .clone()
    };
    let body = json!({ "channelName": "c", "title": "t" });
    for idempotency_key in ["order-1", "a b", &"k".repeat(255), &"k".repeat(256), "clé"] {
        let served = app
            .post_idempotent("/v1/events", &key, idempotency_key, &body)
            .await
            .status();
        for path in ["/v1/events", "/v1/identify", "/v1/devices"] {
            let schema = client_validator(&doc, parameter(path, "post", "Idempotency-Key"));
            assert_eq!(
                schema.is_valid(&json!(idempotency_key)),
                served == 201,
                "{path} Idempotency-Key {idempotency_key:?}: the service answered {served}"
            );
        }
    }

    // Ids are UUIDs: anything else names nothing (404, as documented).
    for (path, method) in [("/v1/events/{id}", "get"), ("/v1/devices/{id}", "delete")] {
        let schema = client_validator(&doc, parameter(path, method, "id"));
        assert!(schema.is_valid(&json!(uuid::Uuid::new_v4().to_string())));
        assert!(!schema.is_valid(&json!("not-a-uuid")), "{method} {path}");
    }
}

/// A delivery's `state` is a documented enum, not free text: clients can
/// switch on it, and what the service answers is one of its values.
#[tokio::test]
async fn a_deliverys_state_is_one_of_the_documented_values() {
    let pipeline = tocsin_tests::pipeline::Pipeline::embedded(StoreKind::Sqlite).await;
    let doc = document(&pipeline.app).await;
    assert_eq!(
        doc.pointer("/components/schemas/DeliveryStateOut/enum"),
        Some(&json!([
            "sending",
            "retrying",
            "delivered",
            "failed",
            "filtered",
            "held"
        ])),
    );
    let delivery = client_validator(&doc, json!({ "$ref": "#/components/schemas/DeliveryOut" }));
    pipeline
        .register(&tocsin_tests::pipeline::token(1), None)
        .await;
    let event = pipeline.event("c", "t", true).await;
    let id = event["id"].as_str().expect("an id");
    let settled = pipeline.settled(id, "delivered").await;
    let answered = &settled["notification"]["deliveries"][0];
    assert_eq!(answered["state"], "delivered", "{settled}");
    assert!(delivery.is_valid(answered), "{answered}");
    let mut unknown = answered.clone();
    unknown["state"] = json!("lost");
    assert!(!delivery.is_valid(&unknown), "a state outside the enum");
    pipeline.finish().await;
}

/// Every operation shows how to call it with `@tocsin/client` (the docs page
/// picks these first), and the call is a method the client really has: a
/// renamed or removed method fails here, not in a reader's editor.
#[tokio::test]
async fn every_operation_has_a_tocsin_client_sample_calling_a_real_method() {
    let doc = document(&TestApp::spawn(StoreKind::Sqlite).await).await;
    let client = tocsin_tests::workspace_root().join("clients/typescript/src");
    let read = |file: &str| {
        std::fs::read_to_string(client.join(file))
            .unwrap_or_else(|e| panic!("reading the client's {file}: {e}"))
    };
    let tocsin = read("client.ts");
    let import = r#"import { Tocsin } from "@tocsin/client";"#;
    for (name, source) in code_samples(&doc, "@tocsin/client", "TypeScript", import) {
        // The call is the last `tocsin.` of the sample, awaited or
        // iterated (`for await (const event of tocsin.events.stream(`).
        let call = source
            .rsplit_once("tocsin.")
            .filter(|(before, _)| before.contains("await"))
            .and_then(|(_, call)| call.split_once('('))
            .map(|(call, _)| call)
            .unwrap_or_else(|| panic!("{name}: no awaited `tocsin.<method>(` in {source}"));
        let exists = match call.split_once('.') {
            // `tocsin.identify`, `tocsin.request`: a method of the client.
            None => {
                tocsin.contains(&format!("async {call}("))
                    || tocsin.contains(&format!("async {call}<"))
            }
            // `tocsin.events.create`: a method of the resource class the
            // client's property holds.
            Some((property, method)) => tocsin
                .split_once(&format!("readonly {property}: "))
                .and_then(|(_, rest)| rest.split_once(';'))
                .is_some_and(|(class, _)| {
                    let resource = read(&format!("resources/{property}.ts"));
                    // `async get(`, or `list(` returning a promise or
                    // an async iterable.
                    resource.contains(&format!("export class {class} "))
                        && (resource.contains(&format!("async {method}("))
                            || resource.contains(&format!("\n  {method}(")))
                }),
        };
        assert!(exists, "{name}: the client has no method `tocsin.{call}`");
    }
}

/// The source of every operation's code sample labelled `label`, by
/// `"<method> <path>"`, after checking that each operation has one, in
/// `lang`, and that it imports the client with `import`.
fn code_samples(doc: &Value, label: &str, lang: &str, import: &str) -> Vec<(String, String)> {
    let mut samples = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let name = format!("{method} {path}");
            let sample = op["x-codeSamples"]
                .as_array()
                .and_then(|samples| samples.iter().find(|s| s["label"] == label))
                .unwrap_or_else(|| panic!("{name} has no {label} code sample"));
            assert_eq!(sample["lang"], lang, "{name}");
            let source = sample["source"].as_str().expect("a source");
            assert!(source.contains(import), "{name}: {source}");
            samples.push((name, source.to_owned()));
        }
    }
    assert!(
        samples.len() >= 8,
        "only {} operations documented",
        samples.len()
    );
    samples
}

/// Every operation shows how to call it with the Python client, `tocsin`, and
/// the call is a method the sync client really has (`Tocsin`, in
/// `clients/python/src/tocsin/_client.py`, and its resource classes): a
/// renamed or removed method fails here, not in a reader's editor.
#[tokio::test]
async fn every_operation_has_a_python_client_sample_calling_a_real_method() {
    let doc = document(&TestApp::spawn(StoreKind::Sqlite).await).await;
    let package = tocsin_tests::workspace_root().join("clients/python/src/tocsin");
    let read = |file: &str| {
        std::fs::read_to_string(package.join(file))
            .unwrap_or_else(|e| panic!("reading the Python client's {file}: {e}"))
    };
    // The text of one class: from its `class` line to the next top-level one.
    let class_body = |source: &str, class: &str| -> Option<String> {
        let (_, rest) = source.split_once(&format!("\nclass {class}("))?;
        Some(rest.split("\nclass ").next().unwrap_or(rest).to_owned())
    };
    let client = read("_client.py");
    let tocsin = class_body(&client, "Tocsin").expect("class Tocsin in _client.py");
    let import = "from tocsin import Tocsin\n";
    for (name, source) in code_samples(&doc, "tocsin (Python)", "Python", import) {
        // The call is the last `client.` of the sample, after the client
        // is built: `result = client.events.create(` or
        // `with client.events.stream(`.
        let call = source
            .rsplit_once("client.")
            .filter(|(before, _)| before.contains("client = Tocsin("))
            .and_then(|(_, call)| call.split_once('('))
            .map(|(call, _)| call)
            .unwrap_or_else(|| panic!("{name}: no `client.<method>(` call in {source}"));
        let exists = match call.split_once('.') {
            // `client.identify`, `client.request`: a method of Tocsin.
            None => tocsin.contains(&format!("\n    def {call}(")),
            // `client.events.create`: a method of the resource class
            // Tocsin's property returns (`def events(self) -> Events:`).
            Some((attribute, method)) => tocsin
                .split_once(&format!("\n    def {attribute}(self) -> "))
                .and_then(|(_, rest)| rest.split_once(':'))
                .and_then(|(class, _)| {
                    class_body(&read(&format!("resources/{attribute}.py")), class)
                })
                .is_some_and(|resource| resource.contains(&format!("\n    def {method}("))),
        };
        assert!(
            exists,
            "{name}: the Python client has no method `client.{call}`"
        );
    }
}

/// Each API operation says which key scope it needs and documents the 403 a
/// key without it gets; an operation that needs no scope has no 403.
#[tokio::test]
async fn every_api_operation_names_its_scope_and_documents_its_403() {
    let doc = document(&TestApp::spawn(StoreKind::Sqlite).await).await;
    let needs = |method: &str, path: &str| match (method, path) {
        ("post", "/v1/events" | "/v1/identify" | "/v1/insights")
        | ("patch", "/v1/insights")
        | ("delete", "/v1/insights/{title}") => Some("events:write"),
        (
            "get",
            "/v1/events" | "/v1/events/{id}" | "/v1/channels" | "/v1/users" | "/v1/users/{userId}"
            | "/v1/stream" | "/v1/stats/events" | "/v1/insights",
        ) => Some("events:read"),
        ("post", "/v1/devices")
        | ("patch", "/v1/devices/{id}")
        | ("delete", "/v1/devices/{id}") => Some("devices:write"),
        ("get", "/v1/devices") => Some("devices:read"),
        _ => None,
    };
    let mut scoped = 0;
    for (method, path) in tocsin_tests::contract::operations(&doc) {
        let op = &doc["paths"][&path][&method];
        let forbidden = &op["responses"]["403"];
        let Some(scope) = needs(&method, &path) else {
            let keyless = op["security"].as_array().is_some_and(Vec::is_empty);
            assert!(
                !path.starts_with("/v1") || keyless,
                "{method} {path} is an API operation with no scope"
            );
            assert!(forbidden.is_null(), "{method} {path} documents a 403");
            continue;
        };
        scoped += 1;
        let description = op["description"].as_str().unwrap_or_default();
        assert!(
            description.contains(&format!("Needs the `{scope}` scope.")),
            "{method} {path}: {description:?}"
        );
        assert_eq!(
            forbidden["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorEnvelope",
            "{method} {path}"
        );
        assert!(
            forbidden["description"]
                .as_str()
                .is_some_and(|d| d.contains(scope)),
            "{method} {path}: {forbidden}"
        );
        assert!(forbidden["headers"]["X-RateLimit-Remaining"].is_object());
    }
    assert!(scoped >= 5, "the API's operations were found: {scoped}");
}

/// Every request body has an example (the docs' "Test Request" starts from
/// it, and schemathesis's examples phase sends it), and each example of an
/// API operation is a body the service accepts as it stands.
#[tokio::test]
async fn every_request_body_has_an_example_the_service_accepts() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let doc = document(&app).await;
    let (key, _) = app.new_key().await;
    let mut sent = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let Some(reference) = op
                .pointer("/requestBody/content/application~1json/schema/$ref")
                .and_then(Value::as_str)
            else {
                continue;
            };
            let schema = doc
                .pointer(reference.trim_start_matches('#'))
                .unwrap_or_else(|| panic!("{reference} is defined"));
            let examples = schema["examples"]
                .as_array()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| panic!("{method} {path}: {reference} has no example"));
            if !path.starts_with("/v1/") || path.contains('{') {
                continue;
            }
            for example in examples {
                let method = method.to_uppercase().parse().expect("a method");
                let reply = app.call(method, path, &key, Some(example)).await;
                assert!(
                    (200..300).contains(&reply.status),
                    "{path} refused its own example {example}: {}",
                    reply.body
                );
                sent += 1;
            }
        }
    }
    // Events, identify and devices at least.
    assert!(sent >= 3, "only {sent} examples sent");
}

/// The links from each creating operation name an operation and a parameter
/// the document has, and the pointer they follow finds an id in a real
/// answer: what a stateful tester chains works.
#[tokio::test]
async fn every_link_leads_to_a_real_operation_with_a_real_value() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let doc = document(&app).await;
    let mut operations = std::collections::HashMap::new();
    for item in doc["paths"].as_object().expect("paths").values() {
        for op in item.as_object().expect("a path item").values() {
            if let Some(id) = op["operationId"].as_str() {
                operations.insert(id.to_owned(), op.clone());
            }
        }
    }
    let mut links = 0;
    for op in operations.values() {
        for response in op["responses"].as_object().expect("responses").values() {
            for (name, link) in response["links"].as_object().into_iter().flatten() {
                links += 1;
                let target = &operations[link["operationId"].as_str().expect("an operationId")];
                for parameter in link["parameters"].as_object().expect("parameters").keys() {
                    assert!(
                        target["parameters"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|p| p["name"] == parameter.as_str()),
                        "link {name}: {parameter} is not a parameter of its operation"
                    );
                }
            }
        }
    }
    assert!(links >= 10, "only {links} links");
    // The pointers find ids in real answers (the API's; the admin ones
    // follow the same `/data/id` shape).
    let (key, _) = app.new_key().await;
    let event = app
        .call(
            reqwest::Method::POST,
            "/v1/events",
            &key,
            Some(&json!({ "channelName": "c", "title": "t" })),
        )
        .await;
    let link = &operations["createEvent"]["responses"]["201"]["links"]["getEvent"];
    let pointer = link["parameters"]["id"]
        .as_str()
        .and_then(|p| p.strip_prefix("$response.body#"))
        .expect("a body pointer");
    let id = event
        .body
        .pointer(pointer)
        .and_then(Value::as_str)
        .expect("an id");
    let fetched = app
        .call(
            reqwest::Method::GET,
            &format!("/v1/events/{id}"),
            &key,
            None,
        )
        .await;
    assert_eq!(fetched.status, 200, "{}", fetched.body);
    let identified = app
        .call(
            reqwest::Method::POST,
            "/v1/identify",
            &key,
            Some(&json!({ "user_id": "u1", "properties": { "plan": "pro" } })),
        )
        .await;
    let pointer =
        operations["identify"]["responses"]["200"]["links"]["getUser"]["parameters"]["userId"]
            .as_str()
            .and_then(|p| p.strip_prefix("$response.body#"))
            .expect("a body pointer");
    assert_eq!(
        identified.body.pointer(pointer).and_then(Value::as_str),
        Some("u1"),
        "{}",
        identified.body
    );
}

//! Protocol edges, with the published document as the contract: an
//! undeclared method gets 405 with `Allow`, and every status an operation
//! answers (404 for an unknown id, the idempotency statuses, 400, 401, 413,
//! 415, 429) is listed for it with the error envelope and its headers.
//! Admin routes are called with an admin token, the others with an API key.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};
use tocsin_tests::{
    Reply, StoreKind, TestApp,
    contract::{METHODS, assert_documented, concrete, declared_methods, document, operations},
    for_each_store,
};
use uuid::Uuid;

/// Routes served beside the documented API; each answers GET only.
const UNDOCUMENTED_ROUTES: [&str; 5] = ["/openapi.json", "/docs", "/metrics", "/", "/feed/{asset}"];

/// The credential `path` takes: an admin token under `/admin`, else the key.
fn credential<'a>(path: &str, key: &'a str, admin: &'a str) -> &'a str {
    if path.starts_with("/admin/") {
        admin
    } else {
        key
    }
}

async fn undeclared_methods_get_405_with_allow_and_the_envelope(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let admin = app.create_admin("ops").await;
    let doc = document(&app).await;
    let mut routes: Vec<(String, Vec<String>)> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .map(|template| (template.clone(), declared_methods(&doc, template)))
        .collect();
    routes.extend(UNDOCUMENTED_ROUTES.map(|r| (r.to_owned(), vec!["get".to_owned()])));
    let mut checked = 0;
    for (template, declared) in routes {
        let path = concrete(&template, &Uuid::new_v4().to_string());
        let mut allowed: BTreeSet<String> = declared.iter().map(|m| m.to_uppercase()).collect();
        // A GET route answers HEAD too (the same response without a body).
        if allowed.contains("GET") {
            allowed.insert("HEAD".into());
        }
        for method in METHODS.map(str::to_uppercase) {
            if allowed.contains(&method) {
                continue;
            }
            let response = app
                .client
                .request(
                    Method::from_bytes(method.as_bytes()).expect("a method"),
                    app.url(&path),
                )
                .bearer_auth(credential(&path, &key, &admin))
                .send()
                .await
                .expect("request sent");
            let what = format!("{method} {path}");
            assert_eq!(response.status(), 405, "{what}");
            let allow: BTreeSet<String> = response
                .headers()
                .get("allow")
                .unwrap_or_else(|| panic!("{what}: 405 without Allow"))
                .to_str()
                .expect("ASCII")
                .split(',')
                .map(|m| m.trim().to_owned())
                .collect();
            assert_eq!(allow, allowed, "{what}: Allow lists the route's methods");
            if method == "HEAD" {
                assert!(response.headers().get("x-request-id").is_some(), "{what}");
            } else {
                let reply = Reply::of(response).await;
                reply.assert_error_envelope(405);
                reply.assert_rate_limit_headers();
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 40,
        "every route was tried with its undeclared methods"
    );
    let allow_documented = &doc["components"]["responses"]["MethodNotAllowed"]["headers"]["Allow"];
    assert_eq!(allow_documented["required"], true);
}

async fn unknown_ids_get_a_documented_404(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let (other_key, _) = app.new_key().await;
    let admin = app.create_admin("ops").await;
    let doc = document(&app).await;
    // Another project's event is as unknown to this key as a made-up id.
    let created = Reply::of(
        app.post_event(&other_key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await;
    assert_eq!(created.status, 201);
    let foreign = created.body["data"]["id"].as_str().expect("id").to_owned();
    let mut checked = BTreeSet::new();
    for (method, template) in operations(&doc) {
        if !template.contains('{') {
            continue;
        }
        for id in [
            Uuid::new_v4().to_string(),
            "not-a-uuid".into(),
            foreign.clone(),
        ] {
            let path = concrete(&template, &id);
            let mut request = app
                .client
                .request(
                    Method::from_bytes(method.to_uppercase().as_bytes()).expect("a method"),
                    app.url(&path),
                )
                .bearer_auth(credential(&path, &key, &admin));
            if doc["paths"][&template][&method]["requestBody"].is_object() {
                request = request.json(&sample_bodies(&method, &template).0);
            }
            let response = request.send().await.expect("request sent");
            let reply = Reply::of(response).await;
            assert_eq!(reply.status, 404, "{method} {path}: {}", reply.body);
            assert_documented(&doc, &method, &template, &reply);
        }
        checked.insert(format!("{method} {template}"));
    }
    assert_eq!(
        checked,
        BTreeSet::from([
            "get /v1/events/{id}".into(),
            "get /v1/users/{userId}".into(),
            "delete /v1/devices/{id}".into(),
            "delete /v1/insights/{title}".into(),
            "patch /admin/v1/organizations/{orgId}".into(),
            "get /admin/v1/organizations/{orgId}/projects".into(),
            "post /admin/v1/organizations/{orgId}/projects".into(),
            "patch /admin/v1/projects/{projectId}".into(),
            "patch /v1/devices/{id}".into(),
            "get /admin/v1/projects/{projectId}/keys".into(),
            "post /admin/v1/projects/{projectId}/keys".into(),
            "get /admin/v1/projects/{projectId}/devices".into(),
            "delete /admin/v1/projects/{projectId}/devices/{deviceId}".into(),
            "post /admin/v1/keys/{keyId}/revoke".into(),
            "post /admin/v1/keys/{keyId}/rotate".into(),
            "post /admin/v1/projects/{projectId}/destinations".into(),
            "get /admin/v1/projects/{projectId}/destinations".into(),
            "get /admin/v1/projects/{projectId}/destinations/{destinationId}".into(),
            "patch /admin/v1/projects/{projectId}/destinations/{destinationId}".into(),
            "delete /admin/v1/projects/{projectId}/destinations/{destinationId}".into(),
            "post /admin/v1/projects/{projectId}/destinations/{destinationId}/test".into(),
        ]),
    );
}

/// A valid body for each operation that takes one, and a different one.
fn sample_bodies(method: &str, template: &str) -> (Value, Value) {
    match (method, template) {
        ("post", "/v1/insights") => {
            return (
                json!({ "title": "a", "value": 1 }),
                json!({ "title": "a", "value": 2 }),
            );
        }
        ("patch", "/v1/insights") => {
            return (
                json!({ "title": "a", "value": { "$inc": 1 } }),
                json!({ "title": "a", "value": { "$inc": 2 } }),
            );
        }
        _ => {}
    }
    match template {
        "/v1/events" => (
            json!({ "channelName": "c", "title": "first" }),
            json!({ "channelName": "c", "title": "second" }),
        ),
        "/v1/identify" => (json!({ "user_id": "u1" }), json!({ "user_id": "u2" })),
        "/v1/devices" => (
            json!({ "token": "ab".repeat(32), "environment": "sandbox" }),
            json!({ "token": "cd".repeat(32), "environment": "sandbox" }),
        ),
        "/v1/devices/{id}" => (
            json!({ "minPriority": "normal" }),
            json!({ "minPriority": "high" }),
        ),
        "/admin/v1/organizations"
        | "/admin/v1/organizations/{orgId}"
        | "/admin/v1/organizations/{orgId}/projects"
        | "/admin/v1/projects/{projectId}" => (json!({ "name": "a" }), json!({ "name": "b" })),
        "/admin/v1/projects/{projectId}/keys" => (json!({ "name": "a" }), json!({ "name": "b" })),
        "/admin/v1/keys/{keyId}/rotate" => (
            json!({ "gracePeriodSeconds": 1 }),
            json!({ "gracePeriodSeconds": 2 }),
        ),
        "/admin/v1/projects/{projectId}/destinations" => (
            json!({ "kind": "email", "name": "a", "settings": { "to": ["a@example.com"] } }),
            json!({ "kind": "email", "name": "b", "settings": { "to": ["b@example.com"] } }),
        ),
        "/admin/v1/projects/{projectId}/destinations/{destinationId}" => {
            (json!({ "name": "a" }), json!({ "name": "b" }))
        }
        other => panic!("add sample bodies for {other}"),
    }
}

async fn every_status_an_operation_answers_is_documented(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let doc = document(&app).await;
    let limit = app.config.max_body_bytes;
    let admin = app.create_admin("ops").await;
    for (method, template) in operations(&doc) {
        let op = &doc["paths"][&template][&method];
        let path = concrete(&template, &Uuid::new_v4().to_string());
        let http_method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("a method");
        // Under /v1 every operation takes a key, except the keyless ones the
        // document says need none (`security: []`: the Web Push key).
        let keyless = op["security"].as_array().is_some_and(Vec::is_empty);
        let authenticated =
            (template.starts_with("/v1/") && !keyless) || template.starts_with("/admin/v1/");
        let api = template.starts_with("/v1/");
        let takes_body = op["requestBody"].is_object();
        let takes_key = op["parameters"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key"));
        // An increment is not idempotent by itself either.
        let increment = method == "patch" && template == "/v1/insights";
        assert_eq!(
            takes_key,
            api && (method == "post" || increment),
            "{method} {template}: every POST under /v1 and the increment take Idempotency-Key, \
             nothing else does"
        );
        let (key, _) = app.new_key().await;
        let request = || {
            let builder = app.client.request(http_method.clone(), app.url(&path));
            if authenticated {
                builder.bearer_auth(credential(&path, &key, &admin))
            } else {
                builder
            }
        };
        let mut expected: Vec<(u16, reqwest::RequestBuilder)> = vec![(
            413,
            request()
                .header("content-type", "application/json")
                .body(vec![b' '; limit + 1]),
        )];
        if authenticated {
            expected.push((401, app.client.request(http_method.clone(), app.url(&path))));
        }
        if takes_body {
            let (valid, _) = sample_bodies(&method, &template);
            expected.push((400, request().json(&json!({ "unknown": true }))));
            expected.push((
                415,
                request()
                    .header("content-type", "text/plain")
                    .body(valid.to_string()),
            ));
        }
        if takes_key {
            let (first, second) = sample_bodies(&method, &template);
            expected.push((
                400,
                request()
                    .header("Idempotency-Key", "k".repeat(256))
                    .json(&first),
            ));
            let reused = Uuid::new_v4().to_string();
            let original = request().header("Idempotency-Key", &reused).json(&first);
            let status = original.send().await.expect("sent").status();
            assert!(status.is_success(), "{method} {template}: {status}");
            expected.push((
                422,
                request().header("Idempotency-Key", &reused).json(&second),
            ));
            for status in ["409", "422"] {
                assert!(
                    op["responses"][status].is_object(),
                    "{method} {template} documents {status}"
                );
            }
            assert!(op["responses"]["409"]["headers"]["Retry-After"].is_object());
        }
        for (status, builder) in expected {
            let reply = Reply::of(
                builder
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{status} from {method} {template}: {e}")),
            )
            .await;
            assert_eq!(reply.status, status, "{method} {template}: {}", reply.body);
            assert_documented(&doc, &method, &template, &reply);
            if status == 413 {
                // The rest of the body is left unread, so the connection
                // closes; the client must be told, or it reuses it.
                assert_eq!(
                    reply.header("connection"),
                    Some("close"),
                    "{method} {template}"
                );
            }
        }
        if api && !keyless {
            // A key allowed one request a minute: the second gets 429.
            let limited = app
                .create_key("acme", &format!("p{}", Uuid::new_v4().simple()), Some(1))
                .await;
            let mut responses = Vec::new();
            for _ in 0..2 {
                let mut builder = app
                    .client
                    .request(http_method.clone(), app.url(&path))
                    .bearer_auth(&limited);
                if takes_body {
                    builder = builder.json(&sample_bodies(&method, &template).0);
                }
                // Kept unread: the first may be a stream that never ends.
                responses.push(builder.send().await.expect("sent"));
            }
            let reply = Reply::of(responses.pop().expect("a response")).await;
            assert_eq!(reply.status, 429, "{method} {template}");
            assert_documented(&doc, &method, &template, &reply);
        }
        for status in ["429", "500", "503"] {
            assert!(
                op["responses"][status].is_object(),
                "{method} {template} documents {status}"
            );
        }
    }
}

for_each_store!(
    undeclared_methods_get_405_with_allow_and_the_envelope,
    unknown_ids_get_a_documented_404,
    every_status_an_operation_answers_is_documented,
);

//! API key scopes: a key without the scope an operation needs gets a 403
//! envelope, on every route of that scope and no other; a 403 counts
//! against the key's quota and never as a failed authentication; keys
//! stored before scopes existed keep full access.

use common::{
    keys::{display_prefix, generate_secret, hash_secret},
    store::{KeyScope, StoreConfig},
};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{
    Reply, StoreKind, TestApp, TestConfig,
    contract::{assert_documented, document},
    for_each_store,
};
use uuid::Uuid;

/// Every API operation and the scope it needs, as the issue lists them.
/// Some are built on other branches; a refusal does not need the route to
/// exist, and once it does, its success is checked too.
const OPERATIONS: [(Method, &str, KeyScope); 12] = [
    (Method::POST, "/v1/events", KeyScope::EventsWrite),
    (Method::POST, "/v1/identify", KeyScope::EventsWrite),
    (Method::GET, "/v1/events", KeyScope::EventsRead),
    (Method::GET, "/v1/events/{id}", KeyScope::EventsRead),
    (Method::GET, "/v1/channels", KeyScope::EventsRead),
    (Method::GET, "/v1/users", KeyScope::EventsRead),
    (Method::GET, "/v1/users/{userId}", KeyScope::EventsRead),
    (Method::GET, "/v1/stream", KeyScope::EventsRead),
    (Method::GET, "/v1/stats/events", KeyScope::EventsRead),
    (Method::POST, "/v1/devices", KeyScope::DevicesWrite),
    (Method::DELETE, "/v1/devices/{id}", KeyScope::DevicesWrite),
    (Method::GET, "/v1/devices", KeyScope::DevicesRead),
];

const USER: &str = "user_7";

/// A project with something in it for every operation to find: an event,
/// a user, and a fresh device for each deletion.
struct Project {
    name: String,
    /// A key with every scope, to set things up and look at them.
    full: String,
    event_id: String,
}

impl Project {
    async fn new(app: &TestApp) -> Self {
        let name = format!("p{}", Uuid::new_v4().simple());
        let full = app.create_key("acme", &name, None).await;
        let event = Reply::of(app.post_event(&full, &event_body()).await).await;
        assert_eq!(event.status, 201, "{}", event.body);
        let identified = app
            .post("/v1/identify", &full, &json!({ "user_id": USER }))
            .await;
        assert_eq!(identified.status(), 200);
        Self {
            name,
            full,
            event_id: event.body["data"]["id"]
                .as_str()
                .expect("event id")
                .to_owned(),
        }
    }

    fn scope(&self) -> common::store::Scope {
        common::store::Scope::new("acme", self.name.clone())
    }

    async fn device_count(&self, app: &TestApp) -> usize {
        app.store
            .list_devices(&self.scope())
            .await
            .expect("devices listed")
            .len()
    }

    /// Registers a device with the full key and returns its id.
    async fn register_device(&self, app: &TestApp) -> String {
        let created = Reply::of(app.post("/v1/devices", &self.full, &device_body()).await).await;
        assert_eq!(created.status, 201, "{}", created.body);
        created.body["data"]["id"]
            .as_str()
            .expect("device id")
            .to_owned()
    }

    /// Sends `method` `template` with `key`, filling in ids of things that
    /// exist (a device it may delete is registered first).
    async fn send(&self, app: &TestApp, method: &Method, template: &str, key: &str) -> Response {
        let path = match template {
            "/v1/events/{id}" => format!("/v1/events/{}", self.event_id),
            "/v1/users/{userId}" => format!("/v1/users/{USER}"),
            "/v1/devices/{id}" => format!("/v1/devices/{}", self.register_device(app).await),
            plain => plain.to_owned(),
        };
        let request = app
            .client
            .request(method.clone(), app.url(&path))
            .bearer_auth(key);
        let request = match template {
            "/v1/events" if method == Method::POST => request.json(&event_body()),
            "/v1/identify" => request.json(&json!({ "user_id": USER })),
            "/v1/devices" if method == Method::POST => request.json(&device_body()),
            _ => request,
        };
        request.send().await.expect("request sent")
    }
}

fn event_body() -> Value {
    json!({ "channelName": "payments", "title": "Payment failed", "notify": false })
}

/// A device with a token of its own.
fn device_body() -> Value {
    let token = format!(
        "{:032x}{:032x}",
        Uuid::new_v4().as_u128(),
        Uuid::new_v4().as_u128()
    );
    json!({ "token": token, "environment": "sandbox" })
}

fn is_documented(doc: &Value, method: &Method, template: &str) -> bool {
    doc["paths"][template][method.as_str().to_lowercase()].is_object()
}

/// Asserts that `key` may do `method` `template`: never 401 or 403, and a
/// success once the route exists. Only the status is read: the stream's
/// body never ends.
async fn assert_allowed(
    app: &TestApp,
    doc: &Value,
    project: &Project,
    (method, template): (&Method, &str),
    key: &str,
) {
    let status = project.send(app, method, template, key).await.status();
    assert!(
        status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
        "{method} {template}: {status}"
    );
    if is_documented(doc, method, template) {
        assert!(status.is_success(), "{method} {template}: {status}");
    }
}

/// For each scope, a key with every other one: refused with 403 on each
/// operation of that scope, with nothing done, and let through on the rest.
async fn a_key_without_a_scope_is_refused_exactly_the_operations_of_that_scope(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let doc = document(&app).await;
    let project = Project::new(&app).await;
    for lacking in KeyScope::ALL {
        let others: Vec<KeyScope> = KeyScope::ALL
            .into_iter()
            .filter(|s| *s != lacking)
            .collect();
        let key = app
            .create_key_with_scopes("acme", &project.name, &others)
            .await;
        for (method, template, needs) in &OPERATIONS {
            if *needs != lacking {
                assert_allowed(&app, &doc, &project, (method, template), &key).await;
                continue;
            }
            let events_before = app
                .store
                .events_stored(&project.scope())
                .await
                .expect("count");
            let devices_before = project.device_count(&app).await;
            let reply = Reply::of(project.send(&app, method, template, &key).await).await;
            reply.assert_error_envelope(403);
            reply.assert_rate_limit_headers();
            assert_eq!(
                reply.body["error"],
                format!("this API key lacks the {} scope", lacking.as_str()),
                "{method} {template}"
            );
            if is_documented(&doc, method, template) {
                assert_documented(&doc, &method.as_str().to_lowercase(), template, &reply);
            }
            // Refused means not done: no event recorded, no device
            // registered, the device to delete still there.
            // (A deletion's target was registered for it.)
            let registered_for_it = usize::from(*method == Method::DELETE);
            assert_eq!(
                project.device_count(&app).await,
                devices_before + registered_for_it,
                "{method} {template}"
            );
            assert_eq!(
                app.store
                    .events_stored(&project.scope())
                    .await
                    .expect("count"),
                events_before,
                "{method} {template}"
            );
        }
    }
    // HEAD is GET without a body: it needs the same scope.
    let phone = app
        .create_key_with_scopes("acme", &project.name, &[KeyScope::DevicesWrite])
        .await;
    let head = app
        .client
        .head(app.url("/v1/devices"))
        .bearer_auth(&phone)
        .send()
        .await
        .expect("sent");
    assert_eq!(head.status(), StatusCode::FORBIDDEN);
    app.stop().await;
}

/// The key a phone or a browser carries: it registers and removes its
/// device, and reads nothing, however the path is spelled.
async fn a_device_only_key_reads_nothing_however_the_path_is_spelled(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let doc = document(&app).await;
    let project = Project::new(&app).await;
    let phone = app
        .create_key_with_scopes("acme", &project.name, &[KeyScope::DevicesWrite])
        .await;
    for (method, template) in [
        (Method::POST, "/v1/devices"),
        (Method::DELETE, "/v1/devices/{id}"),
    ] {
        assert_allowed(&app, &doc, &project, (&method, template), &phone).await;
    }
    let event = format!("/v1/events/{}", project.event_id);
    for path in [
        "/v1/devices/".to_owned(),
        "//v1/devices".to_owned(),
        "/v1//devices".to_owned(),
        "/v1/%64evices".to_owned(),
        "/v1/devices?limit=1".to_owned(),
        format!("{event}/"),
        event.replace("/events/", "/%65vents/"),
        event.to_uppercase(),
    ] {
        let status = app.get_as(&path, &phone).await.status();
        assert!(
            !status.is_success(),
            "GET {path} answered {status} to a devices:write key"
        );
    }
    let posted = app
        .client
        .post(app.url("/v1/%65vents"))
        .bearer_auth(&phone)
        .json(&event_body())
        .send()
        .await
        .expect("sent")
        .status();
    assert!(!posted.is_success(), "POST /v1/%65vents: {posted}");
    assert_eq!(
        app.store
            .events_stored(&project.scope())
            .await
            .expect("count"),
        1
    );
    app.stop().await;
}

/// A 403 comes from a known key: it takes from the key's quota, like any
/// request, and nothing from the address's failed-authentication quota.
async fn a_refusal_counts_against_the_key_not_as_a_failed_authentication(kind: StoreKind) {
    let mut test = TestConfig::new(kind);
    test.config.auth_failures_per_minute = 2.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let project = Project::new(&app).await;
    let phone = app
        .create_key_with_scopes("acme", &project.name, &[KeyScope::DevicesWrite])
        .await;
    for remaining in ["99", "98", "97", "96", "95"] {
        let refused = Reply::of(app.get_as("/v1/devices", &phone).await).await;
        refused.assert_error_envelope(403);
        assert_eq!(refused.header("x-ratelimit-limit"), Some("100"));
        assert_eq!(refused.header("x-ratelimit-remaining"), Some(remaining));
    }
    let registered = Reply::of(app.post("/v1/devices", &phone, &device_body()).await).await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    assert_eq!(registered.header("x-ratelimit-remaining"), Some("94"));
    // Five refusals, and the address may still fail authentication twice
    // before it is locked out.
    let wrong = generate_secret();
    for remaining in ["1", "0"] {
        let unknown = Reply::of(app.get_as("/v1/devices", &wrong).await).await;
        unknown.assert_error_envelope(401);
        assert_eq!(unknown.header("x-ratelimit-remaining"), Some(remaining));
    }
    app.stop().await;
}

/// Writes a key as a version without scopes stored it: a SQLite row with
/// no `scopes`, a MongoDB document without the field.
async fn store_key_without_scopes(app: &TestApp, project: &str) -> String {
    let secret = generate_secret();
    let id = Uuid::now_v7().to_string();
    match app.config.backend.store() {
        StoreConfig::Sqlite { path, .. } => {
            let conn = rusqlite::Connection::open(path).expect("sqlite opens");
            conn.execute(
                "INSERT INTO api_keys (id, name, org, project, hash, prefix, rate_limit, \
                 created_at, revoked_at) VALUES (?1, NULL, 'acme', ?2, ?3, ?4, NULL, \
                 '2025-06-01T00:00:00.000000Z', NULL)",
                rusqlite::params![id, project, hash_secret(&secret), display_prefix(&secret)],
            )
            .expect("old key written");
        }
        StoreConfig::Mongo { uri, database, .. } => {
            let client = mongodb::Client::with_uri_str(&uri)
                .await
                .expect("mongo client");
            let created_at = mongodb::bson::DateTime::now();
            client
                .database(&database)
                .collection::<mongodb::bson::Document>("api_keys")
                .insert_one(mongodb::bson::doc! {
                    "_id": id,
                    "name": null,
                    "org": "acme",
                    "project": project,
                    "hash": hash_secret(&secret),
                    "prefix": display_prefix(&secret),
                    "rateLimit": null,
                    "createdAt": created_at,
                    "revokedAt": null,
                })
                .await
                .expect("old key written");
        }
    }
    secret
}

async fn a_key_stored_before_scopes_existed_has_every_scope(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let doc = document(&app).await;
    let project = Project::new(&app).await;
    let old = store_key_without_scopes(&app, &project.name).await;
    let stored = app
        .store
        .find_api_key_by_hash(&hash_secret(&old))
        .await
        .expect("found")
        .expect("there");
    assert_eq!(stored.scopes, KeyScope::ALL.to_vec());
    for (method, template, _) in &OPERATIONS {
        assert_allowed(&app, &doc, &project, (method, template), &old).await;
    }
    app.stop().await;
}

for_each_store!(
    a_key_without_a_scope_is_refused_exactly_the_operations_of_that_scope,
    a_device_only_key_reads_nothing_however_the_path_is_spelled,
    a_refusal_counts_against_the_key_not_as_a_failed_authentication,
    a_key_stored_before_scopes_existed_has_every_scope,
);

//! The admin API end to end, on both stores: every route, its envelope and
//! its audit entry; names unique within their parent; renames that move no
//! data; keys made by the CLI's code path and by the API being the same
//! records; and no secret in the audit log.

use reqwest::Method;
use serde_json::{Value, json};
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store};

const EVENT: &str = r#"{"channelName":"c","title":"t"}"#;

async fn post_event(app: &TestApp, key: &str) -> u16 {
    app.client
        .post(app.url("/v1/events"))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(EVENT)
        .send()
        .await
        .expect("sent")
        .status()
        .as_u16()
}

fn ok(reply: &Reply, status: u16) -> Value {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["success"], json!(true), "{}", reply.body);
    reply.assert_request_id();
    reply.body["data"].clone()
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_owned()
}

/// The audit log, newest first, as the API lists it.
async fn audit(app: &TestApp, token: &str) -> Vec<Value> {
    let page = ok(
        &app.call(Method::GET, "/admin/v1/audit", token, None).await,
        200,
    );
    page["items"].as_array().expect("items").clone()
}

async fn every_admin_route_answers_and_is_audited(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let token = app.create_admin("Ada").await;
    let me = ok(
        &app.call(Method::GET, "/admin/v1/me", &token, None).await,
        200,
    );
    assert_eq!(me["name"], "Ada");

    let org = app
        .call(
            Method::POST,
            "/admin/v1/organizations",
            &token,
            Some(&json!({ "name": "acme" })),
        )
        .await;
    let org = ok(&org, 201);
    assert_eq!(
        (org["name"].clone(), org["projectCount"].clone()),
        (json!("acme"), json!(0))
    );
    let org_id = id(&org);
    let path = format!("/admin/v1/organizations/{org_id}");
    let renamed = app
        .call(
            Method::PATCH,
            &path,
            &token,
            Some(&json!({ "name": "acme-inc" })),
        )
        .await;
    assert_eq!(ok(&renamed, 200)["name"], "acme-inc");
    let orgs = ok(
        &app.call(Method::GET, "/admin/v1/organizations", &token, None)
            .await,
        200,
    );
    assert_eq!(orgs["items"][0]["id"], json!(org_id));

    let projects_path = format!("/admin/v1/organizations/{org_id}/projects");
    let project = app
        .call(
            Method::POST,
            &projects_path,
            &token,
            Some(&json!({ "name": "web" })),
        )
        .await;
    let project = ok(&project, 201);
    assert_eq!(project["organizationName"], "acme-inc");
    assert_eq!(project["organizationId"], json!(org_id));
    let project_id = id(&project);
    let listed = ok(
        &app.call(Method::GET, &projects_path, &token, None).await,
        200,
    );
    assert_eq!(listed["items"][0]["id"], json!(project_id));
    let all = ok(
        &app.call(Method::GET, "/admin/v1/projects", &token, None)
            .await,
        200,
    );
    assert_eq!(all["items"].as_array().expect("items").len(), 1);
    let project_path = format!("/admin/v1/projects/{project_id}");
    let renamed = app
        .call(
            Method::PATCH,
            &project_path,
            &token,
            Some(&json!({ "name": "website" })),
        )
        .await;
    assert_eq!(ok(&renamed, 200)["name"], "website");

    // Keys: create, use, list, rotate, revoke.
    let keys_path = format!("/admin/v1/projects/{project_id}/keys");
    let body = json!({ "name": "ci", "scopes": ["events:write", "devices:write", "devices:read"], "rateLimit": 600 });
    let created = ok(
        &app.call(Method::POST, &keys_path, &token, Some(&body))
            .await,
        201,
    );
    let secret = created["secret"].as_str().expect("secret").to_owned();
    assert!(common::keys::looks_like_secret(&secret));
    let key = &created["key"];
    assert_eq!(key["projectId"], json!(project_id));
    assert_eq!(
        key["scopes"],
        json!(["events:write", "devices:write", "devices:read"])
    );
    assert_eq!(key["rateLimit"], json!(600));
    assert!(secret.starts_with(key["prefix"].as_str().expect("prefix")));
    let key_id = id(key);
    assert_eq!(post_event(&app, &secret).await, 201);
    let keys = ok(&app.call(Method::GET, &keys_path, &token, None).await, 200);
    assert_eq!(keys["items"][0]["id"], json!(key_id));
    assert!(keys["items"][0]["lastUsedAt"].is_string(), "{keys}");
    assert!(!keys.to_string().contains(&secret));

    // Devices of the project, as the API registered them.
    let device = json!({ "token": "ab".repeat(32), "environment": "sandbox" });
    let registered = app.post("/v1/devices", &secret, &device).await;
    assert_eq!(registered.status(), 201);
    let devices_path = format!("/admin/v1/projects/{project_id}/devices");
    let devices = ok(
        &app.call(Method::GET, &devices_path, &token, None).await,
        200,
    );
    let device_id = id(&devices["items"][0]);
    let project = ok(
        &app.call(Method::GET, "/admin/v1/projects", &token, None)
            .await,
        200,
    );
    assert_eq!(project["items"][0]["keyCount"], json!(1));
    assert_eq!(project["items"][0]["deviceCount"], json!(1));
    let device_path = format!("{devices_path}/{device_id}");
    let deleted = ok(
        &app.call(Method::DELETE, &device_path, &token, None).await,
        200,
    );
    assert_eq!(deleted, json!({ "id": device_id, "deleted": true }));
    app.call(Method::DELETE, &device_path, &token, None)
        .await
        .assert_error_envelope(404);

    let rotate = format!("/admin/v1/keys/{key_id}/rotate");
    let rotated = app
        .call(
            Method::POST,
            &rotate,
            &token,
            Some(&json!({ "gracePeriodSeconds": 60 })),
        )
        .await;
    let rotated = ok(&rotated, 200);
    let new_secret = rotated["secret"].as_str().expect("secret").to_owned();
    assert_eq!(id(&rotated["key"]), key_id, "same key id");
    assert!(rotated["key"]["previousSecretExpiresAt"].is_string());
    assert_eq!(post_event(&app, &new_secret).await, 201);
    assert_eq!(
        post_event(&app, &secret).await,
        201,
        "old secret inside its grace"
    );

    let revoke = format!("/admin/v1/keys/{key_id}/revoke");
    let revoked = ok(&app.call(Method::POST, &revoke, &token, None).await, 200);
    assert!(revoked["revokedAt"].is_string());
    assert_eq!(post_event(&app, &new_secret).await, 401);
    let again = ok(&app.call(Method::POST, &revoke, &token, None).await, 200);
    assert_eq!(
        again["revokedAt"], revoked["revokedAt"],
        "revoking again changes nothing"
    );
    app.call(Method::POST, &rotate, &token, None)
        .await
        .assert_error_envelope(409);
    let keys = ok(&app.call(Method::GET, &keys_path, &token, None).await, 200);
    assert!(
        keys["items"][0]["revokedAt"].is_string(),
        "a revoked key stays listed"
    );

    let entries = audit(&app, &token).await;
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().expect("action"))
        .collect();
    assert_eq!(
        actions,
        [
            "key.revoke",
            "key.rotate",
            "device.delete",
            "key.create",
            "project.rename",
            "project.create",
            "organization.rename",
            "organization.create",
        ],
        "newest first, one entry per write"
    );
    for entry in &entries {
        assert_eq!(entry["actor"]["kind"], "admin");
        assert_eq!(entry["actor"]["name"], "Ada");
        assert_eq!(entry["address"], "127.0.0.1");
    }
    assert_eq!(
        entries[4]["details"],
        json!({ "from": "web", "to": "website" })
    );
    let log = Value::Array(entries).to_string();
    for secret in [&secret, &new_secret, &token] {
        assert!(!log.contains(secret.as_str()), "a secret in the audit log");
    }
    // Paging: one entry, then the next from the cursor.
    let first = ok(
        &app.call(Method::GET, "/admin/v1/audit?limit=1", &token, None)
            .await,
        200,
    );
    let cursor = first["nextCursor"].as_str().expect("a next page");
    let path = format!("/admin/v1/audit?limit=1&cursor={cursor}");
    let second = ok(&app.call(Method::GET, &path, &token, None).await, 200);
    assert_eq!(second["items"][0]["action"], "key.rotate");
    app.call(Method::GET, "/admin/v1/audit?cursor=nonsense", &token, None)
        .await
        .assert_error_envelope(400);
}

async fn names_are_unique_within_their_parent(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let token = app.create_admin("ops").await;
    let create_org = |name: &str| {
        let body = json!({ "name": name });
        let app = &app;
        let token = &token;
        async move {
            app.call(Method::POST, "/admin/v1/organizations", token, Some(&body))
                .await
        }
    };
    let a = ok(&create_org("a").await, 201);
    let b = ok(&create_org("b").await, 201);
    create_org("a").await.assert_error_envelope(409);
    let project = |org: &Value, name: &str| {
        let path = format!("/admin/v1/organizations/{}/projects", id(org));
        let body = json!({ "name": name });
        let (app, token) = (&app, &token);
        async move { app.call(Method::POST, &path, token, Some(&body)).await }
    };
    let web = ok(&project(&a, "web").await, 201);
    project(&a, "web").await.assert_error_envelope(409);
    ok(&project(&b, "web").await, 201);
    // Renamed away, its first name still tags its data: not for a newcomer.
    let path = format!("/admin/v1/projects/{}", id(&web));
    ok(
        &app.call(
            Method::PATCH,
            &path,
            &token,
            Some(&json!({ "name": "website" })),
        )
        .await,
        200,
    );
    let clash = project(&a, "web").await;
    clash.assert_error_envelope(409);
    let message = clash.body["error"].as_str().expect("message");
    assert!(
        message.contains("original name") && message.contains("website"),
        "{message}"
    );
    let path = format!("/admin/v1/organizations/{}", id(&b));
    app.call(Method::PATCH, &path, &token, Some(&json!({ "name": "a" })))
        .await
        .assert_error_envelope(409);
    // Invalid names and unknown ids.
    let bad = create_org("no spaces").await;
    bad.assert_error_envelope(400);
    assert_eq!(bad.fault_paths(), vec![vec!["name".to_owned()]]);
    for path in [
        "/admin/v1/projects/not-a-uuid/keys".to_owned(),
        format!("/admin/v1/projects/{}/keys", uuid::Uuid::now_v7()),
        format!("/admin/v1/keys/{}/revoke", uuid::Uuid::now_v7()),
    ] {
        let method = if path.ends_with("keys") {
            Method::GET
        } else {
            Method::POST
        };
        app.call(method, &path, &token, None)
            .await
            .assert_error_envelope(404);
    }
}

async fn cli_and_admin_api_keys_are_the_same_records(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let token = app.create_admin("ops").await;
    // Made the CLI's way: the organization and project appear in the API.
    let cli_key = app.create_key("acme", "web", None).await;
    let projects = ok(
        &app.call(Method::GET, "/admin/v1/projects", &token, None)
            .await,
        200,
    );
    let project = projects["items"][0].clone();
    assert_eq!(
        (project["organizationName"].clone(), project["name"].clone()),
        (json!("acme"), json!("web"))
    );
    let project_id = id(&project);
    let keys_path = format!("/admin/v1/projects/{project_id}/keys");
    let keys = ok(&app.call(Method::GET, &keys_path, &token, None).await, 200);
    let cli_key_id = id(&keys["items"][0]);

    // Renaming moves nothing: the CLI's key keeps working, and the CLI
    // finds the project by its new name and by its old one.
    let path = format!("/admin/v1/projects/{project_id}");
    ok(
        &app.call(
            Method::PATCH,
            &path,
            &token,
            Some(&json!({ "name": "website" })),
        )
        .await,
        200,
    );
    assert_eq!(post_event(&app, &cli_key).await, 201);
    app.create_key("acme", "website", None).await;
    app.create_key("acme", "web", None).await;
    let keys = ok(&app.call(Method::GET, &keys_path, &token, None).await, 200);
    assert_eq!(keys["items"].as_array().expect("items").len(), 3);
    let projects = ok(
        &app.call(Method::GET, "/admin/v1/projects", &token, None)
            .await,
        200,
    );
    assert_eq!(projects["items"].as_array().expect("items").len(), 1);

    // Revoked by the API, refused at once; made by the API, revoked the
    // CLI's way.
    let revoke = format!("/admin/v1/keys/{cli_key_id}/revoke");
    ok(&app.call(Method::POST, &revoke, &token, None).await, 200);
    assert_eq!(post_event(&app, &cli_key).await, 401);
    let created = ok(
        &app.call(Method::POST, &keys_path, &token, Some(&json!({})))
            .await,
        201,
    );
    let api_key_id: uuid::Uuid = id(&created["key"]).parse().expect("uuid");
    let stored = app.store.list_api_keys().await.expect("keys");
    assert!(stored.iter().any(|k| k.id == api_key_id));
    assert!(
        app.store
            .revoke_api_key(api_key_id, common::time::now())
            .await
            .expect("revoked")
    );
    let secret = created["secret"].as_str().expect("secret");
    assert_eq!(post_event(&app, secret).await, 401);
    let keys = ok(&app.call(Method::GET, &keys_path, &token, None).await, 200);
    let revoked = keys["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|k| k["revokedAt"].is_string())
        .count();
    assert_eq!(revoked, 2, "revoked keys stay listed: {keys}");
    // The CLI's writes are in the audit log too, with the CLI as the actor.
    let entries = audit(&app, &token).await;
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "key.create" && e["actor"]["kind"] == "cli")
    );
}

for_each_store!(
    every_admin_route_answers_and_is_audited,
    names_are_unique_within_their_parent,
    cli_and_admin_api_keys_are_the_same_records,
);

/// MongoDB: keys and devices written before organizations and projects were
/// records get records when the store opens, once however often it opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_adopts_scopes_that_exist_only_as_strings_at_open() {
    let config = tocsin_tests::TestConfig::new(StoreKind::Mongo).store_config();
    let open = || common::store::open(&config, std::time::Duration::from_secs(10));
    let store = open().await.expect("opens");
    let (key, _) = ingest::cli::new_key(
        common::store::Scope::new("legacy", "app"),
        None,
        None,
        &common::store::KeyScope::ALL,
    );
    store.insert_api_key(&key).await.expect("an old key");
    let registration = common::store::DeviceRegistration {
        target: common::store::PushTarget::Apns {
            token: "ab".repeat(32),
            environment: common::store::ApnsEnvironment::Sandbox,
        },
        name: None,
        rules: common::rules::AlertRules::every_alert(),
    };
    let scope = common::store::Scope::new("legacy", "ios");
    store
        .upsert_device(&scope, &registration, common::time::now())
        .await
        .expect("an old device");
    assert!(store.list_projects().await.expect("projects").is_empty());
    for _ in 0..2 {
        let store = open().await.expect("reopens");
        let organizations = store.list_organizations().await.expect("organizations");
        assert_eq!(organizations.len(), 1);
        assert_eq!(
            (
                organizations[0].name.as_str(),
                organizations[0].slug.as_str()
            ),
            ("legacy", "legacy")
        );
        let projects: Vec<String> = store
            .list_projects()
            .await
            .expect("projects")
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(projects, ["app", "ios"]);
    }
}

//! `ingest admin create|list|revoke` and `ingest keys …` beside the admin
//! API of a running `ingest`, in both storage modes: the CLI and the API
//! write the same records (a key made either way is listed and revocable
//! both ways), every command and action is in the audit log, and no secret
//! is in the audit log or in any line the server logs. A key the CLI
//! revokes is refused by the running server within a second.

use std::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};
use tocsin_tests::{
    mongo_uri,
    process::{self, Service},
    revocation::refused_within_bound,
    unique_db_name,
};

fn run(env: &[(&str, String)], args: &[&str]) -> String {
    process::run("ingest", args, env).trim_end().to_owned()
}

async fn call(
    base: &str,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

async fn cli_and_admin_api_share_records(mut env: Vec<(&'static str, String)>) {
    env.push(("USER", "root-at-shell".into()));
    let token = run(&env, &["admin", "create", "--name", "Ada"]);
    assert!(
        token.starts_with("tocsinadm_") && !token.contains('\n'),
        "{token:?}"
    );
    let admins = json_lines(&run(&env, &["admin", "list", "--json"]));
    assert_eq!(admins.len(), 1);
    assert_eq!(admins[0]["name"], "Ada");
    let table = run(&env, &["admin", "list"]);
    assert!(table.contains("Ada") && table.contains("active") && !table.contains(&token));
    let cli_key = run(
        &env,
        &["keys", "create", "--org", "acme", "--project", "web"],
    );

    let mut server_env = env.clone();
    server_env.push(("INGEST_LISTEN", "127.0.0.1:0".into()));
    server_env.push(("INGEST_LOG_FORMAT", "json".into()));
    let (mut service, base): (Service, String) = process::start_ingest(&server_env).await;

    // The CLI's organization and project, and its key, in the API.
    let (status, projects) = call(&base, Method::GET, "/admin/v1/projects", &token, None).await;
    assert_eq!(status, 200, "{projects}");
    let project = &projects["data"]["items"][0];
    assert_eq!(
        (&project["organizationName"], &project["name"]),
        (&json!("acme"), &json!("web"))
    );
    let keys_path = format!(
        "/admin/v1/projects/{}/keys",
        project["id"].as_str().expect("id")
    );
    let (_, keys) = call(&base, Method::GET, &keys_path, &token, None).await;
    let cli_key_id = keys["data"]["items"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();

    // A key made by the API, listed and revoked by the CLI.
    let (status, created) = call(
        &base,
        Method::POST,
        &keys_path,
        &token,
        Some(json!({ "name": "api" })),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let api_secret = created["data"]["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    let api_key_id = created["data"]["key"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let listed = json_lines(&run(&env, &["keys", "list", "--json"]));
    assert!(
        listed
            .iter()
            .any(|k| k["id"] == json!(api_key_id) && k["project"] == "web")
    );
    run(&env, &["keys", "revoke", &api_key_id]);
    let (status, _) = process::post(
        &base,
        "/v1/events",
        &api_secret,
        &json!({ "channelName": "c", "title": "t" }),
    )
    .await;
    assert_eq!(status, 401);
    // The CLI's key, rotated and revoked by the API; listed revoked by the CLI.
    let rotate = format!("/admin/v1/keys/{cli_key_id}/rotate");
    let (status, rotated) = call(&base, Method::POST, &rotate, &token, None).await;
    assert_eq!(status, 200, "{rotated}");
    let rotated_secret = rotated["data"]["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    let revoke = format!("/admin/v1/keys/{cli_key_id}/revoke");
    assert_eq!(
        call(&base, Method::POST, &revoke, &token, None).await.0,
        200
    );
    let listed = json_lines(&run(&env, &["keys", "list", "--json"]));
    assert!(
        listed.iter().all(|k| k["revokedAt"].is_string()),
        "{listed:?}"
    );

    // Every command and action, with its actor.
    let (_, audit) = call(&base, Method::GET, "/admin/v1/audit", &token, None).await;
    let entries = audit["data"]["items"].as_array().expect("items").clone();
    let seen: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default().to_owned(),
                e["actor"]["kind"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for (action, actor) in [
        ("admin.create", "cli"),
        ("organization.create", "cli"),
        ("project.create", "cli"),
        ("key.create", "cli"),
        ("key.create", "admin"),
        ("key.revoke", "cli"),
        ("key.rotate", "admin"),
        ("key.revoke", "admin"),
    ] {
        assert!(
            seen.contains(&(action.into(), actor.into())),
            "{action} by {actor}: {seen:?}"
        );
    }
    let shell = entries
        .iter()
        .find(|e| e["actor"]["kind"] == "cli")
        .expect("a CLI entry");
    assert_eq!(shell["actor"]["name"], "root-at-shell");
    assert!(shell["address"].is_null());

    // Revoking the admin token locks it out of the running server.
    let admin_id = admins[0]["id"].as_str().expect("id").to_owned();
    run(&env, &["admin", "revoke", &admin_id]);
    assert_eq!(
        call(&base, Method::GET, "/admin/v1/me", &token, None)
            .await
            .0,
        401
    );
    assert!(json_lines(&run(&env, &["admin", "list", "--json"]))[0]["revokedAt"].is_string());

    service.terminate();
    service.wait(std::time::Duration::from_secs(20)).await;
    let log = service.lines().join("\n") + &Value::Array(entries).to_string();
    for secret in [&token, &cli_key, &api_secret, &rotated_secret] {
        assert!(
            !log.contains(secret.as_str()),
            "a secret in the log or the audit log"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_and_admin_api_share_records_in_embedded_mode() {
    let dir = tempfile::tempdir().expect("temp dir");
    cli_and_admin_api_share_records(vec![("INGEST_DATA_DIR", dir.path().display().to_string())])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_and_admin_api_share_records_on_mongodb() {
    cli_and_admin_api_share_records(vec![
        ("MONGODB_URI", mongo_uri()),
        ("MONGODB_DATABASE", unique_db_name()),
    ])
    .await;
}

/// A key the running server has in its cache, revoked by the CLI (another
/// process): refused within the documented bound.
async fn a_key_revoked_by_the_cli_is_refused_by_a_running_server(
    mut env: Vec<(&'static str, String)>,
) {
    let key = run(
        &env,
        &["keys", "create", "--org", "acme", "--project", "web"],
    );
    let id = json_lines(&run(&env, &["keys", "list", "--json"]))[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    env.push(("INGEST_LISTEN", "127.0.0.1:0".into()));
    env.push(("INGEST_LOG_FORMAT", "json".into()));
    let (_service, base) = process::start_ingest(&env).await;
    let event = json!({ "channelName": "c", "title": "t" });
    for _ in 0..3 {
        assert_eq!(
            process::post(&base, "/v1/events", &key, &event).await.0,
            201
        );
    }
    run(&env, &["keys", "revoke", &id]);
    refused_within_bound(Instant::now(), async || {
        process::post(&base, "/v1/events", &key, &event).await.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_by_the_cli_is_refused_by_a_running_server_in_embedded_mode() {
    let dir = tempfile::tempdir().expect("temp dir");
    a_key_revoked_by_the_cli_is_refused_by_a_running_server(vec![(
        "INGEST_DATA_DIR",
        dir.path().display().to_string(),
    )])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_by_the_cli_is_refused_by_a_running_server_on_mongodb() {
    a_key_revoked_by_the_cli_is_refused_by_a_running_server(vec![
        ("MONGODB_URI", mongo_uri()),
        ("MONGODB_DATABASE", unique_db_name()),
    ])
    .await;
}

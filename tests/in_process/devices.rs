//! `/v1/devices` and `GET /v1/events/{id}`: registration, re-registration,
//! listing, deletion, validation, and project scoping.

use serde_json::json;
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store, path};

const TOKEN: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";

async fn devices_are_registered_updated_listed_and_deleted(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let (other_key, _) = app.new_key().await;
    let created = Reply::of(
        app.post(
            "/v1/devices",
            &key,
            &json!({ "token": TOKEN, "environment": "production", "name": "Ada's phone" }),
        )
        .await,
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.assert_request_id();
    created.assert_rate_limit_headers();
    let device = created.body["data"].clone();
    assert_eq!(device["active"], true);
    assert!(
        device["channels"].is_null(),
        "no filter means every channel"
    );

    let again = Reply::of(
        app.post("/v1/devices", &key, &json!({ "token": TOKEN.to_uppercase(), "environment": "sandbox", "channels": ["payments"] })).await,
    )
    .await;
    assert_eq!(again.status, 200, "re-registering updates: {}", again.body);
    assert_eq!(again.body["data"]["id"], device["id"]);
    assert_eq!(again.body["data"]["environment"], "sandbox");
    assert_eq!(again.body["data"]["channels"], json!(["payments"]));
    assert_eq!(again.body["data"]["createdAt"], device["createdAt"]);

    let list = |k: String| {
        let app = &app;
        async move { Reply::of(app.get_as("/v1/devices", &k).await).await }
    };
    let listed = list(key.clone()).await;
    assert_eq!(
        listed.body["data"]["devices"]
            .as_array()
            .expect("devices")
            .len(),
        1
    );
    assert_eq!(
        list(other_key.clone()).await.body["data"]["devices"],
        json!([]),
        "another project sees none"
    );

    let id = device["id"].as_str().expect("id");
    let path = format!("/v1/devices/{id}");
    let foreign = Reply::of(app.delete_as(&path, &other_key).await).await;
    foreign.assert_error_envelope(404);
    let deleted = Reply::of(app.delete_as(&path, &key).await).await;
    assert_eq!(deleted.status, 200);
    assert_eq!(deleted.body["data"], json!({ "id": id, "deleted": true }));
    let twice = Reply::of(app.delete_as(&path, &key).await).await;
    twice.assert_error_envelope(404);
    let not_uuid = Reply::of(app.delete_as("/v1/devices/nope", &key).await).await;
    not_uuid.assert_error_envelope(404);
    assert_eq!(list(key).await.body["data"]["devices"], json!([]));
}

async fn invalid_registrations_list_every_fault(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let reply = Reply::of(
        app.post(
            "/v1/devices",
            &key,
            &json!({ "token": "zz".repeat(32), "environment": "staging", "channels": [""], "extra": 1 }),
        )
        .await,
    )
    .await;
    reply.assert_error_envelope(400);
    let mut paths = reply.fault_paths();
    paths.sort();
    assert_eq!(
        paths,
        vec![
            path(&["channels", "0"]),
            path(&["environment"]),
            path(&["extra"]),
            path(&["token"])
        ]
    );
    assert!(
        app.store
            .list_devices(&scope)
            .await
            .expect("devices")
            .is_empty()
    );
}

async fn events_are_looked_up_within_their_project(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let (other_key, _) = app.new_key().await;
    let created = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "c", "title": "t", "notify": false }),
        )
        .await,
    )
    .await;
    let id = created.body["data"]["id"].as_str().expect("id").to_owned();
    let path = format!("/v1/events/{id}");
    let found = Reply::of(app.get_as(&path, &key).await).await;
    assert_eq!(found.status, 200);
    assert_eq!(found.body["data"]["title"], "t");
    assert_eq!(
        found.body["data"]["notification"],
        json!({ "state": "skipped", "deliveries": [] })
    );
    let foreign = Reply::of(app.get_as(&path, &other_key).await).await;
    foreign.assert_error_envelope(404);
    let unknown = Reply::of(
        app.get_as(&format!("/v1/events/{}", uuid::Uuid::now_v7()), &key)
            .await,
    )
    .await;
    unknown.assert_error_envelope(404);
}

for_each_store!(
    devices_are_registered_updated_listed_and_deleted,
    invalid_registrations_list_every_fault,
    events_are_looked_up_within_their_project,
);

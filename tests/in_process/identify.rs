//! `POST /v1/identify`: properties merge, aliases are a set union.

use serde_json::json;
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store, path};

async fn identify_creates_then_merges(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let first = Reply::of(
        app.post(
            "/v1/identify",
            &key,
            &json!({
                "user_id": "u-1",
                "properties": { "plan": "free", "email": "a@example.com" },
                "aliases": ["alice", "a-1"],
            }),
        )
        .await,
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["success"], json!(true));
    first.assert_request_id();
    first.assert_rate_limit_headers();
    assert_eq!(first.body["data"]["user_id"], json!("u-1"));
    assert_eq!(
        first.body["data"]["properties"],
        json!({ "plan": "free", "email": "a@example.com" })
    );
    assert_eq!(first.body["data"]["aliases"], json!(["alice", "a-1"]));

    let second = Reply::of(
        app.post(
            "/v1/identify",
            &key,
            &json!({
                "user_id": "u-1",
                "properties": { "plan": "pro", "seats": 3 },
                "aliases": ["a-1", "al"],
            }),
        )
        .await,
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.body);
    let data = &second.body["data"];
    assert_eq!(
        data["properties"],
        json!({ "plan": "pro", "email": "a@example.com", "seats": 3 })
    );
    assert_eq!(data["aliases"], json!(["alice", "a-1", "al"]));
    assert_eq!(data["createdAt"], first.body["data"]["createdAt"]);

    // Neither field is required: a bare identify keeps what is stored.
    let bare = Reply::of(
        app.post("/v1/identify", &key, &json!({ "user_id": "u-1" }))
            .await,
    )
    .await;
    assert_eq!(bare.status, 200);
    assert_eq!(bare.body["data"]["properties"], data["properties"]);
    assert_eq!(bare.body["data"]["aliases"], data["aliases"]);
}

async fn identities_are_scoped_to_the_project(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key_a, _) = app.new_key().await;
    let (key_b, _) = app.new_key().await;
    app.post(
        "/v1/identify",
        &key_a,
        &json!({ "user_id": "u", "properties": { "a": 1 } }),
    )
    .await;
    let b = Reply::of(
        app.post(
            "/v1/identify",
            &key_b,
            &json!({ "user_id": "u", "properties": { "b": 2 } }),
        )
        .await,
    )
    .await;
    assert_eq!(b.body["data"]["properties"], json!({ "b": 2 }));
}

async fn concurrent_identifies_lose_no_update(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let bodies: Vec<_> = (0..8)
        .map(|i| json!({ "user_id": "shared", "properties": { format!("p{i}"): i }, "aliases": [format!("a{i}")] }))
        .collect();
    let calls = bodies
        .iter()
        .map(|body| app.post("/v1/identify", &key, body));
    for response in futures::future::join_all(calls).await {
        assert_eq!(response.status(), 200);
    }
    let last = Reply::of(
        app.post("/v1/identify", &key, &json!({ "user_id": "shared" }))
            .await,
    )
    .await;
    let props = last.body["data"]["properties"]
        .as_object()
        .expect("properties")
        .len();
    let aliases = last.body["data"]["aliases"]
        .as_array()
        .expect("aliases")
        .len();
    assert_eq!((props, aliases), (8, 8), "{}", last.body);
}

async fn invalid_identify_lists_every_fault(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let reply = Reply::of(
        app.post(
            "/v1/identify",
            &key,
            &json!({ "properties": "x", "aliases": ["ok", 5], "userId": "wrong-case" }),
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
            path(&["aliases", "1"]),
            path(&["properties"]),
            path(&["userId"]),
            path(&["user_id"])
        ]
    );
}

for_each_store!(
    identify_creates_then_merges,
    identities_are_scoped_to_the_project,
    concurrent_identifies_lose_no_update,
    invalid_identify_lists_every_fault,
);

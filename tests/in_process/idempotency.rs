//! Idempotency keys: replay, mismatch, scope, concurrency, and what is not
//! remembered.

use std::collections::HashSet;

use serde_json::json;
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store, path};

async fn a_retry_with_the_same_key_replays_the_original_response(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let body = json!({ "channelName": "orders", "title": "Order placed" });
    let first = Reply::of(
        app.post_idempotent("/v1/events", &key, "order-1", &body)
            .await,
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.header("x-idempotent-replay"), None);
    let again = Reply::of(
        app.post_idempotent("/v1/events", &key, "order-1", &body)
            .await,
    )
    .await;
    assert_eq!(again.status, 201);
    assert_eq!(again.header("x-idempotent-replay"), Some("true"));
    assert_eq!(again.body, first.body, "the original body is replayed");
    again.assert_rate_limit_headers();
    assert!(again.header("x-request-id").is_some());
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 1);

    let identify = json!({ "user_id": "u", "properties": { "n": 1 } });
    let a = Reply::of(
        app.post_idempotent("/v1/identify", &key, "id-1", &identify)
            .await,
    )
    .await;
    let b = Reply::of(
        app.post_idempotent("/v1/identify", &key, "id-1", &identify)
            .await,
    )
    .await;
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!(b.header("x-idempotent-replay"), Some("true"));
    assert_eq!(a.body, b.body);
}

async fn the_same_key_with_a_different_body_gets_422(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let first = app
        .post_idempotent(
            "/v1/events",
            &key,
            "k",
            &json!({ "channelName": "c", "title": "one" }),
        )
        .await;
    assert_eq!(first.status(), 201);
    let other = Reply::of(
        app.post_idempotent(
            "/v1/events",
            &key,
            "k",
            &json!({ "channelName": "c", "title": "two" }),
        )
        .await,
    )
    .await;
    other.assert_error_envelope(422);
    let other_route = Reply::of(
        app.post_idempotent("/v1/identify", &key, "k", &json!({ "user_id": "u" }))
            .await,
    )
    .await;
    other_route.assert_error_envelope(422);
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 1);
}

async fn keys_are_scoped_per_project(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key_a, scope_a) = app.new_key().await;
    let (key_b, scope_b) = app.new_key().await;
    let body = json!({ "channelName": "c", "title": "t" });
    let a = Reply::of(
        app.post_idempotent("/v1/events", &key_a, "shared", &body)
            .await,
    )
    .await;
    let b = Reply::of(
        app.post_idempotent("/v1/events", &key_b, "shared", &body)
            .await,
    )
    .await;
    assert_eq!((a.status, b.status), (201, 201));
    assert_eq!(b.header("x-idempotent-replay"), None);
    assert_ne!(a.body["data"]["id"], b.body["data"]["id"]);
    assert_eq!(app.store.events_stored(&scope_a).await.expect("count"), 1);
    assert_eq!(app.store.events_stored(&scope_b).await.expect("count"), 1);
}

async fn fifty_concurrent_requests_with_one_key_create_one_event(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let body = json!({ "channelName": "race", "title": "only once" });
    let requests = (0..50).map(|_| app.post_idempotent("/v1/events", &key, "race-key", &body));
    let replies =
        futures::future::join_all(requests.map(|r| async { Reply::of(r.await).await })).await;
    let mut originals = 0;
    let mut ids = HashSet::new();
    for reply in &replies {
        match (reply.status, reply.header("x-idempotent-replay")) {
            (201, None) => {
                originals += 1;
                ids.insert(reply.body["data"]["id"].clone());
            }
            (201, Some("true")) => {
                ids.insert(reply.body["data"]["id"].clone());
            }
            (409, _) => {
                reply.assert_error_envelope(409);
                assert!(
                    reply.header("retry-after").is_some(),
                    "409 carries Retry-After"
                );
            }
            (status, _) => panic!("unexpected {status}: {}", reply.body),
        }
    }
    assert_eq!(originals, 1, "exactly one request does the work");
    assert_eq!(ids.len(), 1, "every replay carries the same event");
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 1);
    // Once settled, a retry replays.
    let after = Reply::of(
        app.post_idempotent("/v1/events", &key, "race-key", &body)
            .await,
    )
    .await;
    assert_eq!(after.header("x-idempotent-replay"), Some("true"));
}

async fn validation_failures_are_not_remembered(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let bad = Reply::of(
        app.post_idempotent("/v1/events", &key, "fix-me", &json!({ "title": "t" }))
            .await,
    )
    .await;
    bad.assert_error_envelope(400);
    let again = Reply::of(
        app.post_idempotent("/v1/events", &key, "fix-me", &json!({ "title": "t" }))
            .await,
    )
    .await;
    assert_eq!(again.status, 400, "a failed validation is not replayed");
    assert_eq!(again.header("x-idempotent-replay"), None);
    let fixed = Reply::of(
        app.post_idempotent(
            "/v1/events",
            &key,
            "fix-me",
            &json!({ "channelName": "c", "title": "t" }),
        )
        .await,
    )
    .await;
    assert_eq!(
        fixed.status, 201,
        "the corrected request runs: {}",
        fixed.body
    );
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 1);
}

async fn unauthenticated_and_rate_limited_requests_are_not_remembered(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let project = format!("p{}", uuid::Uuid::new_v4().simple());
    let key = app.create_key("acme", &project, Some(1)).await;
    let body = json!({ "channelName": "c", "title": "t" });
    assert_eq!(
        app.post_idempotent("/v1/events", "wrong", "k1", &body)
            .await
            .status(),
        401
    );
    assert_eq!(
        app.post_idempotent("/v1/events", &key, "k0", &body)
            .await
            .status(),
        201
    );
    let limited = app.post_idempotent("/v1/events", &key, "k1", &body).await;
    assert_eq!(limited.status(), 429);
    // Neither the 401 nor the 429 claimed k1: a fresh app with a fresh quota
    // on the same store runs it.
    let fresh = TestApp::spawn_with(same_store(&app)).await;
    let r = Reply::of(fresh.post_idempotent("/v1/events", &key, "k1", &body).await).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("x-idempotent-replay"), None);
}

/// Settings for a second ingest on the same store as `app`.
fn same_store(app: &TestApp) -> tocsin_tests::TestConfig {
    let mut test = tocsin_tests::TestConfig::new(tocsin_tests::StoreKind::Sqlite);
    test.config = app.config.clone();
    test.config.listen = "127.0.0.1:0".into();
    test
}

async fn keys_longer_than_255_characters_are_rejected(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let body = json!({ "channelName": "c", "title": "t" });
    let reply = Reply::of(
        app.post_idempotent("/v1/events", &key, &"k".repeat(256), &body)
            .await,
    )
    .await;
    reply.assert_error_envelope(400);
    assert_eq!(
        reply.fault_paths(),
        vec![path(&["headers", "Idempotency-Key"])]
    );
    let ok = app
        .post_idempotent("/v1/events", &key, &"k".repeat(255), &body)
        .await;
    assert_eq!(ok.status(), 201);
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 1);
}

for_each_store!(
    a_retry_with_the_same_key_replays_the_original_response,
    the_same_key_with_a_different_body_gets_422,
    keys_are_scoped_per_project,
    fifty_concurrent_requests_with_one_key_create_one_event,
    validation_failures_are_not_remembered,
    unauthenticated_and_rate_limited_requests_are_not_remembered,
    keys_longer_than_255_characters_are_rejected,
);

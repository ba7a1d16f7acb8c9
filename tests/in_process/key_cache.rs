//! API keys are read from the store about once a second per key, not once
//! per request; a key revoked, or a secret rotated away, through the admin
//! API of the serving process is refused at once. (A revocation made
//! elsewhere, straight in the store, is refused within a second: auth.rs;
//! by the CLI beside a running binary: tests/binaries/admin.rs.)

use std::sync::atomic::Ordering;

use reqwest::Method;
use serde_json::json;
use tocsin_tests::{CountCalls, Embedded, Reply, StoreKind, TestApp, TestConfig, for_each_store};
use uuid::Uuid;

async fn post_event(app: &TestApp, key: &str) -> u16 {
    app.post_event(key, &json!({ "channelName": "c", "title": "t" }))
        .await
        .status()
        .as_u16()
}

async fn key_id(app: &TestApp, secret: &str) -> Uuid {
    let hash = common::keys::hash_secret(secret);
    app.store
        .list_api_keys()
        .await
        .expect("keys")
        .into_iter()
        .find(|k| k.hash == hash)
        .expect("the key is stored")
        .id
}

async fn a_key_is_read_from_the_store_once_for_many_requests(kind: StoreKind) {
    let (counting, lookups) = CountCalls::of(&["find_api_key_by_hash"]);
    let app = TestApp::spawn_wrapped(TestConfig::new(kind), Embedded::default(), move |store| {
        counting.on(store)
    })
    .await;
    let (key, _) = app.new_key().await;
    for _ in 0..20 {
        assert_eq!(post_event(&app, &key).await, 201);
    }
    // One read per second at most; 20 requests take far less than 10 s.
    let read = lookups.load(Ordering::SeqCst);
    assert!((1..10).contains(&read), "20 requests, {read} key lookups");
    // An unknown secret is looked up every time (nothing to keep).
    let unknown = common::keys::generate_secret();
    let before = lookups.load(Ordering::SeqCst);
    assert_eq!(post_event(&app, &unknown).await, 401);
    assert_eq!(post_event(&app, &unknown).await, 401);
    assert_eq!(lookups.load(Ordering::SeqCst), before + 2);
}

async fn a_key_revoked_through_the_admin_api_is_refused_at_once(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let token = app.create_admin("ops").await;
    let (key, _) = app.new_key().await;
    for _ in 0..3 {
        assert_eq!(post_event(&app, &key).await, 201);
    }
    let id = key_id(&app, &key).await;
    let revoked = app
        .call(
            Method::POST,
            &format!("/admin/v1/keys/{id}/revoke"),
            &token,
            None,
        )
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    let refused = Reply::of(
        app.post_event(&key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await;
    refused.assert_error_envelope(401);
    assert_eq!(refused.body["error"], "API key has been revoked");
}

async fn a_secret_rotated_without_grace_is_refused_at_once(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let token = app.create_admin("ops").await;
    let (old, _) = app.new_key().await;
    assert_eq!(post_event(&app, &old).await, 201);
    let id = key_id(&app, &old).await;
    let rotated = app
        .call(
            Method::POST,
            &format!("/admin/v1/keys/{id}/rotate"),
            &token,
            Some(&json!({ "gracePeriodSeconds": 0 })),
        )
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new = rotated.body["data"]["secret"].as_str().expect("secret");
    assert_eq!(post_event(&app, &old).await, 401);
    assert_eq!(post_event(&app, new).await, 201);
}

for_each_store!(
    a_key_is_read_from_the_store_once_for_many_requests,
    a_key_revoked_through_the_admin_api_is_refused_at_once,
    a_secret_rotated_without_grace_is_refused_at_once,
);

//! Admin tokens and API keys are different credentials: each is refused on
//! the other's routes, and failed admin authentications fill a bucket of
//! their own. A rotated key's old secret works through its grace period
//! only. When keys were last used costs no store write per request.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use chrono::{DurationRound as _, TimeDelta};
use reqwest::Method;
use serde_json::json;
use tocsin_tests::{
    CountCalls, Embedded, Reply, StoreKind, TestApp, TestConfig, eventually, for_each_store,
};

async fn post_event(app: &TestApp, key: &str) -> Reply {
    Reply::of(
        app.post_event(key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await
}

async fn each_credential_is_refused_on_the_others_routes(kind: StoreKind) {
    let mut test = TestConfig::new(kind);
    test.config.admin_auth_failures_per_minute = 3.try_into().expect("non-zero");
    test.config.auth_failures_per_minute = 3.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let (key, _) = app.new_key().await;
    let token = app.create_admin("ops").await;

    let on_admin = app.call(Method::GET, "/admin/v1/me", &key, None).await;
    on_admin.assert_error_envelope(401);
    assert_eq!(
        on_admin.body["error"],
        "this is an API key; the admin API takes an admin token"
    );
    let on_api = post_event(&app, &token).await;
    on_api.assert_error_envelope(401);
    assert_eq!(
        on_api.body["error"],
        "this is an admin token; the API takes an API key"
    );
    // Each counted once in its own bucket (3 a minute): two admin
    // failures left, two API ones.
    assert_eq!(on_admin.header("x-ratelimit-remaining"), Some("2"));
    assert_eq!(on_api.header("x-ratelimit-remaining"), Some("2"));

    // Using up the admin bucket locks admin requests out, not API keys.
    let wrong = common::keys::generate_admin_token();
    for _ in 0..2 {
        app.call(Method::GET, "/admin/v1/me", &wrong, None)
            .await
            .assert_error_envelope(401);
    }
    app.call(Method::GET, "/admin/v1/me", &wrong, None)
        .await
        .assert_error_envelope(429);
    app.call(Method::GET, "/admin/v1/me", &token, None)
        .await
        .assert_error_envelope(429);
    let api = post_event(&app, &key).await;
    assert_eq!(api.status, 201, "{}", api.body);

    // A revoked admin token is refused.
    let app = TestApp::spawn(kind).await;
    let token = app.create_admin("leaver").await;
    let admin = app.store.list_admins().await.expect("admins")[0].clone();
    assert!(
        app.store
            .revoke_admin(admin.id, common::time::now())
            .await
            .expect("revoked")
    );
    let refused = app.call(Method::GET, "/admin/v1/me", &token, None).await;
    refused.assert_error_envelope(401);
    assert_eq!(refused.body["error"], "admin token has been revoked");
}

async fn a_rotated_keys_old_secret_works_through_its_grace_only(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let token = app.create_admin("ops").await;
    let (old, _) = app.new_key().await;
    let key_id = app.store.list_api_keys().await.expect("keys")[0].id;
    let rotate = format!("/admin/v1/keys/{key_id}/rotate");
    let grace = json!({ "gracePeriodSeconds": 2 });
    let rotated = app.call(Method::POST, &rotate, &token, Some(&grace)).await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new = rotated.body["data"]["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    assert_eq!(post_event(&app, &old).await.status, 201, "inside the grace");
    assert_eq!(post_event(&app, &new).await.status, 201);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let late = post_event(&app, &old).await;
    late.assert_error_envelope(401);
    assert_eq!(post_event(&app, &new).await.status, 201);
    // Without a body, the default grace: 24 hours.
    let rotated = app.call(Method::POST, &rotate, &token, None).await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let until: chrono::DateTime<chrono::Utc> =
        rotated.body["data"]["key"]["previousSecretExpiresAt"]
            .as_str()
            .expect("until")
            .parse()
            .expect("RFC 3339");
    let hours = (until - common::time::now()).num_minutes();
    assert!((23 * 60..=24 * 60).contains(&hours), "{hours} minutes");
    assert_eq!(post_event(&app, &new).await.status, 201);
}

async fn last_use_is_written_at_most_once_a_minute(kind: StoreKind) {
    let mut test = TestConfig::new(kind);
    test.config.last_used_flush_ms = 100.try_into().expect("non-zero");
    let (counting, writes) = CountCalls::of(&["set_keys_last_used"]);
    let app =
        TestApp::spawn_wrapped(test, Embedded::default(), move |store| counting.on(store)).await;
    let token = app.create_admin("ops").await;
    let (key, _) = app.new_key().await;
    let key_id = app.store.list_api_keys().await.expect("keys")[0].id;
    let before = common::time::now();
    assert_eq!(post_event(&app, &key).await.status, 201);
    // The first use is written soon after.
    eventually(
        Duration::from_secs(10),
        "the first use written",
        async || {
            let stored = app.store.get_api_key(key_id).await.expect("key");
            stored.and_then(|k| k.last_used_at)
        },
    )
    .await;
    for _ in 0..20 {
        assert_eq!(post_event(&app, &key).await.status, 201);
    }
    // Many flush intervals later, still the one write.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after = common::time::now();
    assert_eq!(writes.load(Ordering::SeqCst), 1, "21 requests, one write");

    let projects = app
        .call(Method::GET, "/admin/v1/projects", &token, None)
        .await;
    let project = projects.body["data"]["items"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let keys = app
        .call(
            Method::GET,
            &format!("/admin/v1/projects/{project}/keys"),
            &token,
            None,
        )
        .await;
    let shown: chrono::DateTime<chrono::Utc> = keys.body["data"]["items"][0]["lastUsedAt"]
        .as_str()
        .expect("lastUsedAt")
        .parse()
        .expect("RFC 3339");
    let minute = |t: chrono::DateTime<chrono::Utc>| {
        t.duration_trunc(TimeDelta::minutes(1)).expect("truncates")
    };
    assert!(minute(before) <= shown && shown <= minute(after), "{shown}");
    assert_eq!(shown, minute(shown), "to the minute");
    // What is left is written at graceful shutdown.
    let store = Arc::clone(&app.store);
    app.stop().await;
    assert_eq!(writes.load(Ordering::SeqCst), 2);
    let stored = store
        .get_api_key(key_id)
        .await
        .expect("key")
        .expect("found");
    assert!(stored.last_used_at.expect("written") >= before);
}

for_each_store!(
    each_credential_is_refused_on_the_others_routes,
    a_rotated_keys_old_secret_works_through_its_grace_only,
    last_use_is_written_at_most_once_a_minute,
);

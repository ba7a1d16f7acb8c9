//! Bearer API keys: missing, malformed, unknown and revoked keys get 401,
//! public routes need none, and failed attempts are limited per address.

use std::time::Instant;

use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{
    Reply, StoreKind, TestApp, TestConfig, for_each_store, revocation::refused_within_bound,
};

const EVENT: &str = r#"{"channelName":"c","title":"t"}"#;

async fn send(app: &TestApp, authorization: Option<&str>) -> Reply {
    let mut req = app
        .client
        .post(app.url("/v1/events"))
        .header("content-type", "application/json")
        .body(EVENT);
    if let Some(value) = authorization {
        req = req.header("authorization", value);
    }
    Reply::of(req.send().await.expect("sent")).await
}

async fn requests_without_a_valid_key_get_401(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let unknown = common::keys::generate_secret();
    let cases = [
        None,
        Some("".to_owned()),
        Some("Bearer".to_owned()),
        Some("Bearer ".to_owned()),
        Some(format!("Basic {key}")),
        Some(key.clone()),
        Some("Bearer not-a-key".to_owned()),
        Some(format!("Bearer {unknown}")),
    ];
    for authorization in cases {
        let reply = send(&app, authorization.as_deref()).await;
        reply.assert_error_envelope(401);
        reply.assert_rate_limit_headers();
    }
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 0);
    let ok = send(&app, Some(&format!("Bearer {key}"))).await;
    assert_eq!(ok.status, 201, "{}", ok.body);
    let lowercase_scheme = send(&app, Some(&format!("bearer {key}"))).await;
    assert_eq!(lowercase_scheme.status, 201);
}

/// Revoked straight in the store, as the CLI or another replica would:
/// refused within the bound of ingest's key cache.
async fn a_revoked_key_gets_401(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let bearer = format!("Bearer {key}");
    assert_eq!(send(&app, Some(&bearer)).await.status, 201);
    let id = app
        .store
        .list_api_keys()
        .await
        .expect("keys")
        .into_iter()
        .find(|k| k.hash == common::keys::hash_secret(&key))
        .expect("key listed")
        .id;
    assert!(
        app.store
            .revoke_api_key(id, common::time::now())
            .await
            .expect("revoked")
    );
    refused_within_bound(Instant::now(), async || {
        send(&app, Some(&bearer)).await.status
    })
    .await;
    let reply = send(&app, Some(&bearer)).await;
    reply.assert_error_envelope(401);
    assert!(
        reply.body["error"]
            .as_str()
            .expect("error")
            .contains("revoked")
    );
}

async fn public_routes_need_no_key(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    for route in ["/openapi.json", "/healthz", "/readyz", "/docs"] {
        let r = app.get(route).await;
        assert_eq!(r.status(), 200, "{route}");
        assert!(r.headers().contains_key("x-ratelimit-limit"), "{route}");
        assert!(r.headers().contains_key("x-request-id"), "{route}");
    }
}

async fn failed_authentication_is_limited_per_address(kind: StoreKind) {
    let mut test = TestConfig::new(kind);
    test.config.auth_failures_per_minute = 5.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let (key, _) = app.new_key().await;
    let wrong = format!("Bearer {}", common::keys::generate_secret());
    for i in 0..5 {
        let r = send(&app, Some(&wrong)).await;
        r.assert_error_envelope(401);
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(
            r.header("x-ratelimit-remaining"),
            Some((4 - i).to_string().as_str())
        );
    }
    let limited = send(&app, Some(&wrong)).await;
    limited.assert_error_envelope(429);
    limited.assert_rate_limit_headers();
    let retry_after: u64 = limited
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!(retry_after >= 1);
    // While locked out, even a right key gets no answer from this address:
    // guessing is refused before any lookup.
    let locked = send(&app, Some(&format!("Bearer {key}"))).await;
    locked.assert_error_envelope(429);
    // Other routes are not affected.
    let docs = app.get("/healthz").await;
    assert_eq!(docs.status(), 200);
}

for_each_store!(
    requests_without_a_valid_key_get_401,
    a_revoked_key_gets_401,
    public_routes_need_no_key,
    failed_authentication_is_limited_per_address,
);

//! Browsers calling from another origin (CORS, `cors_origins`): a listed
//! origin's preflight is answered 204 with the CORS headers, another's 403
//! without them, neither before authentication nor counted as a failed
//! one; answers to a listed origin carry `Access-Control-Allow-Origin` and
//! the exposed headers; without the setting nothing of CORS is sent.

use reqwest::{Method, Response};
use serde_json::json;
use tocsin_tests::{Reply, StoreKind, TestApp, TestConfig, for_each_store};

const APP: &str = "https://app.example";
const OTHER: &str = "https://evil.example";

async fn spawn(kind: StoreKind, origins: &str) -> TestApp {
    let mut test = TestConfig::new(kind);
    test.config.cors_origins = origins.into();
    // Low, so a preflight counted as a failed authentication would show.
    test.config.auth_failures_per_minute = 2.try_into().expect("non-zero");
    TestApp::spawn_with(test).await
}

/// A browser's preflight for `method` on `path` from `origin`.
async fn preflight(app: &TestApp, path: &str, origin: &str, method: &str) -> Response {
    app.client
        .request(Method::OPTIONS, app.url(path))
        .header("origin", origin)
        .header("access-control-request-method", method)
        .header(
            "access-control-request-headers",
            "authorization,content-type,idempotency-key,traceparent",
        )
        .send()
        .await
        .expect("sent")
}

async fn post_event_from(app: &TestApp, origin: &str, key: &str) -> Reply {
    let response = app
        .client
        .post(app.url("/v1/events"))
        .header("origin", origin)
        .bearer_auth(key)
        .json(&json!({ "channelName": "c", "title": "t" }))
        .send()
        .await
        .expect("sent");
    Reply::of(response).await
}

fn header<'a>(response: &'a Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

fn cors_headers(headers: &reqwest::header::HeaderMap) -> Vec<String> {
    headers
        .keys()
        .map(|name| name.as_str().to_owned())
        .filter(|name| name.starts_with("access-control-"))
        .collect()
}

async fn a_listed_origins_preflight_gets_204_with_the_cors_headers(kind: StoreKind) {
    let app = spawn(kind, &format!("http://localhost:3000, {APP}")).await;
    for (path, methods) in [
        ("/v1/events", "GET, HEAD, POST"),
        ("/v1/devices", "GET, HEAD, POST"),
        (
            "/v1/devices/0193b1f5-0000-7000-8000-000000000000",
            "PATCH, DELETE",
        ),
    ] {
        let response = preflight(&app, path, APP, "POST").await;
        assert_eq!(response.status(), 204, "{path}");
        assert_eq!(header(&response, "access-control-allow-origin"), Some(APP));
        assert_eq!(header(&response, "vary"), Some("origin"));
        assert_eq!(
            header(&response, "access-control-allow-methods"),
            Some(methods)
        );
        let allowed = header(&response, "access-control-allow-headers").expect("allow-headers");
        for name in [
            "authorization",
            "content-type",
            "idempotency-key",
            "traceparent",
        ] {
            assert!(allowed.contains(name), "{name} in {allowed}");
        }
        assert!(header(&response, "access-control-max-age").is_some());
        assert!(header(&response, "access-control-allow-credentials").is_none());
        assert!(header(&response, "x-request-id").is_some());
    }
}

async fn another_origins_preflight_gets_403_without_cors_headers(kind: StoreKind) {
    let app = spawn(kind, APP).await;
    let response = preflight(&app, "/v1/events", OTHER, "POST").await;
    assert!(cors_headers(response.headers()).is_empty());
    Reply::of(response).await.assert_error_envelope(403);
}

async fn preflights_never_count_as_failed_authentication(kind: StoreKind) {
    let app = spawn(kind, APP).await;
    let (key, _) = app.new_key().await;
    // The limit is 2 failed authentications a minute.
    for origin in [APP, OTHER] {
        for _ in 0..5 {
            let status = preflight(&app, "/v1/events", origin, "POST").await.status();
            assert!(status == 204 || status == 403, "{origin}: {status}");
        }
    }
    assert_eq!(post_event_from(&app, APP, &key).await.status, 201);
    let wrong = post_event_from(&app, APP, "wrong").await;
    wrong.assert_error_envelope(401);
}

async fn a_listed_origins_requests_carry_allow_origin_and_expose_headers(kind: StoreKind) {
    let app = spawn(kind, APP).await;
    let (key, _) = app.new_key().await;
    // The error too, so the page can read why it was refused.
    for (reply, status) in [
        (post_event_from(&app, APP, &key).await, 201),
        (post_event_from(&app, APP, "wrong").await, 401),
    ] {
        assert_eq!(reply.status, status, "{}", reply.body);
        assert_eq!(reply.header("access-control-allow-origin"), Some(APP));
        assert_eq!(reply.header("vary"), Some("origin"));
        let exposed = reply
            .header("access-control-expose-headers")
            .expect("expose-headers")
            .to_ascii_lowercase();
        for name in [
            "x-request-id",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
            "retry-after",
            "x-idempotent-replay",
        ] {
            assert!(exposed.contains(name), "{name} in {exposed}");
        }
        assert!(reply.header("access-control-allow-credentials").is_none());
    }
    // Another origin's request is served (the browser, not the server,
    // keeps the page from reading it), with no CORS headers.
    let other = post_event_from(&app, OTHER, &key).await;
    assert_eq!(other.status, 201);
    assert!(cors_headers(&other.headers).is_empty());
}

async fn without_the_setting_nothing_of_cors_is_sent(kind: StoreKind) {
    let app = spawn(kind, "").await;
    let (key, _) = app.new_key().await;
    for _ in 0..5 {
        let response = preflight(&app, "/v1/events", APP, "POST").await;
        assert!(cors_headers(response.headers()).is_empty());
        assert!(response.headers().get("vary").is_none());
        Reply::of(response).await.assert_error_envelope(403);
    }
    let created = post_event_from(&app, APP, &key).await;
    assert_eq!(created.status, 201);
    assert!(cors_headers(&created.headers).is_empty());
    assert!(created.headers.get("vary").is_none());
    post_event_from(&app, APP, "wrong")
        .await
        .assert_error_envelope(401);
}

for_each_store!(
    a_listed_origins_preflight_gets_204_with_the_cors_headers,
    another_origins_preflight_gets_403_without_cors_headers,
    preflights_never_count_as_failed_authentication,
    a_listed_origins_requests_carry_allow_origin_and_expose_headers,
    without_the_setting_nothing_of_cors_is_sent,
);

//! The envelope on every failure: unknown routes and methods, too many or
//! too large header fields, an unreachable store (503 within the deadline,
//! never a hang), and the request id.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{
    Reply, StoreKind, TestApp, TestConfig, eventually, for_each_store, proxy::Proxy,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

async fn unknown_routes_and_methods_get_the_envelope(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let anonymous = Reply::of(app.get("/no/such/page").await).await;
    anonymous.assert_error_envelope(404);
    anonymous.assert_rate_limit_headers();

    let under_v1 = Reply::of(app.get_as("/v1/unknown", &key).await).await;
    under_v1.assert_error_envelope(404);

    let method = Reply::of(
        app.client
            .put(app.url("/v1/events"))
            .bearer_auth(&key)
            .send()
            .await
            .expect("request sent"),
    )
    .await;
    method.assert_error_envelope(405);
    method.assert_rate_limit_headers();

    let delete = Reply::of(app.delete_as("/v1/identify", &key).await).await;
    delete.assert_error_envelope(405);
}

async fn request_ids_are_unique_per_request(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let a = Reply::of(
        app.post_event(&key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await;
    let b = Reply::of(
        app.post_event(&key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await;
    a.assert_request_id();
    b.assert_request_id();
    assert_ne!(a.body["requestId"], b.body["requestId"]);
}

/// A request with header fields over the limits gets 431 with the envelope,
/// as hyper would refuse it without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_or_too_large_header_fields_get_431_with_the_envelope() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = app.new_key().await;
    let with_headers = |n: usize, size: usize| {
        (0..n).fold(
            app.client.post(app.url("/v1/events")).bearer_auth(&key),
            |request, i| request.header(format!("x-extra-{i}"), "v".repeat(size)),
        )
    };
    let body = json!({ "channelName": "c", "title": "t" });
    // The limits: 100 fields, 16 KiB of them.
    for (fields, size) in [(101, 1), (150, 1), (2, 9000)] {
        let reply = Reply::of(
            with_headers(fields, size)
                .json(&body)
                .send()
                .await
                .expect("sent"),
        )
        .await;
        reply.assert_error_envelope(431);
        reply.assert_rate_limit_headers();
    }
    // Just under them, the request is served.
    let reply = Reply::of(
        with_headers(90, 100)
            .json(&body)
            .send()
            .await
            .expect("sent"),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
}

/// A request head far over the limits, or one hyper cannot parse at all,
/// never reaches the service: hyper refuses it itself. Its refusal still
/// comes in the envelope with a request id, not as a bare status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_hyper_refuses_itself_get_the_envelope_too() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = app.new_key().await;
    let get = || app.client.get(app.url("/v1/events")).bearer_auth(&key);
    let huge_header = get().header("x-big", "v".repeat(100 * 1024));
    let many_headers = (0..500).fold(get(), |request, i| request.header(format!("x-h{i}"), "v"));
    for request in [huge_header, many_headers] {
        let reply = Reply::of(request.send().await.expect("sent")).await;
        reply.assert_error_envelope(431);
        reply.assert_request_id();
    }
    // Raw bytes no HTTP client would send: a header line hyper cannot read.
    // (A request target over hyper's 64 KiB limit is longer than the head
    // hyper buffers, so it gets the 431 above.)
    let addr = app.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connected");
    socket
        .write_all(b"GET /v1/events HTTP/1.1\r\nHost x\r\n\r\n")
        .await
        .expect("written");
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8(answer).expect("UTF-8");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 400 "), "{head}");
    let envelope: Value = serde_json::from_str(body).expect("an envelope");
    assert_eq!(envelope["success"], false, "{body}");
    let id = envelope["requestId"].as_str().expect("a request id");
    assert!(head.contains(&format!("x-request-id: {id}")), "{head}");
}

for_each_store!(
    unknown_routes_and_methods_get_the_envelope,
    request_ids_are_unique_per_request
);

/// MongoDB reached through a proxy the test can silence.
async fn app_behind_proxy() -> (TestApp, Proxy) {
    let (proxy, through) = Proxy::to_mongo().await;
    let mut test = TestConfig::new(StoreKind::Mongo);
    test.config.backend.mongodb_uri = Some(common::config::Secret::new(through));
    test.config.backend.store_timeout_ms = 1000.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    (app, proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_store_gives_503_within_the_deadline_then_recovers() {
    let (app, proxy) = app_behind_proxy().await;
    let (key, scope) = app.new_key().await;
    let body = json!({ "channelName": "c", "title": "t" });
    assert_eq!(app.post_event(&key, &body).await.status(), 201);

    proxy.blackhole();
    let started = Instant::now();
    let reply = Reply::of(app.post_event(&key, &body).await).await;
    reply.assert_error_envelope(503);
    reply.assert_rate_limit_headers();
    assert!(reply.header("retry-after").is_some());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered, not hung"
    );
    let ready = Reply::of(app.get("/readyz").await).await;
    ready.assert_error_envelope(503);
    let live = app.get("/healthz").await;
    assert_eq!(live.status(), 200, "liveness does not depend on the store");

    proxy.restore();
    // Reconnecting may take several attempts, each up to the store's deadline.
    eventually(
        Duration::from_secs(45),
        "requests to succeed again once the store is back",
        async || match app.post_event(&key, &body).await.status().as_u16() {
            201 => Ok(()),
            other => Err(other),
        },
    )
    .await;
    let ready = app.get("/readyz").await;
    assert_eq!(ready.status(), 200);
    assert!(app.store.events_stored(&scope).await.expect("count") >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_store_gives_503() {
    let (app, proxy) = app_behind_proxy().await;
    let (key, _) = app.new_key().await;
    proxy.cut();
    let reply = Reply::of(
        app.post_event(&key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await;
    reply.assert_error_envelope(503);
    assert_eq!(reply.body.get("details"), None);
    let message = reply.body["error"].as_str().expect("error");
    assert!(
        !message.contains("127.0.0.1"),
        "causes are not shown to clients: {message}"
    );
}

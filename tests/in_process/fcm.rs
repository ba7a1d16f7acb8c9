//! FCM end to end in embedded mode, against the loopback FCM
//! (tests/fcm_service.rs) that verifies each token request's RS256
//! assertion and each send's bearer token: delivered once with one cached
//! token; a markdown description as plain text and the event's link (the
//! web link only when https, which the stand-in holds FCM to);
//! `UNREGISTERED` deactivates the device and `INVALID_ARGUMENT` rejects the
//! push; 503 is retried no sooner than `Retry-After`; a 401 gets one new
//! token and one resend.

use std::time::Duration;

use serde_json::{Value, json};
use tocsin_tests::{
    Embedded, Reply, StoreKind, TestApp, TestConfig, fcm_service::FcmService, for_each_store,
    test_notifier_config,
};

/// Ingest in embedded mode sending FCM messages as the loopback service's
/// account, to it.
async fn app_with(
    kind: StoreKind,
    service: &FcmService,
    tune: impl FnOnce(&mut notifier::Config),
) -> TestApp {
    let mut notifier = test_notifier_config();
    notifier.fcm_service_account = Some(service.account_file());
    notifier.fcm_base_url = service.origin();
    tune(&mut notifier);
    TestApp::spawn_with_options(
        TestConfig::new(kind),
        Embedded {
            provider: None,
            notifier,
        },
    )
    .await
}

async fn register(app: &TestApp, key: &str, token: &str) -> Reply {
    let body = json!({ "kind": "fcm", "token": token, "name": "Pixel" });
    Reply::of(app.post("/v1/devices", key, &body).await).await
}

async fn event(app: &TestApp, key: &str, priority: &str) -> String {
    let body = json!({
        "channelName": "payments",
        "title": "Payment failed",
        "description": "Card declined",
        "icon": "💸",
        "priority": priority,
    });
    app.record_event(key, &body).await
}

/// Each device's `active`, by token.
async fn active(app: &TestApp, key: &str) -> Vec<(String, bool)> {
    let devices = Reply::of(app.get_as("/v1/devices", key).await).await;
    devices.body["data"]["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| {
            (
                d["token"].as_str().unwrap_or_default().to_owned(),
                d["active"] == true,
            )
        })
        .collect()
}

async fn a_device_gets_each_event_once_with_one_cached_token(kind: StoreKind) {
    let service = FcmService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let token = "fcm-token:APA91b-delivered";
    assert_eq!(register(&app, &key, token).await.status, 201);

    let high = event(&app, &key, "high").await;
    let event_json = app.settled(&key, &high, "delivered").await;
    let delivery = &event_json["notification"]["deliveries"][0];
    assert_eq!(delivery["provider"], "fcm", "{event_json}");
    assert_eq!(delivery["state"], "delivered");
    let normal = event(&app, &key, "normal").await;
    app.settled(&key, &normal, "delivered").await;

    assert!(service.faults().is_empty(), "{:?}", service.faults());
    let received = service.received(token);
    assert_eq!(received.len(), 2, "once each: {received:?}");
    let first: &Value = &received[0].message;
    assert_eq!(first["notification"]["title"], "💸 Payment failed");
    assert_eq!(first["notification"]["body"], "Card declined");
    assert_eq!(first["data"]["channel"], "payments");
    assert_eq!(first["data"]["eventId"], high.as_str());
    assert_eq!(first["android"]["priority"], "high");
    assert_eq!(received[1].message["android"]["priority"], "normal");
    assert_eq!(service.grants(), 1, "the access token is cached");
    app.stop().await;
}

/// An event written in markdown with an https `url` reaches FCM as plain
/// text with the link in `webpush.fcm_options.link` (what the FCM SDK for
/// the web opens on a click) and in `data.url` (for an app); an http `url`
/// only in `data.url`, since FCM refuses a web link that is not https (the
/// stand-in does too: a fault would show).
async fn a_markdown_event_with_a_url_is_text_with_its_link(kind: StoreKind) {
    let service = FcmService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let token = "fcm-token:APA91b-linked";
    assert_eq!(register(&app, &key, token).await.status, 201);
    let https = "https://ci.example.com/runs/42?tab=log";
    let http = "http://intranet.example/runs/43";
    for url in [https, http] {
        let body = json!({
            "channelName": "deploys",
            "title": "Deploy 42 failed",
            "description": "**Deploy 42** failed on `main`: see [the log](https://ci.example.com/runs/42).",
            "parser": "markdown",
            "url": url,
        });
        let id = app.record_event(&key, &body).await;
        app.settled(&key, &id, "delivered").await;
    }
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    let received = service.received(token);
    assert_eq!(received.len(), 2, "{received:?}");
    let (first, second) = (&received[0].message, &received[1].message);
    assert_eq!(
        first["notification"]["body"],
        "Deploy 42 failed on main: see the log."
    );
    assert_eq!(first["webpush"]["fcm_options"]["link"], https);
    assert_eq!(first["data"]["url"], https);
    assert_eq!(second["webpush"], Value::Null, "{second}");
    assert_eq!(second["data"]["url"], http);
    app.stop().await;
}

/// `alertKey`: FCM gets the same `collapse_key` and Android tag for two
/// events of the project with the same key, and the key in the data.
async fn an_alert_key_is_the_collapse_key_and_tag(kind: StoreKind) {
    let service = FcmService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let token = "fcm-token:APA91b-collapsing";
    assert_eq!(register(&app, &key, token).await.status, 201);
    for title in ["Deploy 42 started", "Deploy 42 succeeded"] {
        let body = json!({ "channelName": "deploys", "title": title, "alertKey": "deploy-42" });
        let id = app.record_event(&key, &body).await;
        app.settled(&key, &id, "delivered").await;
    }
    let plain = event(&app, &key, "normal").await;
    app.settled(&key, &plain, "delivered").await;
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    let received = service.received(token);
    assert_eq!(received.len(), 3, "{received:?}");
    let android = |i: usize| received[i].message["android"].clone();
    let collapse = android(0)["collapse_key"].clone();
    assert!(collapse.is_string());
    assert_eq!(android(1)["collapse_key"], collapse);
    assert_eq!(android(1)["notification"]["tag"], collapse);
    assert_eq!(received[1].message["data"]["alertKey"], "deploy-42");
    assert_eq!(received[1].message["data"]["thread"], "deploys");
    assert_eq!(
        android(2)["collapse_key"],
        plain.as_str(),
        "no key: the event's own"
    );
    assert_eq!(android(2)["notification"]["tag"], plain.as_str());
    app.stop().await;
}

async fn unregistered_deactivates_and_invalid_argument_rejects(kind: StoreKind) {
    let service = FcmService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let (gone, invalid) = ("fcm-token:uninstalled", "fcm-token:mangled");
    service.script(gone, vec![(404, None, Some("UNREGISTERED"))]);
    service.script(invalid, vec![(400, None, Some("INVALID_ARGUMENT"))]);
    for token in [gone, invalid] {
        assert_eq!(register(&app, &key, token).await.status, 201);
    }
    let id = event(&app, &key, "normal").await;
    let settled = app.settled(&key, &id, "failed").await;
    let errors: Vec<&str> = settled["notification"]["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .map(|d| d["error"].as_str().unwrap_or_default())
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("UNREGISTERED")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("INVALID_ARGUMENT")),
        "{errors:?}"
    );
    let devices = active(&app, &key).await;
    assert!(devices.contains(&(gone.into(), false)), "{devices:?}");
    assert!(devices.contains(&(invalid.into(), true)), "{devices:?}");
    for token in [gone, invalid] {
        assert_eq!(service.requests(token).len(), 1, "never retried: {token}");
    }
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    app.stop().await;
}

async fn a_503_is_retried_no_sooner_than_retry_after(kind: StoreKind) {
    let service = FcmService::start().await;
    let app = app_with(kind, &service, |n| n.retry_max_ms = 5000).await;
    let (key, _) = app.new_key().await;
    let token = "fcm-token:busy";
    service.script(token, vec![(503, Some(2), None)]);
    assert_eq!(register(&app, &key, token).await.status, 201);
    let id = event(&app, &key, "normal").await;
    app.settled(&key, &id, "delivered").await;
    let requests = service.requests(token);
    assert_eq!(requests.len(), 2, "{requests:?}");
    let gap = requests[1] - requests[0];
    assert!(gap >= Duration::from_secs(2), "retried after {gap:?}");
    assert_eq!(service.received(token).len(), 1);
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    app.stop().await;
}

/// A 401 (the token revoked) gets one new token and one resend; a second
/// 401 for the same push is not chased with a third token.
async fn a_401_refreshes_the_token_once(kind: StoreKind) {
    let service = FcmService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let token = "fcm-token:revoked-once";
    service.script(token, vec![(401, None, None)]);
    let only_payments = json!({ "kind": "fcm", "token": token, "channels": ["payments"] });
    let registered = Reply::of(app.post("/v1/devices", &key, &only_payments).await).await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    let id = event(&app, &key, "normal").await;
    let settled = app.settled(&key, &id, "delivered").await;
    assert_eq!(
        settled["notification"]["deliveries"][0]["attempts"], 1,
        "resent within the same attempt: {settled}"
    );
    assert_eq!(service.requests(token).len(), 2);
    assert_eq!(service.received(token).len(), 1);
    assert_eq!(service.grants(), 2, "one new token");

    // On another channel, so this push is the only one in flight.
    let stubborn = "fcm-token:revoked-twice";
    service.script(stubborn, vec![(401, None, None), (401, None, None)]);
    assert_eq!(register(&app, &key, stubborn).await.status, 201);
    let ops = json!({ "channelName": "ops", "title": "Disk full" });
    let id = app.record_event(&key, &ops).await;
    let settled = app.settled(&key, &id, "failed").await;
    // The other device's channel filter keeps it out: its entry is
    // `filtered`, and this one's is the only push.
    let refused = settled["notification"]["deliveries"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["state"] == "failed"))
        .expect("the failed delivery");
    assert!(
        refused["error"].as_str().is_some_and(|e| e.contains("401")),
        "{settled}"
    );
    assert_eq!(refused["attempts"], 1, "not retried: {settled}");
    assert_eq!(service.requests(stubborn).len(), 2, "one resend only");
    assert_eq!(service.grants(), 3, "one new token, not two");
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    app.stop().await;
}

for_each_store!(
    a_markdown_event_with_a_url_is_text_with_its_link,
    an_alert_key_is_the_collapse_key_and_tag,
    a_device_gets_each_event_once_with_one_cached_token,
    unregistered_deactivates_and_invalid_argument_rejects,
    a_503_is_retried_no_sooner_than_retry_after,
    a_401_refreshes_the_token_once,
);

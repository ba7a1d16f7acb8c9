//! Web Push end to end in embedded mode, against the loopback push service
//! (tests/push_service.rs) that verifies each message's VAPID signature and
//! decrypts it with the subscription's own keys; registration and send-time
//! endpoint refusals; FCM devices stored and listed; the provider of each
//! delivery; an event's priority as the push services see it; a markdown
//! description as plain text and the event's `url`, in the browser's
//! payload and in the iPhone's.

use std::{sync::Arc, time::Duration};

use common::store::{DeviceRegistration, PushTarget, WebPushSubscription};
use notifier::push::{Priority, PushProvider};
use serde_json::{Value, json};
use tocsin_tests::{
    Embedded, Reply, StoreKind, TestApp, TestConfig, for_each_store, path,
    push_service::PushService, recording::RecordingProvider, test_notifier_config,
};

/// Ingest in embedded mode with a VAPID key and the push service's origin
/// allowed; the push service expects the key ingest serves.
async fn app_with(
    kind: StoreKind,
    service: &PushService,
    tune: impl FnOnce(&mut notifier::Config),
) -> TestApp {
    spawn(kind, service, tune, None).await
}

/// As [`app_with`], with `apns` in place of the APNs provider.
async fn spawn(
    kind: StoreKind,
    service: &PushService,
    tune: impl FnOnce(&mut notifier::Config),
    apns: Option<Arc<dyn PushProvider>>,
) -> TestApp {
    let (private, _) = notifier::push::webpush::vapid::VapidKey::generate();
    let mut notifier = test_notifier_config();
    notifier.vapid_private_key = Some(common::config::Secret::new(private));
    notifier.vapid_subject = Some("mailto:ops@example.com".into());
    notifier.webpush_allowed_endpoints = service.origin();
    tune(&mut notifier);
    let provider = apns.map(|apns| {
        let mut router = notifier.router().expect("the configured providers");
        router.apns = apns;
        Arc::new(router) as Arc<dyn PushProvider>
    });
    let app =
        TestApp::spawn_with_options(TestConfig::new(kind), Embedded { provider, notifier }).await;
    let key = Reply::of(app.get("/v1/webpush/key").await).await;
    assert_eq!(key.status, 200, "{}", key.body);
    service.expect_key(key.body["data"]["publicKey"].as_str().expect("a key"));
    app
}

async fn register(app: &TestApp, key: &str, subscription: &Value) -> Reply {
    let body = json!({ "kind": "webpush", "subscription": subscription, "name": "Firefox" });
    Reply::of(app.post("/v1/devices", key, &body).await).await
}

/// An event on `payments` at `priority`; returns its id.
async fn event_at(app: &TestApp, key: &str, priority: &str) -> String {
    let body = json!({
        "channelName": "payments",
        "title": "Payment failed",
        "description": "Card declined",
        "icon": "💸",
        "notify": true,
        "priority": priority,
    });
    app.record_event(key, &body).await
}

async fn event(app: &TestApp, key: &str) -> String {
    event_at(app, key, "normal").await
}

async fn a_subscription_gets_the_event_once_signed_and_encrypted(kind: StoreKind) {
    let service = PushService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let subscription = service.subscribe();
    let endpoint = subscription["endpoint"]
        .as_str()
        .expect("endpoint")
        .to_owned();

    let first = register(&app, &key, &subscription).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body["data"]["kind"], "webpush");
    assert_eq!(first.body["data"]["endpoint"], endpoint);
    let again = register(&app, &key, &subscription).await;
    assert_eq!(
        again.status, 200,
        "the same subscription twice: {}",
        again.body
    );
    assert_eq!(again.body["data"]["id"], first.body["data"]["id"]);
    let listed = Reply::of(app.get_as("/v1/devices", &key).await).await;
    assert_eq!(
        listed.body["data"]["devices"]
            .as_array()
            .expect("devices")
            .len(),
        1
    );
    assert_eq!(listed.body["data"]["devices"][0]["kind"], "webpush");

    let id = event(&app, &key).await;
    let event = app.settled(&key, &id, "delivered").await;
    let delivery = &event["notification"]["deliveries"][0];
    assert_eq!(delivery["provider"], "webpush", "{event}");
    assert_eq!(delivery["state"], "delivered");

    assert!(service.faults().is_empty(), "{:?}", service.faults());
    let received = service.received(&endpoint);
    assert_eq!(received.len(), 1, "exactly once: {received:?}");
    let message = &received[0];
    assert_eq!(message.payload["title"], "💸 Payment failed");
    assert_eq!(message.payload["body"], "Card declined");
    assert_eq!(message.payload["channel"], "payments");
    assert_eq!(message.payload["eventId"], id.as_str());
    assert_eq!(message.urgency.as_deref(), Some("normal"));
    assert!(message.ttl.is_some());
    let topic = message.topic.as_deref().expect("a Topic");
    assert!(topic.len() <= 32, "{topic}");
    app.stop().await;
}

async fn gone_subscriptions_are_deactivated_and_413_is_rejected(kind: StoreKind) {
    let service = PushService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let mut endpoints = Vec::new();
    for status in [410, 404, 413] {
        let subscription = service.subscribe();
        let endpoint = subscription["endpoint"]
            .as_str()
            .expect("endpoint")
            .to_owned();
        service.script(&endpoint, vec![(status, None)]);
        assert_eq!(register(&app, &key, &subscription).await.status, 201);
        endpoints.push(endpoint);
    }
    let id = event(&app, &key).await;
    app.settled(&key, &id, "failed").await;
    let devices = Reply::of(app.get_as("/v1/devices", &key).await).await;
    let active: Vec<(String, bool)> = devices.body["data"]["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| {
            (
                d["endpoint"].as_str().unwrap_or_default().to_owned(),
                d["active"] == true,
            )
        })
        .collect();
    for (endpoint, expected) in endpoints.iter().zip([false, false, true]) {
        assert!(
            active.contains(&(endpoint.clone(), expected)),
            "{endpoint}: {active:?}"
        );
        assert_eq!(
            service.requests(endpoint).len(),
            1,
            "never retried: {endpoint}"
        );
    }
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    app.stop().await;
}

async fn a_429_is_retried_no_sooner_than_retry_after(kind: StoreKind) {
    let service = PushService::start().await;
    let app = app_with(kind, &service, |n| n.retry_max_ms = 5000).await;
    let (key, _) = app.new_key().await;
    let subscription = service.subscribe();
    let endpoint = subscription["endpoint"]
        .as_str()
        .expect("endpoint")
        .to_owned();
    service.script(&endpoint, vec![(429, Some(2))]);
    assert_eq!(register(&app, &key, &subscription).await.status, 201);
    let id = event(&app, &key).await;
    app.settled(&key, &id, "delivered").await;
    let requests = service.requests(&endpoint);
    assert_eq!(requests.len(), 2, "{requests:?}");
    let gap = requests[1] - requests[0];
    assert!(gap >= Duration::from_secs(2), "retried after {gap:?}");
    assert_eq!(service.received(&endpoint).len(), 1);
    app.stop().await;
}

async fn unsafe_endpoints_are_refused_at_registration(kind: StoreKind) {
    let service = PushService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let port = service.addr.port();
    // Strings only: refused before any connection (loopback names resolve
    // locally; no other address is ever contacted).
    for endpoint in [
        format!("http://localhost:{port}/push/1"),
        format!("https://user:pw@127.0.0.1:{port}/push/1"),
        "https://10.0.0.1/push/1".to_owned(),
        "https://[::1]/push/1".to_owned(),
        "https://127.0.0.1/push/1".to_owned(),
        format!("https://localhost:{port}/push/1"),
    ] {
        let mut subscription = service.subscribe();
        subscription["endpoint"] = json!(endpoint);
        let reply = register(&app, &key, &subscription).await;
        reply.assert_error_envelope(400);
        assert_eq!(
            reply.fault_paths(),
            vec![path(&["subscription", "endpoint"])],
            "{endpoint}: {}",
            reply.body
        );
    }
    let unknown = Reply::of(
        app.post(
            "/v1/devices",
            &key,
            &json!({ "kind": "pager", "token": "x" }),
        )
        .await,
    )
    .await;
    unknown.assert_error_envelope(400);
    assert_eq!(
        unknown.fault_paths(),
        vec![path(&["kind"])],
        "{}",
        unknown.body
    );
    let devices = Reply::of(app.get_as("/v1/devices", &key).await).await;
    assert_eq!(devices.body["data"]["devices"], json!([]));
    assert_eq!(service.connections(), 0);
    app.stop().await;
}

/// A subscription whose keys no push could be encrypted to is refused at
/// registration, at the key at fault: a `p256dh` of the right length that is
/// not a point on the P-256 curve, and an `auth` that is not 16 bytes.
async fn keys_no_push_could_use_are_refused_at_registration(kind: StoreKind) {
    let service = PushService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    // 65 bytes, the uncompressed tag, the point (1, 1): off the curve.
    let mut off_curve = [0u8; 65];
    off_curve[0] = 0x04;
    off_curve[32] = 1;
    off_curve[64] = 1;
    let off_curve =
        base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, off_curve);
    for (field, value) in [
        ("p256dh", off_curve.as_str()),
        ("auth", "c2hvcnQtc2hvcnQtc2g"),
    ] {
        let mut subscription = service.subscribe();
        subscription["keys"][field] = json!(value);
        let reply = register(&app, &key, &subscription).await;
        reply.assert_error_envelope(400);
        assert_eq!(
            reply.fault_paths(),
            vec![path(&["subscription", "keys", field])],
            "{}",
            reply.body
        );
    }
    // A browser's real subscription is taken.
    let reply = register(&app, &key, &service.subscribe()).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    app.stop().await;
}

/// Devices stored when the policy let them through (written to the store
/// directly, as an older allow-list or another resolution would have left
/// them) are checked again at send: `localhost` resolves to loopback, and
/// the service's origin is no longer allowed. Nothing connects.
async fn endpoints_are_checked_again_at_send(kind: StoreKind) {
    let service = PushService::start().await;
    let app = app_with(kind, &service, |n| {
        n.webpush_allowed_endpoints = String::new()
    })
    .await;
    let (key, scope) = app.new_key().await;
    let port = service.addr.port();
    for endpoint in [
        format!("https://localhost:{port}/push/a"),
        format!("{}/push/b", service.origin()),
    ] {
        let subscription = service.subscribe();
        let registration = DeviceRegistration {
            target: PushTarget::WebPush(WebPushSubscription {
                endpoint,
                p256dh: subscription["keys"]["p256dh"]
                    .as_str()
                    .expect("p256dh")
                    .into(),
                auth: subscription["keys"]["auth"].as_str().expect("auth").into(),
            }),
            name: None,
            rules: common::rules::AlertRules::every_alert(),
        };
        app.store
            .upsert_device(&scope, &registration, chrono::Utc::now())
            .await
            .expect("stored");
    }
    let id = event(&app, &key).await;
    let event = app.settled(&key, &id, "failed").await;
    for delivery in event["notification"]["deliveries"]
        .as_array()
        .expect("deliveries")
    {
        assert_eq!(delivery["state"], "failed", "{event}");
        assert_eq!(delivery["attempts"], 1, "refused, not retried: {event}");
        let error = delivery["error"].as_str().expect("error");
        assert!(error.contains("not contacted"), "{error}");
    }
    assert_eq!(service.connections(), 0, "nothing connected");
    app.stop().await;
}

async fn fcm_devices_are_stored_listed_and_logged(kind: StoreKind) {
    let service = PushService::start().await;
    let app = app_with(kind, &service, |_| {}).await;
    let (key, _) = app.new_key().await;
    let body = json!({ "kind": "fcm", "token": "fcm-token:APA91b-1", "channels": ["payments"] });
    let first = Reply::of(app.post("/v1/devices", &key, &body).await).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body["data"]["kind"], "fcm");
    assert_eq!(first.body["data"]["token"], "fcm-token:APA91b-1");
    let again = Reply::of(app.post("/v1/devices", &key, &body).await).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body["data"]["id"], first.body["data"]["id"]);
    let apns = json!({ "token": "ab".repeat(32), "environment": "sandbox" });
    let apns = Reply::of(app.post("/v1/devices", &key, &apns).await).await;
    assert_eq!(apns.status, 201, "{}", apns.body);
    assert_eq!(
        apns.body["data"]["kind"], "apns",
        "apns is the default kind"
    );
    let listed = Reply::of(app.get_as("/v1/devices", &key).await).await;
    let kinds: Vec<&Value> = listed.body["data"]["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| &d["kind"])
        .collect();
    assert_eq!(kinds, vec!["fcm", "apns"]);
    // Without FCM or APNs credentials, their pushes are logged: the
    // deliveries say so.
    let id = event(&app, &key).await;
    let event = app.settled(&key, &id, "delivered").await;
    for delivery in event["notification"]["deliveries"]
        .as_array()
        .expect("deliveries")
    {
        assert_eq!(delivery["provider"], "log", "{event}");
    }
    app.stop().await;
}

/// A `high` event reaches the browser with `Urgency: high`, and the iPhone
/// with an APNs payload that is time-sensitive and plays a sound; a `low`
/// one with `Urgency: low` and a passive, silent payload. APNs' payload is
/// what the provider renders for the push the worker handed it (a2 cannot
/// be pointed at a local server).
/// A project with a subscribed browser, whose pushes reach the loopback push
/// service, and APNs recorded.
struct Both {
    service: PushService,
    apns: Arc<RecordingProvider>,
    app: TestApp,
    key: String,
    subscription: Value,
    endpoint: String,
}

async fn browser_and_recorded_apns(kind: StoreKind) -> Both {
    let service = PushService::start().await;
    let apns = Arc::new(RecordingProvider::default());
    let app = spawn(
        kind,
        &service,
        |_| {},
        Some(Arc::clone(&apns) as Arc<dyn PushProvider>),
    )
    .await;
    let (key, _) = app.new_key().await;
    let subscription = service.subscribe();
    let endpoint = subscription["endpoint"]
        .as_str()
        .expect("endpoint")
        .to_owned();
    assert_eq!(register(&app, &key, &subscription).await.status, 201);
    Both {
        service,
        apns,
        app,
        key,
        subscription,
        endpoint,
    }
}

async fn the_priority_reaches_web_push_and_apns(kind: StoreKind) {
    let Both {
        service,
        apns,
        app,
        key,
        endpoint,
        ..
    } = browser_and_recorded_apns(kind).await;
    let iphone = "ab".repeat(32);
    let device = json!({ "token": iphone, "environment": "sandbox" });
    assert_eq!(app.post("/v1/devices", &key, &device).await.status(), 201);

    for (priority, urgency, level, sound) in [
        ("high", "high", "time-sensitive", Some("default")),
        ("low", "low", "passive", None),
    ] {
        let id = event_at(&app, &key, priority).await;
        let event = app.settled(&key, &id, "delivered").await;
        assert_eq!(event["priority"], priority, "{event}");
        let received = service.received(&endpoint);
        let message = received
            .iter()
            .find(|m| m.payload["eventId"] == id.as_str())
            .expect("the browser got the event");
        assert_eq!(message.urgency.as_deref(), Some(urgency));

        let pushes = apns.delivered_to(&iphone);
        let push = pushes
            .iter()
            .find(|p| p.alert.event_id.to_string() == id)
            .expect("the iPhone's push");
        assert_eq!(push.alert.priority, Priority::parse(priority).expect("p"));
        let notifier::push::apns::Rendered {
            payload,
            priority: apns_priority,
            ..
        } = notifier::push::apns::render(&push.alert, "com.example.tocsin").expect("renders");
        assert_eq!(payload["aps"]["interruption-level"], level, "{payload}");
        assert_eq!(payload["aps"]["sound"].as_str(), sound, "{payload}");
        assert_eq!(payload["aps"]["alert"]["title"], "💸 Payment failed");
        let expected = if priority == "low" { "5" } else { "10" };
        assert_eq!(apns_priority, expected);
    }
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    app.stop().await;
}

/// An event written in markdown with a `url` reaches the browser, once the
/// push service has decrypted it, with its description as plain text and
/// the `url` a click opens; and the iPhone with the same text and the
/// `url` as custom data beside `eventId`. An event without one carries
/// none.
async fn a_markdown_event_with_a_url_reaches_web_push_and_apns_as_text_with_its_link(
    kind: StoreKind,
) {
    let Both {
        service,
        apns,
        app,
        key,
        endpoint,
        ..
    } = browser_and_recorded_apns(kind).await;
    let iphone = "ef".repeat(32);
    let device = json!({ "token": iphone, "environment": "sandbox" });
    assert_eq!(app.post("/v1/devices", &key, &device).await.status(), 201);
    let url = "https://ci.example.com/runs/42?tab=log";
    let body = json!({
        "channelName": "deploys",
        "title": "Deploy 42 failed",
        "description": "**Deploy 42** failed on `main`:\n\n- eu\n- [us](https://ci.example.com/us)",
        "parser": "markdown",
        "url": url,
    });
    let id = app.record_event(&key, &body).await;
    app.settled(&key, &id, "delivered").await;
    let plain = "Deploy 42 failed on main:\n• eu\n• us";

    let received = service.received(&endpoint);
    let message = received
        .iter()
        .find(|m| m.payload["eventId"] == id.as_str())
        .expect("the browser got the event");
    assert_eq!(message.payload["body"], plain, "{}", message.payload);
    assert_eq!(message.payload["url"], url);

    let push = apns
        .delivered_to(&iphone)
        .into_iter()
        .find(|p| p.alert.event_id.to_string() == id)
        .expect("the iPhone's push");
    let rendered =
        notifier::push::apns::render(&push.alert, "com.example.tocsin").expect("renders");
    assert_eq!(rendered.payload["aps"]["alert"]["body"], plain);
    assert_eq!(rendered.payload["url"], url);
    assert_eq!(rendered.payload["eventId"], id.as_str());

    let without = event(&app, &key).await;
    app.settled(&key, &without, "delivered").await;
    let received = service.received(&endpoint);
    let message = received
        .iter()
        .find(|m| m.payload["eventId"] == without.as_str())
        .expect("the browser got the event");
    assert_eq!(message.payload["url"], Value::Null);
    assert_eq!(message.payload["body"], "Card declined", "text as written");
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    app.stop().await;
}

/// `alertKey`: two events of the project with the same key reach the push
/// service with the same `Topic` and the browser with the same notification
/// `tag`, and Apple with the same `apns-collapse-id`; an event without one
/// collapses on its own id; the channel is the APNs `thread-id`.
async fn an_alert_key_replaces_the_earlier_alert_on_web_push_and_apns(kind: StoreKind) {
    let Both {
        service,
        apns,
        app,
        key,
        subscription,
        endpoint,
    } = browser_and_recorded_apns(kind).await;
    let iphone = "cd".repeat(32);
    let device = json!({ "token": iphone, "environment": "sandbox" });
    assert_eq!(app.post("/v1/devices", &key, &device).await.status(), 201);

    let mut ids = Vec::new();
    for (title, alert_key) in [
        ("Deploy 42 started", Some("deploy-42")),
        ("Deploy 42 succeeded", Some("deploy-42")),
        ("Disk full", None),
    ] {
        let mut body = json!({ "channelName": "deploys", "title": title });
        if let Some(alert_key) = alert_key {
            body["alertKey"] = json!(alert_key);
        }
        let reply = Reply::of(app.post_event(&key, &body).await).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        assert_eq!(reply.body["data"]["alertKey"], json!(alert_key));
        let id = reply.body["data"]["id"].as_str().expect("id").to_owned();
        let event = app.settled(&key, &id, "delivered").await;
        assert_eq!(
            event["alertKey"],
            json!(alert_key),
            "returned with the event"
        );
        ids.push(id);
    }
    let received = service.received(&endpoint);
    let message = |id: &str| {
        received
            .iter()
            .find(|m| m.payload["eventId"] == id)
            .expect("the browser got the event")
            .clone()
    };
    let (started, succeeded, disk) = (message(&ids[0]), message(&ids[1]), message(&ids[2]));
    assert_eq!(started.topic, succeeded.topic, "the same Topic");
    assert_eq!(
        started.payload["tag"], succeeded.payload["tag"],
        "the same tag"
    );
    assert_eq!(succeeded.payload["alertKey"], "deploy-42");
    assert_eq!(succeeded.payload["thread"], "deploys");
    assert_ne!(disk.topic, started.topic);
    assert_eq!(
        disk.payload["tag"],
        ids[2].as_str(),
        "no key: the event's own tag"
    );
    assert_eq!(disk.payload["alertKey"], Value::Null);
    let topic_of_key = started.topic.clone();

    let rendered = |id: &str| {
        let push = apns
            .delivered_to(&iphone)
            .into_iter()
            .find(|p| p.alert.event_id.to_string() == id)
            .expect("the iPhone's push");
        notifier::push::apns::render(&push.alert, "com.example.tocsin").expect("renders")
    };
    let (started, succeeded, disk) = (rendered(&ids[0]), rendered(&ids[1]), rendered(&ids[2]));
    assert!(started.collapse_id.is_some());
    assert_eq!(
        started.collapse_id, succeeded.collapse_id,
        "the same apns-collapse-id"
    );
    assert_eq!(disk.collapse_id.as_deref(), Some(ids[2].as_str()));
    assert_eq!(succeeded.payload["alertKey"], "deploy-42");
    assert_eq!(succeeded.payload["aps"]["thread-id"], "deploys");

    // Another project's event with the same key replaces nothing of this one's.
    let (other, _) = app.new_key().await;
    assert_eq!(register(&app, &other, &subscription).await.status, 201);
    let body =
        json!({ "channelName": "deploys", "title": "Deploy 42 started", "alertKey": "deploy-42" });
    let id = app.record_event(&other, &body).await;
    app.settled(&other, &id, "delivered").await;
    let received = service.received(&endpoint);
    let theirs = received
        .iter()
        .find(|m| m.payload["eventId"] == id.as_str())
        .expect("delivered");
    assert_ne!(theirs.topic, topic_of_key);
    assert!(service.faults().is_empty(), "{:?}", service.faults());
    app.stop().await;
}

async fn the_webpush_key_is_404_when_not_configured(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let reply = Reply::of(app.get("/v1/webpush/key").await).await;
    reply.assert_error_envelope(404);
    app.stop().await;
}

for_each_store!(
    a_subscription_gets_the_event_once_signed_and_encrypted,
    gone_subscriptions_are_deactivated_and_413_is_rejected,
    a_429_is_retried_no_sooner_than_retry_after,
    unsafe_endpoints_are_refused_at_registration,
    keys_no_push_could_use_are_refused_at_registration,
    endpoints_are_checked_again_at_send,
    fcm_devices_are_stored_listed_and_logged,
    the_priority_reaches_web_push_and_apns,
    a_markdown_event_with_a_url_reaches_web_push_and_apns_as_text_with_its_link,
    an_alert_key_replaces_the_earlier_alert_on_web_push_and_apns,
    the_webpush_key_is_404_when_not_configured,
);

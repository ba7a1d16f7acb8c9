//! `POST /v1/events`: what is stored and returned.

use serde_json::json;
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store};
use uuid::Uuid;

async fn an_event_with_every_field_is_stored_and_returned(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let body = json!({
        "channelName": "payments",
        "title": "Payment failed",
        "description": "Card declined for order 42",
        "icon": "💳",
        "tags": ["billing", "urgent"],
        "metadata": { "orderId": 42, "amount": 19.99, "nested": { "ok": true, "list": [1, "two", null] } },
        "userId": "user-7",
        "notify": false,
        "source": "billing-service",
        "priority": "high",
    });
    let reply = Reply::of(app.post_event(&key, &body).await).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["success"], json!(true));
    reply.assert_request_id();
    reply.assert_rate_limit_headers();
    let data = &reply.body["data"];
    for field in [
        "channelName",
        "title",
        "description",
        "icon",
        "tags",
        "metadata",
        "userId",
        "notify",
        "source",
        "priority",
    ] {
        assert_eq!(data[field], body[field], "field {field} differs: {data}");
    }
    let id: Uuid = data["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("id is a UUID");
    assert_eq!(id.get_version_num(), 7, "ids are time-ordered UUIDv7");
    assert!(
        data["createdAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') || t.contains("+00:00"))
    );

    let stored = app
        .store
        .get_event(&scope, id)
        .await
        .expect("store answers")
        .expect("event stored");
    assert_eq!(stored.title, "Payment failed");
    assert_eq!(stored.priority, common::store::Priority::High);
    let looked_up = Reply::of(app.get_as(&format!("/v1/events/{id}"), &key).await).await;
    assert_eq!(
        looked_up.body["data"]["priority"], "high",
        "{}",
        looked_up.body
    );
    assert_eq!(stored.metadata.get("orderId"), Some(&json!(42)));
    assert_eq!(
        stored.metadata.get("nested"),
        Some(&body["metadata"]["nested"])
    );
    assert!(!stored.notify);
}

async fn optional_fields_get_their_defaults(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let reply = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "signups", "title": "New user" }),
        )
        .await,
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let data = &reply.body["data"];
    assert_eq!(data["notify"], json!(true), "notify defaults to true");
    assert_eq!(data["priority"], "normal", "priority defaults to normal");
    assert_eq!(data["tags"], json!([]));
    assert_eq!(data["metadata"], json!({}));
    for field in ["description", "icon", "userId", "source"] {
        assert!(data[field].is_null(), "{field} should be null: {data}");
    }
}

async fn the_channel_is_created_on_first_use(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    assert!(
        app.store
            .channel_names(&scope)
            .await
            .expect("channels")
            .is_empty()
    );
    for channel in ["payments", "signups", "payments"] {
        let r = app
            .post_event(&key, &json!({ "channelName": channel, "title": "t" }))
            .await;
        assert_eq!(r.status(), 201);
    }
    let channels = app.store.channel_names(&scope).await.expect("channels");
    assert_eq!(channels, vec!["payments".to_owned(), "signups".to_owned()]);
}

async fn event_ids_are_ordered_by_creation(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let reply = Reply::of(
            app.post_event(
                &key,
                &json!({ "channelName": "c", "title": format!("e{i}") }),
            )
            .await,
        )
        .await;
        ids.push(reply.body["data"]["id"].as_str().expect("id").to_owned());
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
}

async fn events_are_scoped_to_the_key_s_project(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key_a, scope_a) = app.new_key().await;
    let (_, scope_b) = app.new_key().await;
    let reply = Reply::of(
        app.post_event(&key_a, &json!({ "channelName": "c", "title": "mine" }))
            .await,
    )
    .await;
    let id: Uuid = reply.body["data"]["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("uuid");
    assert!(
        app.store
            .get_event(&scope_a, id)
            .await
            .expect("store")
            .is_some()
    );
    assert!(
        app.store
            .get_event(&scope_b, id)
            .await
            .expect("store")
            .is_none()
    );
    assert_eq!(app.store.events_stored(&scope_a).await.expect("count"), 1);
    assert_eq!(app.store.events_stored(&scope_b).await.expect("count"), 0);
    assert!(
        app.store
            .channel_names(&scope_b)
            .await
            .expect("channels")
            .is_empty()
    );
}

async fn unicode_text_round_trips_unchanged(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let body = json!({
        "channelName": "international",
        "title": "Grüße aus Köln — 東京 👋🏽",
        "metadata": { "ключ": "значение", "a.b": 1, "$dollar": "kept" },
    });
    let reply = Reply::of(app.post_event(&key, &body).await).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["data"]["title"], body["title"]);
    assert_eq!(reply.body["data"]["metadata"], body["metadata"]);
    let id: Uuid = reply.body["data"]["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("uuid");
    let stored = app
        .store
        .get_event(&scope, id)
        .await
        .expect("store")
        .expect("stored");
    assert_eq!(stored.title, body["title"].as_str().expect("title"));
    assert_eq!(serde_json::Value::Object(stored.metadata), body["metadata"]);
}

for_each_store!(
    an_event_with_every_field_is_stored_and_returned,
    optional_fields_get_their_defaults,
    the_channel_is_created_on_first_use,
    event_ids_are_ordered_by_creation,
    events_are_scoped_to_the_key_s_project,
    unicode_text_round_trips_unchanged,
);

//! `POST /v1/events`: what is stored and returned.

use serde_json::{Value, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store, path};
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

/// `parser: "markdown"` keeps the description as written and shows it
/// rendered, sanitised: markdown's own tags, no raw HTML, no script or
/// handler, only http(s) and mailto links with `rel="noopener noreferrer"`.
/// A text description has no HTML.
async fn a_markdown_description_is_shown_rendered_and_sanitised(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let markdown = "**Deploy** of `api` done, see [the log](https://ci.example.com/42).\n\n\
        <script>alert(1)</script> <img src=x onerror=alert(2)> [x](javascript:alert(3))";
    let reply = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "deploys", "title": "Deployed", "description": markdown,
                "parser": "markdown", "notify": false }),
        )
        .await,
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let data = &reply.body["data"];
    assert_eq!(data["parser"], "markdown");
    assert_eq!(data["description"], markdown, "kept as written");
    let html = data["descriptionHtml"].as_str().expect("rendered");
    assert!(html.contains("<strong>Deploy</strong>"), "{html}");
    assert!(html.contains("<code>api</code>"), "{html}");
    assert!(
        html.contains(
            "<a href=\"https://ci.example.com/42\" rel=\"noopener noreferrer\">the log</a>"
        ),
        "{html}"
    );
    // Escaped text may spell anything; markup may not.
    for banned in ["<script", "<img", "href=\"javascript"] {
        assert!(!html.contains(banned), "{banned} in {html}");
    }
    assert!(
        html.contains("&lt;script&gt;"),
        "raw HTML shown as text: {html}"
    );
    // Listings and lookups show the same.
    let id = data["id"].as_str().expect("id");
    let looked_up = Reply::of(app.get_as(&format!("/v1/events/{id}"), &key).await).await;
    assert_eq!(
        looked_up.body["data"]["descriptionHtml"],
        data["descriptionHtml"]
    );
    let listed = Reply::of(app.get_as("/v1/events", &key).await).await;
    assert_eq!(
        listed.body["data"]["items"][0]["descriptionHtml"],
        data["descriptionHtml"]
    );

    let text = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "deploys", "title": "Plain", "description": "**not bold**" }),
        )
        .await,
    )
    .await;
    assert_eq!(text.body["data"]["parser"], "text");
    assert_eq!(text.body["data"]["descriptionHtml"], Value::Null);
    let bad = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "c", "title": "t", "parser": "html" }),
        )
        .await,
    )
    .await;
    bad.assert_error_envelope(400);
    assert_eq!(bad.fault_paths(), vec![path(&["parser"])], "{}", bad.body);
}

/// `url` is stored and shown; anything but an absolute http(s) URL is a
/// 400 at `url`.
async fn a_url_must_be_http_and_is_returned(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let url = "https://billing.example.com/orders/1042?tab=refunds#top";
    let reply = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "c", "title": "t", "url": url }),
        )
        .await,
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["data"]["url"], url);
    let none = Reply::of(
        app.post_event(&key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await;
    assert_eq!(none.body["data"]["url"], Value::Null);
    for bad in [
        json!("javascript:alert(1)"),
        json!("ftp://example.com/x"),
        json!("/orders/1042"),
        json!("https://"),
        json!("http:// space.example.com"),
        json!(format!("https://example.com/{}", "a".repeat(2000))),
        json!(42),
    ] {
        let reply = Reply::of(
            app.post_event(
                &key,
                &json!({ "channelName": "c", "title": "t", "url": bad }),
            )
            .await,
        )
        .await;
        reply.assert_error_envelope(400);
        assert_eq!(
            reply.fault_paths(),
            vec![path(&["url"])],
            "{bad}: {}",
            reply.body
        );
    }
}

/// A shortcode is stored and shown as its emoji; one nobody knows is a
/// 400 at `icon`.
async fn an_icon_shortcode_is_stored_as_its_emoji(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    for (code, emoji) in [
        (":moneybag:", "💰"),
        (":rotating_light:", "🚨"),
        (":+1:", "👍"),
    ] {
        let reply = Reply::of(
            app.post_event(
                &key,
                &json!({ "channelName": "c", "title": "t", "icon": code }),
            )
            .await,
        )
        .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        assert_eq!(reply.body["data"]["icon"], emoji, "{code}");
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
        assert_eq!(stored.icon.as_deref(), Some(emoji), "stored as the emoji");
    }
    for bad in [":no_such_emoji:", ":moneybag", "moneybag"] {
        let reply = Reply::of(
            app.post_event(
                &key,
                &json!({ "channelName": "c", "title": "t", "icon": bad }),
            )
            .await,
        )
        .await;
        reply.assert_error_envelope(400);
        assert_eq!(
            reply.fault_paths(),
            vec![path(&["icon"])],
            "{bad}: {}",
            reply.body
        );
    }
}

for_each_store!(
    an_event_with_every_field_is_stored_and_returned,
    optional_fields_get_their_defaults,
    the_channel_is_created_on_first_use,
    event_ids_are_ordered_by_creation,
    events_are_scoped_to_the_key_s_project,
    unicode_text_round_trips_unchanged,
    a_markdown_description_is_shown_rendered_and_sanitised,
    a_url_must_be_http_and_is_returned,
    an_icon_shortcode_is_stored_as_its_emoji,
);

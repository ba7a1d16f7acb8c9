//! Strict validation: every fault listed with its path, no coercion, size
//! limits, malformed JSON and wrong content types — and nothing stored.

use serde_json::{Value, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store, path};

/// Posts an event and expects a 400 that stores nothing.
async fn rejected(app: &TestApp, key: &str, scope: &common::store::Scope, body: Value) -> Reply {
    let reply = Reply::of(app.post_event(key, &body).await).await;
    reply.assert_error_envelope(400);
    reply.assert_rate_limit_headers();
    assert_eq!(reply.body["error"], json!("validation failed"));
    assert_eq!(
        app.store.events_stored(scope).await.expect("count"),
        0,
        "nothing may be stored"
    );
    assert!(
        app.store
            .channel_names(scope)
            .await
            .expect("channels")
            .is_empty()
    );
    reply
}

async fn a_missing_channel_name_is_reported_at_its_path(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let reply = rejected(&app, &key, &scope, json!({ "title": "t" })).await;
    assert_eq!(
        reply.details(),
        vec![(path(&["channelName"]), "is required".to_owned())]
    );
}

async fn an_unknown_or_mistyped_priority_is_refused_at_its_path(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    for priority in [json!("urgent"), json!("HIGH"), json!(2), json!(null)] {
        let body = json!({ "channelName": "c", "title": "t", "priority": priority });
        let reply = rejected(&app, &key, &scope, body).await;
        let paths = reply.fault_paths();
        assert!(
            !paths.is_empty() && paths.iter().all(|p| *p == path(&["priority"])),
            "{priority}: {}",
            reply.body
        );
    }
}

async fn every_fault_is_listed_and_nothing_is_coerced(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let reply = rejected(
        &app,
        &key,
        &scope,
        json!({
            "channelName": "",
            "title": 5,
            "description": true,
            "tags": ["ok", "", 3],
            "metadata": [],
            "userId": 12,
            "notify": "yes",
            "source": null,
            "colour": "red",
        }),
    )
    .await;
    let mut paths = reply.fault_paths();
    paths.sort();
    let mut expected = vec![
        path(&["channelName"]),
        path(&["title"]),
        path(&["description"]),
        path(&["tags", "1"]),
        path(&["tags", "2"]),
        path(&["metadata"]),
        path(&["userId"]),
        path(&["notify"]),
        path(&["source"]),
        path(&["colour"]),
    ];
    expected.sort();
    assert_eq!(paths, expected, "{}", reply.body);
    for (_, message) in reply.details() {
        assert!(!message.is_empty());
    }
    let title = reply
        .details()
        .into_iter()
        .find(|(p, _)| *p == path(&["title"]))
        .expect("title fault");
    assert_eq!(title.1, "must be a string");
}

async fn icons_must_be_exactly_one_emoji(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    for icon in ["🚀", "👍🏽", "🏳️‍🌈", "🇫🇷"] {
        let r = Reply::of(
            app.post_event(
                &key,
                &json!({ "channelName": "c", "title": "t", "icon": icon }),
            )
            .await,
        )
        .await;
        assert_eq!(r.status, 201, "{icon} must be accepted: {}", r.body);
        assert_eq!(r.body["data"]["icon"], json!(icon));
    }
    let (other_key, other_scope) = app.new_key().await;
    for icon in ["ab", "🚀🚀", ":no_such_emoji:", ":rocket", "", "a"] {
        let r = rejected(
            &app,
            &other_key,
            &other_scope,
            json!({ "channelName": "c", "title": "t", "icon": icon }),
        )
        .await;
        assert_eq!(
            r.fault_paths(),
            vec![path(&["icon"])],
            "{icon:?}: {}",
            r.body
        );
    }
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 4);
}

async fn user_id_may_be_a_string_or_null(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    for user_id in [json!("u1"), Value::Null] {
        let r = Reply::of(
            app.post_event(
                &key,
                &json!({ "channelName": "c", "title": "t", "userId": user_id }),
            )
            .await,
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(r.body["data"]["userId"], user_id);
    }
    let (k2, s2) = app.new_key().await;
    for bad in [json!(7), json!(""), json!(["u"]), json!({})] {
        let r = rejected(
            &app,
            &k2,
            &s2,
            json!({ "channelName": "c", "title": "t", "userId": bad }),
        )
        .await;
        assert_eq!(r.fault_paths(), vec![path(&["userId"])]);
    }
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 2);
}

async fn size_limits_are_enforced(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let long = |n: usize| "x".repeat(n);
    let cases = [
        (
            json!({ "channelName": long(101), "title": "t" }),
            path(&["channelName"]),
        ),
        (
            json!({ "channelName": "c", "title": long(201) }),
            path(&["title"]),
        ),
        (
            json!({ "channelName": "c", "title": "t", "description": long(4001) }),
            path(&["description"]),
        ),
        (
            json!({ "channelName": "c", "title": "t", "tags": vec!["t"; 21] }),
            path(&["tags"]),
        ),
        (
            json!({ "channelName": "c", "title": "t", "tags": [long(65)] }),
            path(&["tags", "0"]),
        ),
        (
            json!({ "channelName": "c", "title": "t", "source": long(101) }),
            path(&["source"]),
        ),
        (
            json!({ "channelName": "c", "title": "t", "userId": long(256) }),
            path(&["userId"]),
        ),
    ];
    for (body, expected) in cases {
        let r = rejected(&app, &key, &scope, body).await;
        assert_eq!(r.fault_paths(), vec![expected]);
    }
    let many: serde_json::Map<String, Value> =
        (0..51).map(|i| (format!("k{i}"), json!(i))).collect();
    let r = rejected(
        &app,
        &key,
        &scope,
        json!({ "channelName": "c", "title": "t", "metadata": many }),
    )
    .await;
    assert_eq!(r.fault_paths(), vec![path(&["metadata"])]);

    let mut deep = json!("bottom");
    for _ in 0..20 {
        deep = json!({ "d": deep });
    }
    let r = rejected(
        &app,
        &key,
        &scope,
        json!({ "channelName": "c", "title": "t", "metadata": deep }),
    )
    .await;
    assert_eq!(r.fault_paths().len(), 1, "{}", r.body);
    assert_eq!(r.fault_paths()[0][0], "metadata");

    // Limits are inclusive: the largest allowed values pass.
    let ok = json!({
        "channelName": long(100), "title": long(200), "description": long(4000),
        "tags": vec![long(64); 20], "source": long(100), "userId": long(255),
    });
    let r = Reply::of(app.post_event(&key, &ok).await).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

async fn a_body_over_the_limit_gets_413(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let body =
        json!({ "channelName": "c", "title": "t", "metadata": { "blob": "x".repeat(70_000) } });
    let reply = Reply::of(app.post_event(&key, &body).await).await;
    reply.assert_error_envelope(413);
    reply.assert_rate_limit_headers();
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 0);
}

async fn malformed_json_and_wrong_content_types_get_the_envelope(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let send = |body: &'static str, content_type: Option<&'static str>| {
        let mut req = app
            .client
            .post(app.url("/v1/events"))
            .bearer_auth(&key)
            .body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        req.send()
    };
    let malformed = Reply::of(
        send("{\"channelName\": \"c\", ", Some("application/json"))
            .await
            .expect("sent"),
    )
    .await;
    malformed.assert_error_envelope(400);
    assert_eq!(malformed.fault_paths(), vec![Vec::<String>::new()]);

    let empty = Reply::of(send("", Some("application/json")).await.expect("sent")).await;
    empty.assert_error_envelope(400);

    let not_object = Reply::of(send("[1,2]", Some("application/json")).await.expect("sent")).await;
    not_object.assert_error_envelope(400);

    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let r = Reply::of(
            send("{\"channelName\":\"c\",\"title\":\"t\"}", ct)
                .await
                .expect("sent"),
        )
        .await;
        r.assert_error_envelope(415);
        r.assert_rate_limit_headers();
    }
    let charset = Reply::of(
        send(
            "{\"channelName\":\"c\",\"title\":\"t\"}",
            Some("application/json; charset=utf-8"),
        )
        .await
        .expect("sent"),
    )
    .await;
    assert_eq!(charset.status, 201, "{}", charset.body);
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 1);
}

/// A NUL in an object key is valid JSON, and BSON cannot hold it in a key:
/// both stores take it and give it back as sent (MongoDB through an escape),
/// at any depth; so do keys MongoDB treats specially elsewhere (`$…`, `a.b`,
/// the empty key).
async fn any_object_key_round_trips_nul_included(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let nul = "a\u{0}b";
    let metadata = json!({
        nul: 1,
        "ok": { "list": [{ "fine": 1 }, { nul: 2 }] },
        "\u{FFFF}0": "the escape itself",
        "$ref": 1,
        "a.b": { "$": [{ "": "x", "$id.y": 2 }] },
    });
    let r = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "c", "title": "t", "metadata": metadata }),
        )
        .await,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["metadata"], metadata);
    let id = r.body["data"]["id"].as_str().expect("id");
    let stored = Reply::of(app.get_as(&format!("/v1/events/{id}"), &key).await).await;
    assert_eq!(stored.body["data"]["metadata"], metadata, "read back");

    let user = json!({ "user_id": "u1", "properties": { "deep": { nul: true } } });
    let r = Reply::of(app.post("/v1/identify", &key, &user).await).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // A later merge reads the stored properties back and keeps them.
    let more = json!({ "user_id": "u1", "properties": { nul: "top" } });
    let r = Reply::of(app.post("/v1/identify", &key, &more).await).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["data"]["properties"],
        json!({ "deep": { nul: true }, nul: "top" })
    );
}

for_each_store!(
    any_object_key_round_trips_nul_included,
    a_missing_channel_name_is_reported_at_its_path,
    an_unknown_or_mistyped_priority_is_refused_at_its_path,
    every_fault_is_listed_and_nothing_is_coerced,
    icons_must_be_exactly_one_emoji,
    user_id_may_be_a_string_or_null,
    size_limits_are_enforced,
    a_body_over_the_limit_gets_413,
    malformed_json_and_wrong_content_types_get_the_envelope,
);

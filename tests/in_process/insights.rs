//! Insights (`/v1/insights`): set (201, then 200), increment (atomic,
//! creating, integers kept integers, refused with a path when the value is
//! not a number), list in creation order, delete (then 404), strict
//! validation with every fault's path, scopes, the per-project limit,
//! idempotent replays of both writes, and the `insight` messages of the
//! live stream, for changes made through this replica or written straight
//! into the shared store by another.

use std::time::Duration;

use common::store::{
    InsightNumber, InsightValue, KeyScope, Scope,
    insight::{MAX_INSIGHTS, MAX_MAGNITUDE},
};
use reqwest::Method;
use serde_json::{Value, json};
use tocsin_tests::{Reply, StoreKind, TestApp, contract::document, for_each_store, path};

/// How soon a change must show on an open stream.
const WITHIN: Duration = Duration::from_secs(2);

/// A key of a fresh project whose quota no test here reaches.
async fn busy_key(app: &TestApp) -> (String, Scope) {
    let project = format!("p{}", uuid::Uuid::new_v4().simple());
    let key = app.create_key("acme", &project, Some(1_000_000)).await;
    (key, Scope::new("acme", project))
}

async fn set(app: &TestApp, key: &str, body: Value) -> Reply {
    app.call(Method::POST, "/v1/insights", key, Some(&body))
        .await
}

async fn increment(app: &TestApp, key: &str, title: &str, by: Value) -> Reply {
    let body = json!({ "title": title, "value": { "$inc": by } });
    app.call(Method::PATCH, "/v1/insights", key, Some(&body))
        .await
}

async fn list(app: &TestApp, key: &str) -> Vec<Value> {
    let reply = app.call(Method::GET, "/v1/insights", key, None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body["data"]["insights"]
        .as_array()
        .expect("a list")
        .clone()
}

/// The titles listed, in order.
fn titles(insights: &[Value]) -> Vec<&str> {
    insights
        .iter()
        .map(|i| i["title"].as_str().expect("a title"))
        .collect()
}

/// `DELETE /v1/insights/{title}`, the title URL-encoded.
async fn delete(app: &TestApp, key: &str, title: &str) -> Reply {
    let encoded: String = url_encoded(title);
    app.call(
        Method::DELETE,
        &format!("/v1/insights/{encoded}"),
        key,
        None,
    )
    .await
}

/// Every byte but unreserved ASCII percent-encoded, as a path segment.
fn url_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

async fn setting_creates_then_updates_and_lists_in_creation_order(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let created = set(
        &app,
        &key,
        json!({ "title": "Revenue today", "value": 1250, "icon": "💰" }),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.assert_request_id();
    created.assert_rate_limit_headers();
    let data = &created.body["data"];
    assert_eq!(data["title"], "Revenue today");
    assert_eq!(data["value"], json!(1250));
    assert_eq!(data["icon"], "💰");
    assert_eq!(data["createdAt"], data["updatedAt"]);

    // Every kind of value; the order is the order of creation, not of
    // titles.
    for (title, value) in [
        ("Build status", json!("passing")),
        ("Active trials", json!(42)),
        ("Maintenance", json!(false)),
        ("Conversion", json!(0.125)),
    ] {
        let reply = set(&app, &key, json!({ "title": title, "value": value })).await;
        assert_eq!(reply.status, 201, "{title}: {}", reply.body);
        assert_eq!(reply.body["data"]["value"], value, "{title}");
        assert_eq!(reply.body["data"]["icon"], Value::Null, "{title}");
    }

    // Set again: 200, the new value, the icon kept when left out, the
    // creation time kept.
    let updated = set(
        &app,
        &key,
        json!({ "title": "Revenue today", "value": "n/a" }),
    )
    .await;
    assert_eq!(updated.status, 200, "{}", updated.body);
    let now = &updated.body["data"];
    assert_eq!(now["value"], "n/a");
    assert_eq!(now["icon"], "💰");
    assert_eq!(now["createdAt"], data["createdAt"]);
    assert!(
        now["updatedAt"].as_str() >= data["updatedAt"].as_str(),
        "{now}"
    );
    let iconed = set(
        &app,
        &key,
        json!({ "title": "Build status", "value": "failing", "icon": "🔴" }),
    )
    .await;
    assert_eq!(iconed.status, 200);
    assert_eq!(iconed.body["data"]["icon"], "🔴");

    let listed = list(&app, &key).await;
    assert_eq!(
        titles(&listed),
        [
            "Revenue today",
            "Build status",
            "Active trials",
            "Maintenance",
            "Conversion"
        ]
    );
    assert_eq!(listed[0], updated.body["data"], "listed as set answered");
    assert_eq!(listed[1]["value"], "failing");
    assert_eq!(listed[3]["value"], json!(false));
    for insight in &listed {
        let mut fields: Vec<&String> = insight.as_object().expect("an object").keys().collect();
        fields.sort();
        assert_eq!(
            fields,
            ["createdAt", "icon", "title", "updatedAt", "value"],
            "{insight}"
        );
    }
}

async fn an_increment_creates_then_adds_and_integers_stay_integers(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let created = increment(&app, &key, "Signups", json!(1999)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["data"]["value"], json!(1999));
    let added = increment(&app, &key, "Signups", json!(1)).await;
    assert_eq!(added.status, 200, "{}", added.body);
    // The body's text, not only its JSON value: 2000, not 2000.0.
    assert_eq!(added.body["data"]["value"].to_string(), "2000");
    let down = increment(&app, &key, "Signups", json!(-2000.0)).await;
    assert_eq!(
        down.body["data"]["value"].to_string(),
        "0",
        "a whole number"
    );

    // A fraction makes a float, and it stays one.
    let fraction = increment(&app, &key, "Signups", json!(0.5)).await;
    assert_eq!(fraction.status, 200);
    assert_eq!(fraction.body["data"]["value"], json!(0.5));
    let whole = increment(&app, &key, "Signups", json!(1.5)).await;
    assert_eq!(whole.body["data"]["value"].to_string(), "2.0");
    assert_eq!(list(&app, &key).await[0]["value"].to_string(), "2.0");

    // An icon given with an increment is set; the value set by a POST can
    // be incremented.
    let iconed = app
        .call(
            Method::PATCH,
            "/v1/insights",
            &key,
            Some(&json!({ "title": "Signups", "value": { "$inc": 1 }, "icon": "📈" })),
        )
        .await;
    assert_eq!(iconed.body["data"]["icon"], "📈");
    assert_eq!(
        set(&app, &key, json!({ "title": "Orders", "value": 10 }))
            .await
            .status,
        201
    );
    let orders = increment(&app, &key, "Orders", json!(5)).await;
    assert_eq!(orders.body["data"]["value"], json!(15));
}

async fn concurrent_increments_lose_none(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let per_client = 25;
    let clients = (0..8).map(|_| async {
        for _ in 0..per_client {
            let reply = increment(&app, &key, "Hits", json!(1)).await;
            assert!(reply.status == 200 || reply.status == 201, "{}", reply.body);
        }
    });
    futures::future::join_all(clients).await;
    assert_eq!(list(&app, &key).await[0]["value"], json!(8 * per_client));
}

async fn incrementing_what_is_not_a_number_is_a_400_with_its_path(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    set(&app, &key, json!({ "title": "Status", "value": "green" })).await;
    set(&app, &key, json!({ "title": "Flag", "value": true })).await;
    set(
        &app,
        &key,
        json!({ "title": "Big", "value": MAX_MAGNITUDE }),
    )
    .await;
    for (title, kind_named) in [("Status", "a string"), ("Flag", "a boolean")] {
        let refused = increment(&app, &key, title, json!(1)).await;
        refused.assert_error_envelope(400);
        let details = refused.details();
        assert_eq!(details.len(), 1, "{}", refused.body);
        assert_eq!(details[0].0, path(&["value"]));
        assert!(
            details[0].1.contains(kind_named) && details[0].1.contains("not a number"),
            "{}",
            details[0].1
        );
    }
    let beyond = increment(&app, &key, "Big", json!(1)).await;
    beyond.assert_error_envelope(400);
    assert_eq!(beyond.fault_paths(), [path(&["value", "$inc"])]);
    // Nothing changed.
    let listed = list(&app, &key).await;
    assert_eq!(listed[0]["value"], "green");
    assert_eq!(listed[1]["value"], json!(true));
    assert_eq!(listed[2]["value"], json!(MAX_MAGNITUDE));
    assert_eq!(
        increment(&app, &key, "Big", json!(-MAX_MAGNITUDE))
            .await
            .body["data"]["value"],
        json!(0)
    );
}

async fn deleting_removes_an_insight_and_then_it_is_a_404(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    // A title that needs encoding in a path: spaces, a slash, a percent.
    let title = "Revenue / day 100%";
    set(&app, &key, json!({ "title": title, "value": 1 })).await;
    set(&app, &key, json!({ "title": "Kept", "value": 2 })).await;
    let deleted = delete(&app, &key, title).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert_eq!(deleted.body["data"]["title"], title);
    assert_eq!(deleted.body["data"]["deleted"], true);
    assert!(deleted.body["data"]["deletedAt"].is_string());
    assert_eq!(titles(&list(&app, &key).await), ["Kept"]);
    delete(&app, &key, title).await.assert_error_envelope(404);
    delete(&app, &key, "Never set")
        .await
        .assert_error_envelope(404);

    // Set again: a new insight (201), created now, after the one kept.
    let again = set(&app, &key, json!({ "title": title, "value": 3 })).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(titles(&list(&app, &key).await), ["Kept", title]);
    // An increment after a deletion starts again from nothing.
    delete(&app, &key, title).await;
    let restarted = increment(&app, &key, title, json!(5)).await;
    assert_eq!(
        (restarted.status, &restarted.body["data"]["value"]),
        (201, &json!(5))
    );
}

async fn invalid_bodies_list_every_fault_with_its_path(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let faults = async |method: Method, body: Value| {
        let reply = app.call(method, "/v1/insights", &key, Some(&body)).await;
        reply.assert_error_envelope(400);
        let mut details = reply.details();
        details.sort();
        details
    };
    let paths = |details: &[(Vec<String>, String)]| -> Vec<Vec<String>> {
        details.iter().map(|(p, _)| p.clone()).collect()
    };

    // Every fault at once: the title, the value, an unknown field.
    let all = faults(
        Method::POST,
        json!({ "title": "", "value": [1], "icon": "rocket", "colour": "red" }),
    )
    .await;
    assert_eq!(
        paths(&all),
        [
            path(&["colour"]),
            path(&["icon"]),
            path(&["title"]),
            path(&["value"])
        ]
    );
    let value = &all
        .iter()
        .find(|(p, _)| *p == path(&["value"]))
        .expect("value")
        .1;
    assert_eq!(value, "must be a string, a number or a boolean");

    for (body, at, words) in [
        (
            json!({ "title": "t".repeat(101), "value": 1 }),
            "title",
            "1 to 100 characters",
        ),
        (
            json!({ "title": "..", "value": 1 }),
            "title",
            "other than dots",
        ),
        (
            json!({ "title": 5, "value": 1 }),
            "title",
            "must be a string",
        ),
        (json!({ "value": 1 }), "title", "is required"),
        (json!({ "title": "t" }), "value", "is required"),
        (
            json!({ "title": "t", "value": null }),
            "value",
            "must be a string, a number or a boolean",
        ),
        (
            json!({ "title": "t", "value": { "$inc": 1 } }),
            "value",
            "must be a string, a number or a boolean",
        ),
        (
            json!({ "title": "t", "value": "" }),
            "value",
            "must not be empty",
        ),
        (
            json!({ "title": "t", "value": "x".repeat(201) }),
            "value",
            "at most 200 characters",
        ),
        (
            json!({ "title": "t", "value": MAX_MAGNITUDE as f64 * 2.0 }),
            "value",
            "must be at most 9007199254740991",
        ),
    ] {
        let found = faults(Method::POST, body.clone()).await;
        assert_eq!(paths(&found), [path(&[at])], "{body}");
        assert!(found[0].1.contains(words), "{body}: {:?}", found[0].1);
        assert!(
            !found[0].1.contains(".0"),
            "a limit as written: {:?}",
            found[0].1
        );
    }

    // The increment: `value` is exactly `{"$inc": <number>}`.
    for (body, at) in [
        (json!({ "title": "t", "value": 1 }), path(&["value"])),
        (
            json!({ "title": "t", "value": {} }),
            path(&["value", "$inc"]),
        ),
        (
            json!({ "title": "t", "value": { "$inc": "1" } }),
            path(&["value", "$inc"]),
        ),
        (
            json!({ "title": "t", "value": { "$inc": true } }),
            path(&["value", "$inc"]),
        ),
        (
            json!({ "title": "t", "value": { "$inc": 1, "$set": 2 } }),
            path(&["value", "$set"]),
        ),
        (
            json!({ "title": "t", "value": { "$inc": 1e16 } }),
            path(&["value", "$inc"]),
        ),
        (
            json!({ "title": "", "value": { "$inc": 1 } }),
            path(&["title"]),
        ),
        (
            json!({ "title": "t", "value": { "$inc": 1 }, "by": 2 }),
            path(&["by"]),
        ),
    ] {
        let found = faults(Method::PATCH, body.clone()).await;
        assert_eq!(paths(&found), [at], "{body}: {found:?}");
    }

    // Not JSON numbers at all: NaN and infinities cannot be written, and a
    // number too large for a double is refused as unreadable.
    for text in [
        r#"{"title":"t","value":NaN}"#,
        r#"{"title":"t","value":1e999}"#,
        r#"{"title":"t","value":{"$inc":-Infinity}}"#,
    ] {
        for method in [Method::POST, Method::PATCH] {
            let reply = Reply::of(
                app.client
                    .request(method.clone(), app.url("/v1/insights"))
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .body(text)
                    .send()
                    .await
                    .expect("sent"),
            )
            .await;
            reply.assert_error_envelope(400);
        }
    }
    // Nothing was written by any of them.
    assert!(list(&app, &key).await.is_empty());
}

async fn writes_need_events_write_and_reads_events_read(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (full, scope) = busy_key(&app).await;
    set(&app, &full, json!({ "title": "Kept", "value": 1 })).await;
    let reader = app
        .create_key_with_scopes(&scope.org, &scope.project, &[KeyScope::EventsRead])
        .await;
    let writer = app
        .create_key_with_scopes(&scope.org, &scope.project, &[KeyScope::EventsWrite])
        .await;
    for reply in [
        set(&app, &reader, json!({ "title": "Kept", "value": 2 })).await,
        increment(&app, &reader, "Kept", json!(1)).await,
        delete(&app, &reader, "Kept").await,
    ] {
        reply.assert_error_envelope(403);
        assert!(
            reply.body["error"]
                .as_str()
                .is_some_and(|e| e.contains("events:write")),
            "{}",
            reply.body
        );
    }
    assert_eq!(list(&app, &reader).await[0]["value"], json!(1));
    let refused = app.call(Method::GET, "/v1/insights", &writer, None).await;
    refused.assert_error_envelope(403);
    assert_eq!(increment(&app, &writer, "Kept", json!(1)).await.status, 200);
}

async fn idempotent_replays_of_a_set_and_an_increment_apply_once(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let send = async |method: Method, idempotency_key: &str, body: &Value| {
        Reply::of(
            app.client
                .request(method, app.url("/v1/insights"))
                .bearer_auth(&key)
                .header("Idempotency-Key", idempotency_key)
                .json(body)
                .send()
                .await
                .expect("sent"),
        )
        .await
    };
    let body = json!({ "title": "Deploys", "value": 10 });
    let first = send(Method::POST, "set-1", &body).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let replay = send(Method::POST, "set-1", &body).await;
    assert_eq!(replay.status, 201, "the original status");
    assert_eq!(replay.header("x-idempotent-replay"), Some("true"));
    assert_eq!(replay.body, first.body);

    let bump = json!({ "title": "Deploys", "value": { "$inc": 5 } });
    let once = send(Method::PATCH, "inc-1", &bump).await;
    assert_eq!(once.status, 200, "{}", once.body);
    assert_eq!(once.body["data"]["value"], json!(15));
    for _ in 0..3 {
        let again = send(Method::PATCH, "inc-1", &bump).await;
        assert_eq!(again.status, 200);
        assert_eq!(again.header("x-idempotent-replay"), Some("true"));
        assert_eq!(again.body, once.body);
    }
    assert_eq!(list(&app, &key).await[0]["value"], json!(15), "added once");
    // The key with another body, or on the other write: 422.
    let other = json!({ "title": "Deploys", "value": { "$inc": 6 } });
    send(Method::PATCH, "inc-1", &other)
        .await
        .assert_error_envelope(422);
    send(Method::POST, "inc-1", &body)
        .await
        .assert_error_envelope(422);
    // A refused increment (400) keeps nothing: the key is free again.
    set(&app, &key, json!({ "title": "Status", "value": "ok" })).await;
    let text = json!({ "title": "Status", "value": { "$inc": 1 } });
    send(Method::PATCH, "inc-2", &text)
        .await
        .assert_error_envelope(400);
    let fresh = json!({ "title": "Fresh", "value": { "$inc": 1 } });
    assert_eq!(send(Method::PATCH, "inc-2", &fresh).await.status, 201);
}

async fn a_project_holds_at_most_a_hundred_insights(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    for n in 0..MAX_INSIGHTS {
        let reply = set(
            &app,
            &key,
            json!({ "title": format!("i{n:03}"), "value": n }),
        )
        .await;
        assert_eq!(reply.status, 201, "{n}: {}", reply.body);
    }
    let full = set(&app, &key, json!({ "title": "one more", "value": 1 })).await;
    full.assert_error_envelope(409);
    assert!(
        full.body["error"]
            .as_str()
            .is_some_and(|e| e.contains(&MAX_INSIGHTS.to_string())),
        "{}",
        full.body
    );
    assert_eq!(full.header("retry-after"), None, "not worth retrying");
    increment(&app, &key, "one more", json!(1))
        .await
        .assert_error_envelope(409);
    // The ones it has still change; a deletion makes room.
    assert_eq!(increment(&app, &key, "i007", json!(1)).await.status, 200);
    assert_eq!(delete(&app, &key, "i000").await.status, 200);
    assert_eq!(
        increment(&app, &key, "one more", json!(1)).await.status,
        201
    );
    assert_eq!(list(&app, &key).await.len(), MAX_INSIGHTS);
    // Another project has room of its own.
    let (other, _) = busy_key(&app).await;
    assert_eq!(
        set(&app, &other, json!({ "title": "one more", "value": 1 }))
            .await
            .status,
        201
    );
}

async fn insights_are_scoped_to_their_project(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (a, _) = busy_key(&app).await;
    let (b, _) = busy_key(&app).await;
    set(&app, &a, json!({ "title": "Same", "value": "a's" })).await;
    let theirs = increment(&app, &b, "Same", json!(1)).await;
    assert_eq!(theirs.status, 201, "another project's is another insight");
    assert_eq!(list(&app, &a).await[0]["value"], "a's");
    delete(&app, &b, "Same").await;
    assert_eq!(list(&app, &a).await.len(), 1);
}

/// One Server-Sent Event (comments are skipped).
#[derive(Debug)]
struct Message {
    id: Option<String>,
    event: Option<String>,
    data: Value,
}

/// Reads messages off an open stream.
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn open(app: &TestApp, key: &str, query: &str) -> Self {
        let response = app
            .client
            .get(app.url(&format!("/v1/stream{query}")))
            .bearer_auth(key)
            .send()
            .await
            .expect("stream opened");
        assert_eq!(response.status(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next message within `wait`, or `None`.
    async fn next(&mut self, wait: Duration) -> Option<Message> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, None, String::new());
                for line in block.lines() {
                    match line.split_once(':') {
                        Some(("id", v)) => id = Some(v.trim_start().to_owned()),
                        Some(("event", v)) => event = Some(v.trim_start().to_owned()),
                        Some(("data", v)) => data.push_str(v.trim_start()),
                        _ => {}
                    }
                }
                if !data.is_empty() {
                    let data = serde_json::from_str(&data).expect("data is JSON");
                    return Some(Message { id, event, data });
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .ok()?
                .expect("stream readable")?;
            self.buffer
                .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }

    /// The next message, which must be an insight's of `kind`.
    async fn insight(&mut self, kind: &str) -> Value {
        let message = self.next(WITHIN).await.expect("a message in time");
        assert_eq!(message.event.as_deref(), Some(kind), "{message:?}");
        assert_eq!(message.id, None, "an insight's message has no id line");
        message.data
    }
}

async fn the_stream_carries_insight_messages_from_every_replica(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = busy_key(&app).await;
    let (other, _) = busy_key(&app).await;
    set(&app, &key, json!({ "title": "Before", "value": 1 })).await;
    let mut stream = Stream::open(&app, &key, "").await;
    // A channel's stream still gets the project's insights.
    let mut channel = Stream::open(&app, &key, "?channel=deploys").await;

    let set_reply = set(
        &app,
        &key,
        json!({ "title": "Revenue", "value": 100, "icon": "💰" }),
    )
    .await;
    let data = stream.insight("insight").await;
    assert_eq!(
        data, set_reply.body["data"],
        "the insight as the API answers it"
    );
    assert_eq!(channel.insight("insight").await, data);

    let bumped = increment(&app, &key, "Revenue", json!(5)).await;
    assert_eq!(stream.insight("insight").await, bumped.body["data"]);

    // Events keep their id lines, among insights' messages.
    let event = app
        .post_event(
            &key,
            &json!({ "channelName": "c", "title": "t", "notify": false }),
        )
        .await;
    assert_eq!(event.status(), 201);
    let message = stream.next(WITHIN).await.expect("the event");
    assert_eq!(message.event.as_deref(), Some("event"));
    assert_eq!(message.id.as_deref(), message.data["id"].as_str());

    // Written straight into the shared store, as another replica would:
    // this replica's poller finds it.
    let (elsewhere, created) = app
        .store
        .increment_insight(
            &scope,
            "Revenue",
            InsightNumber::Integer(10),
            None,
            common::time::now(),
        )
        .await
        .expect("stored")
        .expect("accepted");
    assert!(!created);
    let data = stream.insight("insight").await;
    assert_eq!(data["value"], json!(115));
    let updated_at = data["updatedAt"].as_str().expect("a time");
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(updated_at).expect("RFC 3339"),
        elsewhere.updated_at,
        "as the other replica stored it"
    );
    app.store
        .set_insight(
            &scope,
            "Build",
            &InsightValue::Text("passing".into()),
            Some("🟢"),
            common::time::now(),
        )
        .await
        .expect("stored")
        .expect("accepted");
    let build = stream.insight("insight").await;
    assert_eq!(
        (&build["title"], &build["value"], &build["icon"]),
        (&json!("Build"), &json!("passing"), &json!("🟢"))
    );
    assert!(
        app.store
            .delete_insight(&scope, "Build", common::time::now())
            .await
            .expect("deleted")
    );
    let gone = stream.insight("insight-deleted").await;
    assert_eq!(
        (&gone["title"], &gone["deleted"]),
        (&json!("Build"), &json!(true))
    );

    // Deleted through the API; another project's changes never show.
    set(&app, &other, json!({ "title": "Theirs", "value": 1 })).await;
    let deleted = delete(&app, &key, "Before").await;
    assert_eq!(
        stream.insight("insight-deleted").await,
        deleted.body["data"]
    );
    let quiet = stream.next(Duration::from_millis(600)).await;
    assert!(quiet.is_none(), "nothing else: {quiet:?}");
}

/// Many increments between two polls go out as one message with the
/// latest value, never as a stale one after a fresher one.
async fn a_burst_of_increments_ends_on_the_stream_at_the_final_value(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let mut stream = Stream::open(&app, &key, "").await;
    for _ in 0..20 {
        increment(&app, &key, "Clicks", json!(1)).await;
    }
    let mut last = Value::Null;
    while last != json!(20) {
        let message = stream.next(WITHIN).await.expect("the final value in time");
        let value = message.data["value"].clone();
        assert!(
            value.as_i64() > last.as_i64(),
            "{value} after {last}: not in order"
        );
        last = value;
    }
}

for_each_store!(
    setting_creates_then_updates_and_lists_in_creation_order,
    an_increment_creates_then_adds_and_integers_stay_integers,
    concurrent_increments_lose_none,
    incrementing_what_is_not_a_number_is_a_400_with_its_path,
    deleting_removes_an_insight_and_then_it_is_a_404,
    invalid_bodies_list_every_fault_with_its_path,
    writes_need_events_write_and_reads_events_read,
    idempotent_replays_of_a_set_and_an_increment_apply_once,
    a_project_holds_at_most_a_hundred_insights,
    insights_are_scoped_to_their_project,
    the_stream_carries_insight_messages_from_every_replica,
    a_burst_of_increments_ends_on_the_stream_at_the_final_value,
);

/// The published document is the contract: the value is one of three
/// types with their limits, the stream describes its three kinds of
/// message, and whatever the service accepts or refuses, the schema does
/// too.
#[tokio::test]
async fn the_published_document_states_the_insight_rules() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    let value = &schemas["SetInsightIn"]["properties"]["value"];
    let types: Vec<&Value> = value["oneOf"]
        .as_array()
        .expect("a oneOf")
        .iter()
        .map(|b| &b["type"])
        .collect();
    assert_eq!(
        types,
        [&json!("string"), &json!("number"), &json!("boolean")]
    );
    assert_eq!(schemas["IncrementInsightIn"]["additionalProperties"], false);
    assert_eq!(schemas["Increment"]["additionalProperties"], false);
    assert_eq!(schemas["Increment"]["required"], json!(["$inc"]));
    let set_op = &doc["paths"]["/v1/insights"]["post"];
    assert!(
        set_op["description"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("at most {MAX_INSIGHTS} insights"))),
        "{}",
        set_op["description"]
    );
    for method in ["post", "patch"] {
        let op = &doc["paths"]["/v1/insights"][method];
        assert!(
            op["parameters"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key")),
            "{method} takes an Idempotency-Key"
        );
        let conflict = &op["responses"]["409"];
        assert_eq!(conflict["headers"]["Retry-After"]["required"], false);
        assert!(
            conflict["description"]
                .as_str()
                .is_some_and(|d| d.contains("as many insights as it may have")),
            "{conflict}"
        );
    }
    let stream = doc
        .pointer("/paths/~1v1~1stream/get/responses/200/content/text~1event-stream/schema")
        .expect("the stream's message");
    assert_eq!(
        stream["properties"]["event"]["enum"],
        json!(["event", "insight", "insight-deleted"])
    );
    let data_of: Vec<&Value> = stream["oneOf"]
        .as_array()
        .expect("a branch per kind")
        .iter()
        .map(|b| &b["properties"]["data"]["contentSchema"]["$ref"])
        .collect();
    assert_eq!(
        data_of,
        [
            &json!("#/components/schemas/EventOut"),
            &json!("#/components/schemas/InsightOut"),
            &json!("#/components/schemas/DeletedInsight"),
        ]
    );

    let (key, _) = busy_key(&app).await;
    let validator = |name: &str| {
        let root = json!({ "$ref": format!("#/components/schemas/{name}"),
            "components": doc["components"] });
        jsonschema::draft202012::options()
            .build(&root)
            .expect("the schema compiles")
    };
    let set_in = validator("SetInsightIn");
    for value in [
        json!("ok"),
        json!(""),
        json!("x".repeat(200)),
        json!("x".repeat(201)),
        json!(MAX_MAGNITUDE),
        json!(MAX_MAGNITUDE + 1),
        json!(-MAX_MAGNITUDE),
        json!(-0.5),
        json!(true),
        json!(null),
        json!([]),
    ] {
        let body = json!({ "title": "Checked", "value": value });
        let served = set(&app, &key, body.clone()).await.status;
        assert_eq!(
            set_in.is_valid(&body),
            served < 300,
            "{body}: the service answered {served}"
        );
    }
    for title in [
        "a",
        "..",
        ".",
        "...",
        ".a",
        &"t".repeat(100),
        &"t".repeat(101),
    ] {
        let body = json!({ "title": title, "value": { "$inc": 1 } });
        let served = app
            .call(Method::PATCH, "/v1/insights", &key, Some(&body))
            .await
            .status;
        assert_eq!(
            validator("IncrementInsightIn").is_valid(&body),
            served < 300,
            "{title:?}: the service answered {served}"
        );
    }
}

//! Validation messages a person can act on: they say what is expected in
//! words (never a regular expression, never a long echo of the value), and an
//! unknown field close to a known one — a typo, or LogSnag's name for it —
//! names the field meant.

use serde_json::{Value, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store, path};

/// Posts `body` to `route` and expects a validation failure.
async fn rejected(app: &TestApp, key: &str, route: &str, body: &Value) -> Reply {
    let reply = Reply::of(app.post(route, key, body).await).await;
    reply.assert_error_envelope(400);
    assert_eq!(reply.body["error"], json!("validation failed"));
    reply
}

/// The messages at `at`, failing if there is none.
fn messages_at(reply: &Reply, at: &[&str]) -> Vec<String> {
    let found: Vec<String> = reply
        .details()
        .into_iter()
        .filter(|(p, _)| *p == path(at))
        .map(|(_, m)| m)
        .collect();
    assert!(!found.is_empty(), "no fault at {at:?}: {}", reply.body);
    found
}

async fn a_malformed_device_token_says_what_is_expected_without_the_regex(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let long = format!("fcm:{}", "APA91bH-abc".repeat(15));
    for token in ["fcm:APA91bH-abc", long.as_str()] {
        let reply = rejected(
            &app,
            &key,
            "/v1/devices",
            &json!({ "token": token, "environment": "production" }),
        )
        .await;
        let messages = messages_at(&reply, &["token"]);
        let message = &messages[0];
        for leak in ["^[0-9a-fA-F]+$", "does not match", "fcm:", "APA91bH"] {
            assert!(!message.contains(leak), "{leak:?} leaks into {message:?}");
        }
        for expected in ["APNs device token", "hex", "0-9", "a-f", "32 to 200"] {
            assert!(
                message.contains(expected),
                "{message:?} should name {expected:?}"
            );
        }
        // Too short and not hex: one fault, which says the whole rule.
        assert_eq!(
            reply.fault_paths(),
            vec![path(&["token"])],
            "{}",
            reply.body
        );
    }
}

async fn an_unknown_environment_lists_the_allowed_ones(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let token = "ab".repeat(32);
    let reply = rejected(
        &app,
        &key,
        "/v1/devices",
        &json!({ "token": token, "environment": "development" }),
    )
    .await;
    assert_eq!(
        reply.details(),
        vec![(
            path(&["environment"]),
            "must be one of: `production`, `sandbox`".to_owned()
        )]
    );
}

async fn a_logsnag_shaped_event_names_every_field_meant(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let reply = rejected(
        &app,
        &key,
        "/v1/events",
        &json!({
            "project": "my-saas",
            "channel": "payments",
            "event": "New subscription",
            "description": "jane@example.com subscribed",
            "icon": "💰",
            "user_id": "user-123",
            "notify": true,
        }),
    )
    .await;
    let mut details = reply.details();
    details.sort();
    let mut expected = vec![
        (
            path(&["channel"]),
            "unknown field `channel`; did you mean `channelName`?".to_owned(),
        ),
        (
            path(&["event"]),
            "unknown field `event`; did you mean `title`?".to_owned(),
        ),
        (
            path(&["project"]),
            "unknown field `project`; the API key selects the project; remove `project`".to_owned(),
        ),
        (
            path(&["user_id"]),
            "unknown field `user_id`; did you mean `userId`?".to_owned(),
        ),
        (path(&["channelName"]), "is required".to_owned()),
        (path(&["title"]), "is required".to_owned()),
    ];
    expected.sort();
    assert_eq!(details, expected, "{}", reply.body);
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 0);
}

async fn a_typo_in_a_field_name_names_the_field_meant(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let reply = rejected(
        &app,
        &key,
        "/v1/events",
        &json!({ "channelName": "c", "titel": "t", "channel_name": "c", "userID": "u" }),
    )
    .await;
    let mut details = reply.details();
    details.sort();
    let mut expected = vec![
        (
            path(&["titel"]),
            "unknown field `titel`; did you mean `title`?".to_owned(),
        ),
        (
            path(&["channel_name"]),
            "unknown field `channel_name`; remove it, `channelName` is already given".to_owned(),
        ),
        (
            path(&["userID"]),
            "unknown field `userID`; did you mean `userId`?".to_owned(),
        ),
        (path(&["title"]), "is required".to_owned()),
    ];
    expected.sort();
    assert_eq!(details, expected, "{}", reply.body);

    // Identify and devices take the same help: `userId` is identify's
    // `user_id`, and a field far from every known one lists them.
    let reply = rejected(
        &app,
        &key,
        "/v1/identify",
        &json!({ "userId": "u1", "project": "p" }),
    )
    .await;
    assert_eq!(
        messages_at(&reply, &["userId"]),
        vec!["unknown field `userId`; did you mean `user_id`?".to_owned()]
    );
    let reply = rejected(
        &app,
        &key,
        "/v1/devices",
        &json!({ "token": "ab".repeat(32), "environment": "sandbox", "colour": "red" }),
    )
    .await;
    assert_eq!(
        messages_at(&reply, &["colour"]),
        vec![
            "unknown field `colour`; the fields are `kind`, `token`, `environment`, `name`, \
             `channels`, `tags`, `minPriority`, `quietHours`, `burst`"
                .to_owned()
        ]
    );
}

for_each_store!(
    a_malformed_device_token_says_what_is_expected_without_the_regex,
    an_unknown_environment_lists_the_allowed_ones,
    a_logsnag_shaped_event_names_every_field_meant,
    a_typo_in_a_field_name_names_the_field_meant,
);

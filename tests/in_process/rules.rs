//! A device's alert rules end to end: what `POST /v1/devices`,
//! `PATCH /v1/devices/{id}` and `GET /v1/devices` take and show (defaults,
//! partial changes, clearing, faults with their paths, project scoping),
//! and what the notifier does with them: each device of the project gets
//! the push or a `filtered` outcome with its reason, in
//! `GET /v1/events/{id}` and in the metrics.

use serde_json::{Value, json};
use tocsin_tests::{
    Reply, StoreKind, TestApp, for_each_store, path,
    pipeline::{Pipeline, token},
};

/// Registers an APNs device with `extra` fields; returns it as answered.
async fn register(app: &TestApp, key: &str, n: u8, extra: Value) -> Value {
    let mut body = json!({ "token": token(n), "environment": "sandbox" });
    body.as_object_mut()
        .expect("object")
        .extend(extra.as_object().expect("object").clone());
    let reply = Reply::of(app.post("/v1/devices", key, &body).await).await;
    assert!(reply.status == 201 || reply.status == 200, "{}", reply.body);
    reply.body["data"].clone()
}

async fn patch(app: &TestApp, key: &str, id: &str, body: Value) -> Reply {
    app.call(
        reqwest::Method::PATCH,
        &format!("/v1/devices/{id}"),
        key,
        Some(&body),
    )
    .await
}

const RULES: [&str; 5] = ["channels", "tags", "minPriority", "quietHours", "burst"];

fn rules_of(device: &Value) -> Value {
    RULES
        .iter()
        .map(|f| (f.to_string(), device[f].clone()))
        .collect()
}

async fn rules_are_shown_with_defaults_changed_field_by_field_and_cleared(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let (other_key, _) = app.new_key().await;

    let plain = register(&app, &key, 1, json!({})).await;
    assert_eq!(
        rules_of(&plain),
        json!({ "channels": null, "tags": null, "minPriority": "low", "quietHours": null, "burst": null }),
        "every field is shown, defaults included"
    );

    let ruled = register(
        &app,
        &key,
        2,
        json!({
            "tags": ["vip"],
            "minPriority": "normal",
            "quietHours": { "start": "22:00", "end": "07:00", "timeZone": "Europe/Berlin" },
            "burst": { "max": 5, "perMinutes": 10 },
        }),
    )
    .await;
    assert_eq!(
        ruled["quietHours"],
        json!({ "start": "22:00", "end": "07:00", "timeZone": "Europe/Berlin", "allowPriority": "high" }),
        "allowPriority is high when absent"
    );
    let id = ruled["id"].as_str().expect("id");

    let changed = patch(&app, &key, id, json!({ "minPriority": "high" })).await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    changed.assert_request_id();
    let device = &changed.body["data"];
    assert_eq!(device["minPriority"], "high");
    assert_eq!(device["tags"], json!(["vip"]), "a field left out stays");
    assert_eq!(device["burst"], json!({ "max": 5, "perMinutes": 10 }));
    assert_ne!(device["updatedAt"], ruled["updatedAt"]);

    let cleared = patch(
        &app,
        &key,
        id,
        json!({ "tags": null, "minPriority": null, "burst": null,
                "quietHours": { "start": "23:30", "end": "06:00", "timeZone": "UTC", "allowPriority": null } }),
    )
    .await;
    assert_eq!(cleared.status, 200, "{}", cleared.body);
    assert_eq!(
        rules_of(&cleared.body["data"]),
        json!({ "channels": null, "tags": null, "minPriority": "low", "burst": null,
                "quietHours": { "start": "23:30", "end": "06:00", "timeZone": "UTC", "allowPriority": null } }),
        "null clears; an allowPriority of null lets nothing through"
    );

    // The list shows what the answers showed.
    let listed = Reply::of(app.get_as("/v1/devices", &key).await).await;
    let devices = listed.body["data"]["devices"].as_array().expect("devices");
    let stored = devices.iter().find(|d| d["id"] == id).expect("listed");
    assert_eq!(rules_of(stored), rules_of(&cleared.body["data"]));

    // Another project's key does not reach it; nor does an unknown id.
    patch(&app, &other_key, id, json!({ "minPriority": "high" }))
        .await
        .assert_error_envelope(404);
    let unknown = uuid::Uuid::now_v7().to_string();
    patch(&app, &key, &unknown, json!({}))
        .await
        .assert_error_envelope(404);
    patch(&app, &key, "nope", json!({}))
        .await
        .assert_error_envelope(404);
    let after = Reply::of(app.get_as("/v1/devices", &key).await).await;
    assert_eq!(
        after.body["data"]["devices"],
        listed.body["data"]["devices"]
    );
    app.stop().await;
}

async fn bad_rules_get_400_with_their_paths_and_change_nothing(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let device = register(&app, &key, 3, json!({ "minPriority": "normal" })).await;
    let id = device["id"].as_str().expect("id");

    let schema_faults = json!({
        "quietHours": { "start": "7:00", "end": "24:00", "timeZone": "UTC" },
        "burst": { "max": 0, "perMinutes": 1441 },
        "minPriority": "urgent",
        "tags": [""],
        "colour": "red",
    });
    let expected = {
        let mut paths = vec![
            path(&["burst", "max"]),
            path(&["burst", "perMinutes"]),
            path(&["colour"]),
            path(&["minPriority"]),
            path(&["quietHours", "end"]),
            path(&["quietHours", "start"]),
            path(&["tags", "0"]),
        ];
        paths.sort();
        paths
    };
    let mut registration = schema_faults.clone();
    registration["token"] = json!(token(4));
    registration["environment"] = json!("sandbox");
    for reply in [
        Reply::of(app.post("/v1/devices", &key, &registration).await).await,
        patch(&app, &key, id, schema_faults).await,
    ] {
        reply.assert_error_envelope(400);
        let mut paths = reply.fault_paths();
        paths.sort();
        assert_eq!(paths, expected, "{}", reply.body);
    }

    // An unknown field within the quiet hours is named with its path.
    let quiet = json!({ "start": "22:00", "end": "07:00", "timeZone": "UTC", "allow": "high" });
    let reply = patch(&app, &key, id, json!({ "quietHours": quiet })).await;
    reply.assert_error_envelope(400);
    assert_eq!(reply.fault_paths(), vec![path(&["quietHours", "allow"])]);

    // No tag at all would let nothing through.
    let reply = patch(&app, &key, id, json!({ "tags": [] })).await;
    reply.assert_error_envelope(400);
    assert_eq!(reply.fault_paths(), vec![path(&["tags"])]);

    // Past the schema: a zone the database does not know, and a window of
    // no length.
    for (quiet, at, words) in [
        (
            json!({ "start": "22:00", "end": "07:00", "timeZone": "Mars/Olympus" }),
            "timeZone",
            "IANA",
        ),
        (
            json!({ "start": "22:00", "end": "22:00", "timeZone": "UTC" }),
            "end",
            "differ",
        ),
    ] {
        let reply = patch(
            &app,
            &key,
            id,
            json!({ "quietHours": quiet, "minPriority": "high" }),
        )
        .await;
        reply.assert_error_envelope(400);
        let details = reply.details();
        assert_eq!(details.len(), 1, "{}", reply.body);
        assert_eq!(details[0].0, path(&["quietHours", at]));
        assert!(details[0].1.contains(words), "{}", details[0].1);
    }

    let devices = app.store.list_devices(&scope).await.expect("devices");
    assert_eq!(devices.len(), 1, "no registration went through");
    assert_eq!(
        devices[0].rules.min_priority,
        common::store::Priority::Normal,
        "no change went through"
    );
    app.stop().await;
}

/// Records an event with `fields` (beside channel and title) and waits for
/// its notification to settle in `state`.
async fn settle(pipeline: &Pipeline, fields: Value, state: &str) -> Value {
    let mut body = json!({ "channelName": "payments", "title": "Payment failed" });
    body.as_object_mut()
        .expect("object")
        .extend(fields.as_object().expect("object").clone());
    let id = pipeline.app.record_event(&pipeline.key, &body).await;
    pipeline.settled(&id, state).await
}

/// `deviceId` → (`state`, `reason`) of each delivery of `event`.
fn outcomes(event: &Value) -> std::collections::BTreeMap<String, (String, Value)> {
    event["notification"]["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .map(|d| {
            (
                d["deviceId"].as_str().expect("id").to_owned(),
                (
                    d["state"].as_str().expect("state").to_owned(),
                    d["reason"].clone(),
                ),
            )
        })
        .collect()
}

async fn each_device_gets_the_push_or_a_filtered_outcome_with_its_reason(kind: StoreKind) {
    let pipeline = Pipeline::embedded(kind).await;
    let (app, key) = (&pipeline.app, &pipeline.key);
    let id = |d: Value| d["id"].as_str().expect("id").to_owned();
    let everything = id(register(app, key, 10, json!({})).await);
    let vip = id(register(app, key, 11, json!({ "tags": ["vip", "eu"] })).await);
    let urgent = id(register(app, key, 12, json!({ "minPriority": "high" })).await);
    let deploys = id(register(app, key, 13, json!({ "channels": ["deploys"] })).await);

    let tagged = settle(
        &pipeline,
        json!({ "tags": ["eu"], "priority": "normal" }),
        "delivered",
    )
    .await;
    let expected = |vip_state: (&str, Value), urgent_state: (&str, Value)| {
        std::collections::BTreeMap::from([
            (everything.clone(), ("delivered".to_owned(), Value::Null)),
            (vip.clone(), (vip_state.0.to_owned(), vip_state.1)),
            (urgent.clone(), (urgent_state.0.to_owned(), urgent_state.1)),
            (deploys.clone(), ("filtered".to_owned(), json!("channel"))),
        ])
    };
    assert_eq!(
        outcomes(&tagged),
        expected(("delivered", Value::Null), ("filtered", json!("priority"))),
        "one entry per device of the project: {tagged}"
    );

    let untagged_high = settle(&pipeline, json!({ "priority": "high" }), "delivered").await;
    assert_eq!(
        outcomes(&untagged_high),
        expected(("filtered", json!("tag")), ("delivered", Value::Null)),
        "a tagged device filters out untagged events"
    );

    // Only what was let through was pushed.
    assert_eq!(pipeline.provider.delivered_to(&token(10)).len(), 2);
    assert_eq!(pipeline.provider.delivered_to(&token(11)).len(), 1);
    assert_eq!(pipeline.provider.delivered_to(&token(12)).len(), 1);
    assert!(pipeline.provider.delivered_to(&token(13)).is_empty());

    let scrape = app.scrape().await;
    let filtered = |reason| {
        scrape.value(
            "tocsin_notifier_alerts_withheld_total",
            &[("state", "filtered"), ("reason", reason)],
        )
    };
    assert_eq!(filtered("channel"), 2.0);
    assert_eq!(filtered("tag"), 1.0);
    assert_eq!(filtered("priority"), 1.0);
    pipeline.finish().await;
}

for_each_store!(
    rules_are_shown_with_defaults_changed_field_by_field_and_cleared,
    bad_rules_get_400_with_their_paths_and_change_nothing,
    each_device_gets_the_push_or_a_filtered_outcome_with_its_reason,
);

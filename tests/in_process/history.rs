//! Events recorded into the past (`timestamp`): stored at their time,
//! never pushed, refused in the future or beyond retention, and found by
//! listings and cursors as `docs/api.md` says.

use chrono::{DateTime, Duration, SubsecRound as _, Utc};
use serde_json::{Value, json};
use tocsin_tests::{
    Reply, StoreKind, TestApp, TestConfig, for_each_store, path, pipeline::Pipeline,
};

async fn busy_key(app: &TestApp) -> String {
    let project = format!("p{}", uuid::Uuid::new_v4().simple());
    app.create_key("acme", &project, Some(100_000)).await
}

async fn post(app: &TestApp, key: &str, body: Value) -> Value {
    let reply = Reply::of(app.post_event(key, &body).await).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body["data"].clone()
}

async fn titles(app: &TestApp, key: &str, query: &str) -> (Vec<String>, Option<String>) {
    let page = Reply::of(app.get_as(&format!("/v1/events{query}"), key).await).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let titles = page.body["data"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| e["title"].as_str().expect("title").to_owned())
        .collect();
    let next = page.body["data"]["nextCursor"].as_str().map(str::to_owned);
    (titles, next)
}

fn time_of(event: &Value) -> DateTime<Utc> {
    event["createdAt"]
        .as_str()
        .expect("createdAt")
        .parse()
        .expect("RFC 3339")
}

/// Both spellings record the event at that moment (to the millisecond),
/// and the answer says it is not pushed, whatever `notify` asked.
async fn a_timestamp_records_the_event_at_that_time_without_a_push(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let key = busy_key(&app).await;
    let at = (Utc::now() - Duration::days(3)).trunc_subsecs(3);
    let rfc = post(
        &app,
        &key,
        json!({ "channelName": "imports", "title": "rfc", "timestamp": at.to_rfc3339(), "notify": true }),
    )
    .await;
    assert_eq!(time_of(&rfc), at, "{rfc}");
    assert_eq!(rfc["notify"], false, "{rfc}");
    assert_eq!(rfc["notification"]["state"], "skipped", "{rfc}");

    let seconds = at.timestamp_millis() as f64 / 1000.0;
    let unix = post(
        &app,
        &key,
        json!({ "channelName": "imports", "title": "unix", "timestamp": seconds }),
    )
    .await;
    assert_eq!(time_of(&unix), at, "{unix}");
    assert_eq!(unix["notify"], false, "{unix}");
    let whole = post(
        &app,
        &key,
        json!({ "channelName": "imports", "title": "whole", "timestamp": at.timestamp() }),
    )
    .await;
    assert_eq!(time_of(&whole), at.trunc_subsecs(0), "{whole}");

    // Read back as it was answered.
    let id = rfc["id"].as_str().expect("id");
    let looked_up = Reply::of(app.get_as(&format!("/v1/events/{id}"), &key).await).await;
    assert_eq!(looked_up.body["data"]["createdAt"], rfc["createdAt"]);
    assert_eq!(looked_up.body["data"]["notify"], false);
}

/// A future time, one beyond retention, and values of no time's form are
/// each a 400 at `timestamp`; nothing is stored.
async fn a_timestamp_in_the_future_or_beyond_retention_is_refused(kind: StoreKind) {
    let mut test = TestConfig::new(kind);
    test.config.retention_days = Some(30.try_into().expect("non-zero"));
    let app = TestApp::spawn_with(test).await;
    let key = busy_key(&app).await;
    let refused = |body: Value| {
        let app = &app;
        let key = &key;
        async move {
            let reply = Reply::of(app.post_event(key, &body).await).await;
            reply.assert_error_envelope(400);
            assert_eq!(
                reply.fault_paths(),
                vec![path(&["timestamp"])],
                "{}",
                reply.body
            );
            reply.details()[0].1.clone()
        }
    };
    let event =
        |timestamp: Value| json!({ "channelName": "c", "title": "t", "timestamp": timestamp });
    let future = refused(event(json!(
        (Utc::now() + Duration::minutes(5)).to_rfc3339()
    )))
    .await;
    assert!(future.contains("future"), "{future}");
    let old = refused(event(json!((Utc::now() - Duration::days(31)).timestamp()))).await;
    assert!(old.contains("retention"), "{old}");
    for shapeless in [
        json!("yesterday"),
        json!("2026-13-01T00:00:00Z"),
        json!(-1),
        json!(true),
    ] {
        let message = refused(event(shapeless.clone())).await;
        assert!(message.contains("RFC 3339"), "{shapeless}: {message}");
    }
    let (stored, _) = titles(&app, &key, "").await;
    assert!(stored.is_empty(), "nothing stored: {stored:?}");
    // Within retention is fine.
    post(
        &app,
        &key,
        event(json!((Utc::now() - Duration::days(29)).to_rfc3339())),
    )
    .await;
}

/// With a device connected, history is never pushed, even with
/// `notify: true`; an event of now still is.
async fn history_is_never_pushed(kind: StoreKind) {
    let pipeline = Pipeline::embedded(kind).await;
    pipeline
        .register(&tocsin_tests::pipeline::token(1), None)
        .await;
    let past = (Utc::now() - Duration::hours(2)).to_rfc3339();
    let reply = Reply::of(
        pipeline
            .app
            .post_event(
                &pipeline.key,
                &json!({ "channelName": "c", "title": "old", "notify": true, "timestamp": past }),
            )
            .await,
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["data"]["notification"]["state"], "skipped");
    let now = pipeline.event("c", "new", true).await;
    pipeline
        .settled(now["id"].as_str().expect("id"), "delivered")
        .await;
    let sent: Vec<String> = pipeline
        .provider
        .sent()
        .into_iter()
        .map(|(push, _)| push.alert.title)
        .collect();
    assert_eq!(
        sent,
        vec!["new".to_owned()],
        "only the live event is pushed"
    );
    pipeline.finish().await;
}

/// Listings order history at its time among the rest; a cursor taken
/// before a backfill finds what was written behind its position and not
/// what was written ahead of it (a fresh first page shows that); the
/// chart counts it in its hour.
async fn reads_order_history_at_its_time_and_cursors_see_what_is_behind_them(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let key = busy_key(&app).await;
    let hours_ago = |h: i64| (Utc::now() - Duration::hours(h)).to_rfc3339();
    for (title, h) in [("h10", 10), ("h8", 8), ("h6", 6), ("h4", 4)] {
        post(
            &app,
            &key,
            json!({ "channelName": "c", "title": title, "timestamp": hours_ago(h) }),
        )
        .await;
    }
    post(
        &app,
        &key,
        json!({ "channelName": "c", "title": "now", "notify": false }),
    )
    .await;
    // Written last, happened in between.
    post(
        &app,
        &key,
        json!({ "channelName": "c", "title": "h7", "timestamp": hours_ago(7) }),
    )
    .await;
    let (all, _) = titles(&app, &key, "").await;
    assert_eq!(all, ["now", "h4", "h6", "h7", "h8", "h10"]);

    let (first, cursor) = titles(&app, &key, "?limit=2").await;
    assert_eq!(first, ["now", "h4"]);
    let cursor = cursor.expect("more pages");
    // Behind the cursor's position (older than h4): on the next pages.
    post(
        &app,
        &key,
        json!({ "channelName": "c", "title": "h9", "timestamp": hours_ago(9) }),
    )
    .await;
    // Ahead of it (newer than h4, yet in the past): not on later pages.
    post(
        &app,
        &key,
        json!({ "channelName": "c", "title": "h1", "timestamp": hours_ago(1) }),
    )
    .await;
    let mut rest = Vec::new();
    let mut next = Some(cursor);
    while let Some(cursor) = next {
        let (page, more) = titles(&app, &key, &format!("?limit=2&cursor={cursor}")).await;
        rest.extend(page);
        next = more;
    }
    assert_eq!(rest, ["h6", "h7", "h8", "h9", "h10"]);
    let (fresh, _) = titles(&app, &key, "?limit=3").await;
    assert_eq!(fresh, ["now", "h1", "h4"], "a fresh first page shows it");

    // `since`/`until` select by the event's time.
    let since = (Utc::now() - Duration::minutes(450)).to_rfc3339();
    let until = (Utc::now() - Duration::minutes(210)).to_rfc3339();
    let query = format!(
        "?since={}&until={}",
        urlencoding(&since),
        urlencoding(&until)
    );
    let (window, _) = titles(&app, &key, &query).await;
    assert_eq!(window, ["h4", "h6", "h7"]);

    // The chart of the last 24 hours counts each in its own hour.
    let stats = Reply::of(app.get_as("/v1/stats/events", &key).await).await;
    assert_eq!(stats.status, 200, "{}", stats.body);
    let counted: u64 = stats.body["data"]["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| b["count"].as_u64().expect("count"))
        .sum();
    assert_eq!(counted, 8, "{}", stats.body);
    let busiest = stats.body["data"]["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .filter(|b| b["count"].as_u64() == Some(1))
        .count();
    assert!(
        busiest >= 6,
        "history spreads over its hours: {}",
        stats.body
    );
}

fn urlencoding(s: &str) -> String {
    s.replace('+', "%2B").replace(':', "%3A")
}

for_each_store!(
    a_timestamp_records_the_event_at_that_time_without_a_push,
    a_timestamp_in_the_future_or_beyond_retention_is_refused,
    history_is_never_pushed,
    reads_order_history_at_its_time_and_cursors_see_what_is_behind_them,
);

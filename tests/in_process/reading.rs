//! The read side: `GET /v1/events` (filters, cursor paging), `GET
//! /v1/channels`, `GET /v1/users/{userId}`, `GET /v1/stats/events`, and
//! retention.

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::store::{Event, NotificationState, Scope};
use serde_json::{Value, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{
    Reply, StoreKind, TestApp, TestConfig, eventually, for_each_store, path, pending_event,
};

/// A key of a fresh project, with room for the many requests of a test.
async fn busy_key(app: &TestApp) -> (String, Scope) {
    let project = format!("p{}", uuid::Uuid::new_v4().simple());
    let key = app.create_key("acme", &project, Some(100_000)).await;
    (key, Scope::new("acme", project))
}

async fn post(app: &TestApp, key: &str, body: Value) -> Value {
    let reply = Reply::of(app.post_event(key, &body).await).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body["data"].clone()
}

async fn list(app: &TestApp, key: &str, query: &str) -> Reply {
    Reply::of(app.get_as(&format!("/v1/events{query}"), key).await).await
}

fn ids(items: &Value) -> Vec<String> {
    items
        .as_array()
        .expect("items")
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_owned())
        .collect()
}

async fn paging_visits_every_event_once_newest_first(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let mut posted = Vec::new();
    for i in 0..250 {
        let event = post(
            &app,
            &key,
            json!({ "channelName": "c", "title": format!("e{i}"), "notify": false }),
        )
        .await;
        posted.push(event["id"].as_str().expect("id").to_owned());
    }
    posted.reverse();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = match &cursor {
            Some(c) => format!("?limit=50&cursor={c}"),
            None => "?limit=50".into(),
        };
        let page = list(&app, &key, &query).await;
        assert_eq!(page.status, 200, "{}", page.body);
        page.assert_request_id();
        let items = &page.body["data"]["items"];
        // Every item has the shape POST /v1/events answers with.
        let first = &items[0];
        for field in [
            "id",
            "channelName",
            "title",
            "tags",
            "metadata",
            "createdAt",
        ] {
            assert!(first.get(field).is_some(), "{field} missing in {first}");
        }
        assert_eq!(first["notification"], json!({ "state": "skipped" }));
        seen.extend(ids(items));
        pages += 1;
        if pages == 2 {
            // Events recorded while paging are newer than every cursor:
            // they shift nothing.
            for i in 0..7 {
                post(
                    &app,
                    &key,
                    json!({ "channelName": "c", "title": format!("late{i}") }),
                )
                .await;
            }
        }
        match page.body["data"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 5, "250 events at 50 a page");
    assert_eq!(seen, posted, "every event once, newest first");
}

async fn every_filter_narrows_the_list(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let (other_key, _) = busy_key(&app).await;
    let signup = post(
        &app,
        &key,
        json!({ "channelName": "signups", "title": "New signup", "tags": ["eu", "free"],
                "userId": "ada", "description": "Ada joined from the Paris office" }),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let payment = post(
        &app,
        &key,
        json!({ "channelName": "payments", "title": "PAYMENT failed", "tags": ["eu"],
                "userId": "bob" }),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let refund = post(
        &app,
        &key,
        json!({ "channelName": "payments", "title": "Refund issued", "tags": ["us"],
                "userId": "ada", "description": "partial payment returned" }),
    )
    .await;
    // Another project's event matches every filter below but is never listed.
    post(
        &app,
        &other_key,
        json!({ "channelName": "payments", "title": "payment", "tags": ["eu"], "userId": "ada" }),
    )
    .await;
    let id = |e: &Value| e["id"].as_str().expect("id").to_owned();
    let at = |e: &Value| e["createdAt"].as_str().expect("createdAt").to_owned();
    let encoded = |s: &str| s.replace('+', "%2B").replace(':', "%3A");

    let cases: Vec<(String, Vec<String>)> = vec![
        (String::new(), vec![id(&refund), id(&payment), id(&signup)]),
        ("?channel=payments".into(), vec![id(&refund), id(&payment)]),
        ("?tag=eu".into(), vec![id(&payment), id(&signup)]),
        ("?userId=ada".into(), vec![id(&refund), id(&signup)]),
        // Text in the title or the description, whatever its case.
        ("?q=payment".into(), vec![id(&refund), id(&payment)]),
        ("?q=PARIS".into(), vec![id(&signup)]),
        ("?q=nothing%20like%20this".into(), vec![]),
        ("?channel=payments&userId=ada".into(), vec![id(&refund)]),
        ("?tag=eu&q=payment".into(), vec![id(&payment)]),
        // since is inclusive, until exclusive.
        (
            format!("?since={}", encoded(&at(&payment))),
            vec![id(&refund), id(&payment)],
        ),
        (
            format!("?until={}", encoded(&at(&payment))),
            vec![id(&signup)],
        ),
        (
            format!(
                "?since={}&until={}",
                encoded(&at(&payment)),
                encoded(&at(&refund))
            ),
            vec![id(&payment)],
        ),
    ];
    for (query, expected) in cases {
        let page = list(&app, &key, &query).await;
        assert_eq!(page.status, 200, "{query}: {}", page.body);
        assert_eq!(ids(&page.body["data"]["items"]), expected, "{query}");
        assert_eq!(page.body["data"]["nextCursor"], Value::Null, "{query}");
    }
}

async fn bad_parameters_get_400_with_their_path(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let cases = [
        ("/v1/events?limit=0", ["query", "limit"], "from 1 to 100"),
        ("/v1/events?limit=101", ["query", "limit"], "from 1 to 100"),
        ("/v1/events?limit=ten", ["query", "limit"], "whole number"),
        ("/v1/events?since=yesterday", ["query", "since"], "RFC 3339"),
        (
            "/v1/events?until=2026-13-01T00:00:00Z",
            ["query", "until"],
            "RFC 3339",
        ),
        (
            "/v1/events?cursor=bm90LWEtY3Vyc29y",
            ["query", "cursor"],
            "nextCursor",
        ),
        (
            "/v1/events?channel=",
            ["query", "channel"],
            "1 to 100 characters",
        ),
        (
            "/v1/events?chanel=payments",
            ["query", "chanel"],
            "did you mean `channel`?",
        ),
        (
            "/v1/events?limit=5&limit=6",
            ["query", "limit"],
            "more than once",
        ),
        (
            "/v1/stats/events?bucket=week",
            ["query", "bucket"],
            "one of: hour, day",
        ),
        (
            "/v1/events?cursor=1795000000123.0197A3C2-5F1E-7B8A-9C0D-1E2F3A4B5C6D",
            ["query", "cursor"],
            "nextCursor",
        ),
        (
            "/v1/stream?lastEventId=",
            ["query", "lastEventId"],
            "event id",
        ),
        (
            "/v1/stream?lastEventId=seven",
            ["query", "lastEventId"],
            "event id",
        ),
    ];
    for (url, fault, words) in cases {
        let reply = Reply::of(app.get_as(url, &key).await).await;
        reply.assert_error_envelope(400);
        let details = reply.details();
        assert_eq!(details.len(), 1, "{url}: {}", reply.body);
        assert_eq!(details[0].0, path(&fault), "{url}");
        assert!(details[0].1.contains(words), "{url}: {:?}", details[0].1);
    }
}

async fn channels_are_listed_with_counts_most_recent_first(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let empty = Reply::of(app.get_as("/v1/channels", &key).await).await;
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert_eq!(empty.body["data"], json!({ "items": [] }));

    for (channel, n) in [("payments", 3), ("signups", 2), ("deploys", 1)] {
        for i in 0..n {
            post(
                &app,
                &key,
                json!({ "channelName": channel, "title": format!("{i}") }),
            )
            .await;
        }
    }
    // Later than every other event, even on a fast machine.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let last = post(
        &app,
        &key,
        json!({ "channelName": "signups", "title": "last" }),
    )
    .await;
    let reply = Reply::of(app.get_as("/v1/channels", &key).await).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let items = reply.body["data"]["items"]
        .as_array()
        .expect("items")
        .clone();
    let summary: Vec<(String, u64)> = items
        .iter()
        .map(|c| {
            (
                c["name"].as_str().expect("name").to_owned(),
                c["eventCount"].as_u64().expect("count"),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("signups".into(), 3),
            ("deploys".into(), 1),
            ("payments".into(), 3)
        ],
    );
    assert_eq!(items[0]["lastEventAt"], last["createdAt"]);
}

async fn a_user_is_looked_up_as_identify_left_it(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = busy_key(&app).await;
    let user = "ada@example.com / 7";
    let identified = Reply::of(
        app.post(
            "/v1/identify",
            &key,
            &json!({ "user_id": user, "properties": { "plan": "pro" }, "aliases": ["a7"] }),
        )
        .await,
    )
    .await;
    assert_eq!(identified.status, 200, "{}", identified.body);
    let encoded = "ada%40example.com%20%2F%207";
    let found = Reply::of(app.get_as(&format!("/v1/users/{encoded}"), &key).await).await;
    assert_eq!(found.status, 200, "{}", found.body);
    found.assert_request_id();
    assert_eq!(found.body["data"], identified.body["data"]);

    let unknown = Reply::of(app.get_as("/v1/users/nobody", &key).await).await;
    unknown.assert_error_envelope(404);
    // Another project's user is unknown here.
    let (other, _) = busy_key(&app).await;
    let elsewhere = Reply::of(app.get_as(&format!("/v1/users/{encoded}"), &other).await).await;
    elsewhere.assert_error_envelope(404);
}

/// An event of `scope` recorded at `at`, its notification settled.
fn recorded_at(scope: &Scope, channel: &str, at: DateTime<Utc>) -> Event {
    Event {
        channel_name: channel.into(),
        created_at: at,
        notify: false,
        notification: NotificationState::Skipped,
        notification_due_at: None,
        ..pending_event(scope)
    }
}

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("time")
        .with_timezone(&Utc)
}

async fn stats_count_events_per_bucket_empty_ones_included(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = busy_key(&app).await;
    for (channel, at) in [
        ("a", "2026-11-20T10:00:00Z"),
        ("a", "2026-11-20T10:59:59.999Z"),
        ("b", "2026-11-20T10:30:00Z"),
        ("a", "2026-11-20T12:15:00Z"),
        ("a", "2026-11-21T00:00:00Z"),
        ("a", "2026-11-20T09:59:59.999Z"),
    ] {
        app.store
            .insert_event(&recorded_at(&scope, channel, utc(at)))
            .await
            .expect("insert");
    }
    let counts = |reply: &Reply| -> Vec<(String, u64)> {
        reply.body["data"]["buckets"]
            .as_array()
            .expect("buckets")
            .iter()
            .map(|b| {
                let start = DateTime::parse_from_rfc3339(b["start"].as_str().expect("start"))
                    .expect("RFC 3339")
                    .with_timezone(&Utc);
                (start.to_rfc3339(), b["count"].as_u64().expect("count"))
            })
            .collect()
    };
    let hourly = Reply::of(
        app.get_as(
            "/v1/stats/events?since=2026-11-20T10:20:00Z&until=2026-11-20T13:00:00Z",
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(hourly.status, 200, "{}", hourly.body);
    assert_eq!(
        counts(&hourly),
        [
            ("2026-11-20T10:00:00+00:00".into(), 3),
            ("2026-11-20T11:00:00+00:00".into(), 0),
            ("2026-11-20T12:00:00+00:00".into(), 1),
        ]
    );
    let one_channel = Reply::of(
        app.get_as(
            "/v1/stats/events?channel=b&since=2026-11-20T10:00:00Z&until=2026-11-20T12:00:00Z",
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(
        counts(&one_channel),
        [
            ("2026-11-20T10:00:00+00:00".into(), 1),
            ("2026-11-20T11:00:00+00:00".into(), 0),
        ]
    );
    let daily = Reply::of(
        app.get_as(
            "/v1/stats/events?bucket=day&since=2026-11-19T12:00:00Z&until=2026-11-22T00:00:00Z",
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(
        counts(&daily),
        [
            ("2026-11-19T00:00:00+00:00".into(), 0),
            ("2026-11-20T00:00:00+00:00".into(), 5),
            ("2026-11-21T00:00:00+00:00".into(), 1),
        ]
    );
    // By default: the last 24 hours, the current one last.
    let recent = Reply::of(app.get_as("/v1/stats/events", &key).await).await;
    let buckets = counts(&recent);
    assert_eq!(buckets.len(), 24, "{}", recent.body);
    assert!(buckets.iter().all(|(_, n)| *n == 0));
}

/// ST202: any range the parameters' schemas allow is answered. One of more
/// than 1000 buckets comes a page at a time, each page naming where the
/// next begins, and the pages together count every event once.
async fn a_range_of_more_than_1000_buckets_comes_a_page_at_a_time(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = busy_key(&app).await;
    // 2026-10-01T00:00Z plus 1000 hours is 2026-11-11T16:00Z.
    for at in [
        "2026-10-01T00:30:00Z",
        "2026-11-11T15:59:59.999Z",
        "2026-11-11T16:00:00Z",
        "2026-11-21T23:00:00Z",
    ] {
        app.store
            .insert_event(&recorded_at(&scope, "a", utc(at)))
            .await
            .expect("insert");
    }
    let first = Reply::of(
        app.get_as(
            "/v1/stats/events?since=2026-10-01T00:00:00Z&until=2026-11-22T00:00:00Z",
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let buckets = first.body["data"]["buckets"].as_array().expect("buckets");
    assert_eq!(buckets.len(), 1000);
    assert_eq!(buckets[0]["count"], 1);
    assert_eq!(buckets[999]["count"], 1, "{}", buckets[999]);
    let next = first.body["data"]["nextSince"]
        .as_str()
        .expect("a nextSince");
    assert_eq!(utc(next), utc("2026-11-11T16:00:00Z"));
    let rest = Reply::of(
        app.get_as(
            // As a client passes it: query-encoded (a `+` would read as a space).
            &format!(
                "/v1/stats/events?since={}&until=2026-11-22T00:00:00Z",
                next.replace('+', "%2B")
            ),
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(rest.status, 200, "{}", rest.body);
    let buckets = rest.body["data"]["buckets"].as_array().expect("buckets");
    // 52 days of hours in all.
    assert_eq!(buckets.len(), 52 * 24 - 1000);
    assert_eq!(utc(buckets[0]["start"].as_str().expect("start")), utc(next));
    let counted: u64 = buckets.iter().filter_map(|b| b["count"].as_u64()).sum();
    assert_eq!(counted, 2);
    assert_eq!(rest.body["data"]["nextSince"], Value::Null);
    // The range the issue found refused: from 2000 by hour.
    let long = Reply::of(
        app.get_as(
            "/v1/stats/events?since=2000-01-01T00:00:00Z&bucket=hour",
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(long.status, 200, "{}", long.body);
    assert_eq!(
        long.body["data"]["nextSince"].as_str().map(utc),
        Some(utc("2000-02-11T16:00:00Z"))
    );
}

async fn retention_removes_old_settled_events_and_their_deliveries(kind: StoreKind) {
    let mut test = TestConfig::new(kind);
    test.config.retention_days = Some(2.try_into().expect("non-zero"));
    test.config.retention_interval_seconds = 1.try_into().expect("non-zero");
    test.config.retention_batch = 2.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let (key, scope) = busy_key(&app).await;
    let now = common::time::now();
    let old: Vec<Event> = (0..5)
        .map(|i| recorded_at(&scope, "old", now - chrono::Duration::days(3 + i)))
        .collect();
    // An old event whose push is still under way is kept until it settles.
    let unsettled = Event {
        created_at: now - chrono::Duration::days(3),
        notification_due_at: Some(now + chrono::Duration::days(1)),
        ..pending_event(&scope)
    };
    let recent = recorded_at(&scope, "new", now - chrono::Duration::days(1));
    for event in old.iter().chain([&unsettled, &recent]) {
        app.store.insert_event(event).await.expect("insert");
    }
    // A delivery of an old event goes with it.
    let device = app
        .store
        .upsert_device(
            &scope,
            &common::store::DeviceRegistration {
                target: common::store::PushTarget::Apns {
                    token: "ab".repeat(32),
                    environment: common::store::ApnsEnvironment::Sandbox,
                },
                name: None,
                rules: common::rules::AlertRules::every_alert(),
            },
            now,
        )
        .await
        .expect("device")
        .0;
    let claim = common::store::lease::ClaimRequest {
        now,
        lease: Duration::from_secs(30),
        max_attempts: 3,
    };
    app.store
        .claim_deliveries(
            &[common::store::lease::ClaimKey {
                scope: scope.clone(),
                event_id: old[0].id,
                device_id: device.id,
            }],
            &claim,
        )
        .await
        .expect("claim");

    eventually(
        Duration::from_secs(20),
        "old events to be removed",
        async || {
            let left = app.store.events_stored(&scope).await.expect("count");
            (left == 2)
                .then_some(())
                .ok_or(format!("{left} events left"))
        },
    )
    .await;
    for event in &old {
        assert_eq!(
            app.store.get_event(&scope, event.id).await.expect("get"),
            None
        );
    }
    assert!(
        app.store
            .get_event(&scope, unsettled.id)
            .await
            .expect("get")
            .is_some()
    );
    assert!(
        app.store
            .get_event(&scope, recent.id)
            .await
            .expect("get")
            .is_some()
    );
    assert!(
        app.store
            .list_deliveries(&scope, old[0].id)
            .await
            .expect("deliveries")
            .is_empty()
    );
    let scrape = app.scrape().await;
    assert_eq!(
        scrape.value("tocsin_retention_removed_total", &[("record", "events")]),
        5.0
    );
    assert_eq!(
        scrape.value(
            "tocsin_retention_removed_total",
            &[("record", "deliveries")]
        ),
        1.0
    );
    let listed = list(&app, &key, "").await;
    assert_eq!(ids(&listed.body["data"]["items"]).len(), 2);
}

for_each_store!(
    paging_visits_every_event_once_newest_first,
    every_filter_narrows_the_list,
    bad_parameters_get_400_with_their_path,
    channels_are_listed_with_counts_most_recent_first,
    a_user_is_looked_up_as_identify_left_it,
    stats_count_events_per_bucket_empty_ones_included,
    a_range_of_more_than_1000_buckets_comes_a_page_at_a_time,
    retention_removes_old_settled_events_and_their_deliveries,
);

/// SQLite folds case beyond ASCII too (MongoDB's case-insensitive regex
/// does; the MongoDB-compatible test server folds ASCII only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_ignores_case_beyond_ascii_on_sqlite() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = busy_key(&app).await;
    let summer = post(
        &app,
        &key,
        json!({ "channelName": "c", "title": "ÉTÉ INDIEN" }),
    )
    .await;
    post(
        &app,
        &key,
        json!({ "channelName": "c", "title": "ete sans accents" }),
    )
    .await;
    let page = list(&app, &key, "?q=%C3%A9t%C3%A9").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(
        ids(&page.body["data"]["items"]),
        [summer["id"].as_str().expect("id")]
    );
}

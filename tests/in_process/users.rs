//! User journeys: `GET /v1/users` and `GET /v1/users/{userId}` with the
//! counters events keep (count, first and last seen, a backfilled event
//! included), most recently seen first, paged once each, found by text and
//! by a property; aliases naming their user in look-ups, counts and the
//! timeline; and the counters read as stored, not computed from events.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use common::store::{KeyScope, NotificationState, Scope, UserFilter};
use serde_json::{Value, json};
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store, open_store, path, pending_event};

/// `GET path` with `key`, asserting a 200 with the envelope; its `data`.
async fn read(app: &TestApp, key: &str, path: &str) -> Value {
    let reply = Reply::of(app.get_as(path, key).await).await;
    assert_eq!(reply.status, 200, "GET {path}: {}", reply.body);
    reply.assert_request_id();
    reply.body["data"].clone()
}

/// Records an event of `user` (at `at`, a backfilled time, if given) and
/// returns it as answered.
async fn event(app: &TestApp, key: &str, user: &str, at: Option<DateTime<Utc>>) -> Value {
    let mut body = json!({ "channelName": "journeys", "title": format!("step of {user}"),
        "userId": user, "notify": false });
    if let Some(at) = at {
        body["timestamp"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    let reply = Reply::of(app.post_event(key, &body).await).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body["data"].clone()
}

async fn identify(app: &TestApp, key: &str, body: Value) -> Value {
    let reply = Reply::of(app.post("/v1/identify", key, &body).await).await;
    assert_eq!(reply.status, 200, "{body}: {}", reply.body);
    reply.body["data"].clone()
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .with_timezone(&Utc)
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|u| u["userId"].as_str().expect("a user id").to_owned())
        .collect()
}

/// Every user of the listing at `query` (a query string, `?…&` or empty),
/// page by page, `limit` at a time.
async fn walk(app: &TestApp, key: &str, query: &str, limit: u32) -> Vec<String> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/users?{query}limit={limit}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let page = read(app, key, &path).await;
        all.extend(ids(&page));
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return all,
        }
    }
}

async fn counters_are_kept_as_events_arrive_a_backfilled_one_included(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let first = event(&app, &key, "u-1", None).await;
    let backfilled_at = common::time::now() - Duration::days(3);
    let backfilled = event(&app, &key, "u-1", Some(backfilled_at)).await;
    assert_eq!(time(&backfilled["createdAt"]), backfilled_at);
    let last = event(&app, &key, "u-1", None).await;
    event(&app, &key, "u-2", None).await;
    // An event without a user makes none.
    let reply = Reply::of(
        app.post_event(&key, &json!({ "channelName": "c", "title": "anonymous" }))
            .await,
    )
    .await;
    assert_eq!(reply.status, 201);

    let user = read(&app, &key, "/v1/users/u-1").await;
    assert_eq!(user["user_id"], "u-1");
    assert_eq!(user["eventCount"], 3, "{user}");
    assert_eq!(time(&user["firstSeenAt"]), backfilled_at, "{user}");
    assert_eq!(user["lastSeenAt"], last["createdAt"], "{user}");
    assert_eq!(
        user["createdAt"], first["createdAt"],
        "made by its first event"
    );
    assert_eq!(
        (&user["properties"], &user["aliases"]),
        (&json!({}), &json!([]))
    );

    let listed = read(&app, &key, "/v1/users").await;
    assert_eq!(ids(&listed), ["u-2", "u-1"], "most recently seen first");
    assert_eq!(listed["nextCursor"], Value::Null);
    let listed_user = &listed["items"][1];
    for field in [
        "eventCount",
        "firstSeenAt",
        "lastSeenAt",
        "properties",
        "aliases",
    ] {
        assert_eq!(listed_user[field], user[field], "{field}");
    }

    // Identify counts as seen (not as an event), and keeps the counters.
    let identified = identify(
        &app,
        &key,
        json!({ "user_id": "u-1", "properties": { "plan": "pro" } }),
    )
    .await;
    assert_eq!(identified["eventCount"], 3);
    assert_eq!(time(&identified["firstSeenAt"]), backfilled_at);
    assert!(time(&identified["lastSeenAt"]) >= time(&last["createdAt"]));
    assert_eq!(ids(&read(&app, &key, "/v1/users").await), ["u-1", "u-2"]);
    // A user identify made, with no event yet: seen when identified.
    let fresh = identify(&app, &key, json!({ "user_id": "u-3" })).await;
    assert_eq!(fresh["eventCount"], 0);
    assert_eq!(fresh["firstSeenAt"], fresh["createdAt"]);
    assert_eq!(read(&app, &key, "/v1/users/u-3").await, fresh);
}

async fn users_are_listed_most_recently_seen_first_and_each_once_while_paging(kind: StoreKind) {
    let mut test = tocsin_tests::TestConfig::new(kind);
    test.config.rate_limit_per_minute = 10_000.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let (key, _) = app.new_key().await;
    let start = common::time::now() - Duration::hours(1);
    // u0 seen longest ago … u8 most recently; u4 and u5 at the same time
    // (ties go by id, descending).
    for (i, minutes) in [0, 1, 2, 3, 4, 4, 6, 7, 8].into_iter().enumerate() {
        event(
            &app,
            &key,
            &format!("u{i}"),
            Some(start + Duration::minutes(minutes)),
        )
        .await;
    }
    let everyone: Vec<String> = ["u8", "u7", "u6", "u5", "u4", "u3", "u2", "u1", "u0"]
        .map(String::from)
        .to_vec();
    assert_eq!(walk(&app, &key, "", 2).await, everyone);
    assert_eq!(walk(&app, &key, "", 100).await, everyone);

    // Paging while users are seen again: u7 (already listed) and u1 (not
    // reached yet) move to the front. No user comes twice, and every user
    // not seen meanwhile comes once, in order.
    let first = read(&app, &key, "/v1/users?limit=3").await;
    assert_eq!(ids(&first), ["u8", "u7", "u6"]);
    event(&app, &key, "u7", None).await;
    event(&app, &key, "u1", None).await;
    let mut walked = ids(&first);
    let mut cursor = first["nextCursor"].as_str().expect("more").to_owned();
    loop {
        let page = read(&app, &key, &format!("/v1/users?limit=3&cursor={cursor}")).await;
        walked.extend(ids(&page));
        match page["nextCursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    let distinct: BTreeSet<&String> = walked.iter().collect();
    assert_eq!(
        distinct.len(),
        walked.len(),
        "a user listed twice: {walked:?}"
    );
    assert_eq!(walked, ["u8", "u7", "u6", "u5", "u4", "u3", "u2", "u0"]);
    // A new walk starts with who was seen meanwhile.
    assert_eq!(
        walk(&app, &key, "", 4).await,
        ["u1", "u7", "u8", "u6", "u5", "u4", "u3", "u2", "u0"]
    );

    // A cursor this API did not give out is a fault at its parameter.
    for bad in ["abc", "1.7", "1.ZZ"] {
        let reply = Reply::of(app.get_as(&format!("/v1/users?cursor={bad}"), &key).await).await;
        reply.assert_error_envelope(400);
        assert_eq!(reply.fault_paths(), [path(&["query", "cursor"])], "{bad}");
    }
    for limit in ["0", "101", "x"] {
        let reply = Reply::of(app.get_as(&format!("/v1/users?limit={limit}"), &key).await).await;
        reply.assert_error_envelope(400);
        assert_eq!(reply.fault_paths(), [path(&["query", "limit"])], "{limit}");
    }
}

async fn users_are_found_by_text_in_their_id_or_aliases(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    identify(
        &app,
        &key,
        json!({ "user_id": "Ada-1", "aliases": ["ada@example.com"] }),
    )
    .await;
    identify(
        &app,
        &key,
        json!({ "user_id": "grace", "aliases": ["G.Hopper@Navy.example"] }),
    )
    .await;
    event(&app, &key, "linus", None).await;
    let found = |q: &'static str| {
        let (app, key) = (&app, &key);
        async move { walk(app, key, &format!("q={q}&"), 50).await }
    };
    assert_eq!(found("ADA").await, ["Ada-1"]);
    assert_eq!(found("hopper%40navy").await, ["grace"]);
    assert_eq!(found("example").await, ["grace", "Ada-1"]);
    assert_eq!(found("n").await, ["linus", "grace"]);
    assert!(found("nobody").await.is_empty());
}

async fn users_are_filtered_by_one_property(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    identify(
        &app,
        &key,
        json!({ "user_id": "a", "properties": {
        "plan": "pro", "seats": 3, "beta": true, "url": "https://a.example", "code": "3" } }),
    )
    .await;
    identify(
        &app,
        &key,
        json!({ "user_id": "b", "properties": {
        "plan": "free", "seats": 3.5, "beta": false, "code": 3 } }),
    )
    .await;
    identify(
        &app,
        &key,
        json!({ "user_id": "c", "properties": { "plan": "Pro", "seats": "3" } }),
    )
    .await;
    let found = |p: &'static str| {
        let (app, key) = (&app, &key);
        async move { walk(app, key, &format!("property={p}&"), 50).await }
    };
    assert_eq!(found("plan:pro").await, ["a"], "a string matches exactly");
    assert_eq!(
        found("seats:3").await,
        ["c", "a"],
        "the number 3 and the text 3"
    );
    assert_eq!(found("seats:3.5").await, ["b"]);
    assert_eq!(found("beta:true").await, ["a"]);
    assert_eq!(found("beta:false").await, ["b"]);
    assert_eq!(found("code:3").await, ["b", "a"]);
    assert_eq!(
        found("url:https://a.example").await,
        ["a"],
        "split at the first colon"
    );
    assert!(found("plan:").await.is_empty());
    assert!(found("missing:x").await.is_empty());
    // Both filters narrow together.
    assert_eq!(walk(&app, &key, "q=A&property=plan:pro&", 50).await, ["a"]);
    for malformed in ["plan", ":pro", ""] {
        let reply = Reply::of(
            app.get_as(&format!("/v1/users?property={malformed}"), &key)
                .await,
        )
        .await;
        reply.assert_error_envelope(400);
        assert_eq!(
            reply.fault_paths(),
            [path(&["query", "property"])],
            "{malformed:?}: {}",
            reply.body
        );
    }
}

async fn an_alias_names_its_user_in_look_ups_counts_and_the_timeline(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    // Before sign-up: an anonymous id with events of its own.
    event(&app, &key, "anon-42", None).await;
    event(&app, &key, "anon-42", None).await;
    event(&app, &key, "ada", None).await;
    // Sign-up: the anonymous id and an email become aliases of "ada".
    let ada = identify(
        &app,
        &key,
        json!({ "user_id": "ada",
        "properties": { "plan": "pro" }, "aliases": ["anon-42", "ada@example.com"] }),
    )
    .await;
    assert_eq!(ada["eventCount"], 3, "{ada}");
    assert_eq!(ada["aliases"], json!(["anon-42", "ada@example.com"]));
    // Later events under an alias count for the user.
    event(&app, &key, "ada@example.com", None).await;
    let last = event(&app, &key, "anon-42", None).await;

    for name in ["ada", "anon-42", "ada%40example.com"] {
        let user = read(&app, &key, &format!("/v1/users/{name}")).await;
        assert_eq!(user["user_id"], "ada", "{name}");
        assert_eq!(user["eventCount"], 5, "{name}: {user}");
        assert_eq!(user["lastSeenAt"], last["createdAt"]);
        assert_eq!(user["properties"], json!({ "plan": "pro" }));
    }
    // The alias is no user of its own in the listing.
    assert_eq!(walk(&app, &key, "", 50).await, ["ada"]);
    assert_eq!(walk(&app, &key, "q=anon&", 50).await, ["ada"]);

    // The timeline holds the events under every id of the user, newest
    // first, paged; whichever id asks. Its length is the count.
    for name in ["ada", "anon-42"] {
        let mut timeline = Vec::new();
        let mut cursor = String::new();
        loop {
            let page = read(
                &app,
                &key,
                &format!("/v1/events?userId={name}&limit=2{cursor}"),
            )
            .await;
            timeline.extend(page["items"].as_array().expect("items").iter().cloned());
            match page["nextCursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => break,
            }
        }
        let users: Vec<&str> = timeline
            .iter()
            .map(|e| e["userId"].as_str().expect("user"))
            .collect();
        assert_eq!(
            users,
            ["anon-42", "ada@example.com", "ada", "anon-42", "anon-42"],
            "{name}"
        );
        assert_eq!(timeline[0]["id"], last["id"]);
    }

    // Identify naming an alias updates its user.
    let via_alias = identify(
        &app,
        &key,
        json!({ "user_id": "anon-42", "properties": { "seats": 2 } }),
    )
    .await;
    assert_eq!(via_alias["user_id"], "ada");
    assert_eq!(
        via_alias["properties"],
        json!({ "plan": "pro", "seats": 2 })
    );

    // An alias that named another user: the same person, merged.
    event(&app, &key, "grace", None).await;
    identify(
        &app,
        &key,
        json!({ "user_id": "grace", "properties": { "plan": "free", "team": "navy" },
        "aliases": ["g@example.com"] }),
    )
    .await;
    event(&app, &key, "g@example.com", None).await;
    let merged = identify(
        &app,
        &key,
        json!({ "user_id": "ada", "aliases": ["g@example.com"] }),
    )
    .await;
    assert_eq!(merged["eventCount"], 7, "{merged}");
    assert_eq!(
        merged["properties"],
        json!({ "plan": "pro", "seats": 2, "team": "navy" }),
        "the merged user's properties fill the keys this one lacks"
    );
    assert_eq!(
        merged["aliases"],
        json!(["anon-42", "ada@example.com", "g@example.com", "grace"])
    );
    assert_eq!(read(&app, &key, "/v1/users/grace").await["user_id"], "ada");
    assert_eq!(walk(&app, &key, "", 50).await, ["ada"]);
    let timeline = read(&app, &key, "/v1/events?userId=grace&limit=100").await;
    assert_eq!(timeline["items"].as_array().expect("items").len(), 7);
}

async fn unknown_users_are_404_and_users_stay_in_their_project(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let (other, _) = app.new_key().await;
    event(&app, &key, "u-1", None).await;
    identify(&app, &key, json!({ "user_id": "u-2", "aliases": ["al"] })).await;
    let unknown = Reply::of(app.get_as("/v1/users/nobody", &key).await).await;
    unknown.assert_error_envelope(404);
    for name in ["u-1", "al"] {
        let elsewhere = Reply::of(app.get_as(&format!("/v1/users/{name}"), &other).await).await;
        elsewhere.assert_error_envelope(404);
    }
    assert!(ids(&read(&app, &other, "/v1/users").await).is_empty());
    // Listing users is reading: events:read, which a writing key lacks.
    let writer = app
        .create_key_with_scopes("acme", &scope.project, &[KeyScope::EventsWrite])
        .await;
    for path in ["/v1/users", "/v1/users/u-1"] {
        let refused = Reply::of(app.get_as(path, &writer).await).await;
        refused.assert_error_envelope(403);
    }
    let reader = app
        .create_key_with_scopes("acme", &scope.project, &[KeyScope::EventsRead])
        .await;
    assert_eq!(ids(&read(&app, &reader, "/v1/users").await), ["u-2", "u-1"]);
}

/// The listing answers from what each user's record holds: once retention
/// removed every event, the users and their counts are still listed.
async fn the_listing_reads_stored_counters_not_the_events(kind: StoreKind) {
    let (store, _test) = open_store(kind).await;
    let scope = Scope::new("acme", format!("p{}", uuid::Uuid::new_v4().simple()));
    let long_ago = common::time::now() - Duration::days(400);
    for (i, user) in ["a", "b", "a"].into_iter().enumerate() {
        let mut event = pending_event(&scope);
        event.user_id = Some(user.into());
        event.created_at = long_ago + Duration::minutes(i as i64);
        event.notification = NotificationState::Skipped;
        event.notification_due_at = None;
        store.insert_event(&event).await.expect("stored");
    }
    let purged = store
        .purge_events(long_ago + Duration::days(1), 100)
        .await
        .expect("purged");
    assert!(purged.events >= 3, "{purged:?}");
    let users = store
        .list_users(&scope, &UserFilter::default(), None, 10)
        .await
        .expect("listed");
    let counts: Vec<(&str, u64)> = users
        .iter()
        .map(|u| (u.user_id.as_str(), u.event_count))
        .collect();
    assert_eq!(counts, [("a", 2), ("b", 1)]);
    assert_eq!(users[0].first_seen_at, long_ago);
    assert_eq!(users[0].last_seen_at, long_ago + Duration::minutes(2));
    let a = store
        .get_identity(&scope, "a")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(a.event_count, 2);
}

for_each_store!(
    counters_are_kept_as_events_arrive_a_backfilled_one_included,
    users_are_listed_most_recently_seen_first_and_each_once_while_paging,
    users_are_found_by_text_in_their_id_or_aliases,
    users_are_filtered_by_one_property,
    an_alias_names_its_user_in_look_ups_counts_and_the_timeline,
    unknown_users_are_404_and_users_stay_in_their_project,
    the_listing_reads_stored_counters_not_the_events,
);

/// A MongoDB database last opened before users had counters: at the next
/// open each user gets the events already stored (under its id or an
/// alias it listed), once; a user only events named gets a record; and the
/// count is not made again at the open after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mongo_database_from_before_counters_gets_them_once() {
    use mongodb::bson::{self, doc};
    let test = tocsin_tests::TestConfig::new(StoreKind::Mongo);
    let common::store::StoreConfig::Mongo { uri, database, .. } = test.store_config() else {
        unreachable!("a MongoDB config");
    };
    let db = mongodb::Client::with_uri_str(&uri)
        .await
        .expect("mongo client")
        .database(&database);
    let day = |d: u32| {
        let t: DateTime<Utc> = format!("2025-01-{d:02}T00:00:00Z").parse().expect("a time");
        bson::DateTime::from_chrono(t)
    };
    db.collection("identities")
        .insert_many([
            doc! { "org": "o", "project": "p", "userId": "ada", "properties": { "plan": "pro" },
            "aliases": ["anon"], "createdAt": day(10), "updatedAt": day(12), "version": 1_i64 },
            doc! { "org": "o", "project": "p", "userId": "grace", "properties": {},
            "aliases": [], "createdAt": day(11), "updatedAt": day(11), "version": 1_i64 },
        ])
        .await
        .expect("old identities");
    let events: Vec<_> = [
        (Some("anon"), 1),
        (Some("ada"), 20),
        (Some("grace"), 5),
        (Some("linus"), 7),
        (Some("linus"), 9),
        (None, 30),
    ]
    .into_iter()
    .map(|(user, d)| {
        let mut e = doc! { "_id": uuid::Uuid::now_v7().to_string(), "org": "o", "project": "p",
        "channelName": "c", "title": "t", "createdAt": day(d) };
        if let Some(user) = user {
            e.insert("userId", user);
        }
        e
    })
    .collect();
    db.collection("events")
        .insert_many(events)
        .await
        .expect("old events");

    let scope = Scope::new("o", "p");
    for open in 0..2 {
        let store = common::store::open(&test.store_config(), std::time::Duration::from_secs(10))
            .await
            .expect("opens");
        let users = store
            .list_users(&scope, &UserFilter::default(), None, 10)
            .await
            .expect("listed");
        let seen: Vec<(&str, u64, DateTime<Utc>, DateTime<Utc>)> = users
            .iter()
            .map(|u| {
                (
                    u.user_id.as_str(),
                    u.event_count,
                    u.first_seen_at,
                    u.last_seen_at,
                )
            })
            .collect();
        let at = |d: u32| day(d).to_chrono();
        assert_eq!(
            seen,
            [
                ("ada", 2, at(1), at(20)),
                ("grace", 1, at(5), at(11)),
                ("linus", 2, at(7), at(9)),
            ],
            "open {open}"
        );
        let by_alias = store
            .get_identity(&scope, "anon")
            .await
            .expect("read")
            .expect("the alias names ada");
        assert_eq!(by_alias.user_id, "ada");
    }
}

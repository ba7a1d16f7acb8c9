//! `GET /v1/stream`: Server-Sent Events of the project's new events, across
//! replicas, resumable with `Last-Event-ID`, bounded per key.

use std::time::Duration;

use serde_json::{Value, json};
use tocsin_tests::{
    Reply, StoreKind, TestApp, TestConfig, contract::document, eventually, for_each_store,
};
use tokio::time::timeout;

/// How soon an event posted must show on an open stream.
const WITHIN: Duration = Duration::from_secs(1);

/// One Server-Sent Event, or a comment.
#[derive(Debug, Default, Clone, PartialEq)]
struct Frame {
    id: Option<String>,
    event: Option<String>,
    data: String,
    comment: bool,
}

/// Reads frames off an open stream response.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    async fn open(app: &TestApp, key: &str, query: &str, last_event_id: Option<&str>) -> Self {
        let mut request = app
            .client
            .get(app.url(&format!("/v1/stream{query}")))
            .bearer_auth(key);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.expect("stream opened");
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"].to_str().expect("ASCII");
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next frame, comments included, or `None` if none comes within
    /// `wait` (or the stream ends).
    async fn frame(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut frame = Frame::default();
                for line in block.lines() {
                    match line.split_once(':') {
                        Some(("", _)) => frame.comment = true,
                        Some(("id", v)) => frame.id = Some(v.trim_start().to_owned()),
                        Some(("event", v)) => frame.event = Some(v.trim_start().to_owned()),
                        Some(("data", v)) => frame.data.push_str(v.trim_start()),
                        _ => {}
                    }
                }
                return Some(frame);
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .ok()?
                .expect("stream readable")?;
            self.buffer
                .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }

    /// The next event (comments skipped), within `wait`.
    async fn event(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let frame = self.frame(left).await?;
            if frame.comment && frame.id.is_none() {
                continue;
            }
            assert_eq!(frame.event.as_deref(), Some("event"), "{frame:?}");
            let data: Value = serde_json::from_str(&frame.data).expect("data is JSON");
            assert_eq!(
                frame.id.as_deref(),
                data["id"].as_str(),
                "id line is the event's id"
            );
            return Some(data);
        }
    }
}

async fn post(app: &TestApp, key: &str, channel: &str, title: &str) -> Value {
    let reply = Reply::of(
        app.post_event(
            key,
            &json!({ "channelName": channel, "title": title, "notify": false }),
        )
        .await,
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body["data"].clone()
}

async fn busy_key(app: &TestApp, project: &str) -> String {
    app.create_key("acme", project, Some(100_000)).await
}

fn fresh_project() -> String {
    format!("p{}", uuid::Uuid::new_v4().simple())
}

async fn an_event_posted_after_opening_arrives_within_a_second(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let project = fresh_project();
    let key = busy_key(&app, &project).await;
    let before = post(&app, &key, "c", "before").await;
    let mut stream = Sse::open(&app, &key, "", None).await;
    let posted = post(&app, &key, "c", "after").await;
    let received = timeout(WITHIN, stream.event(WITHIN))
        .await
        .ok()
        .flatten()
        .expect("the event arrives within a second");
    // What was recorded before the stream opened is not sent.
    assert_ne!(received["id"], before["id"]);
    assert_eq!(received, posted, "the event as POST /v1/events answered it");
}

async fn another_projects_events_and_other_channels_never_show(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let project = fresh_project();
    let key = busy_key(&app, &project).await;
    let other = busy_key(&app, &fresh_project()).await;
    let mut all = Sse::open(&app, &key, "", None).await;
    let mut payments = Sse::open(&app, &key, "?channel=payments", None).await;
    post(&app, &other, "payments", "theirs").await;
    let signup = post(&app, &key, "signups", "ours, signups").await;
    let payment = post(&app, &key, "payments", "ours, payments").await;
    let first = all.event(WITHIN).await.expect("an event");
    let second = all.event(WITHIN).await.expect("another");
    assert_eq!(
        [first["id"].clone(), second["id"].clone()],
        [signup["id"].clone(), payment["id"].clone()]
    );
    assert_eq!(
        payments.event(WITHIN).await.expect("a payment")["id"],
        payment["id"]
    );
    assert_eq!(
        all.event(Duration::from_millis(600)).await,
        None,
        "nothing else"
    );
    assert_eq!(
        payments.event(Duration::from_millis(100)).await,
        None,
        "nothing else"
    );
}

async fn a_stream_resumes_after_last_event_id(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let project = fresh_project();
    let key = busy_key(&app, &project).await;
    let mut events = Vec::new();
    for i in 0..5 {
        events.push(
            post(
                &app,
                &key,
                if i % 2 == 0 { "even" } else { "odd" },
                &format!("e{i}"),
            )
            .await,
        );
    }
    let id = |e: &Value| e["id"].as_str().expect("id").to_owned();
    // The header, as browsers send it on reconnecting.
    let mut resumed = Sse::open(&app, &key, "", Some(&id(&events[1]))).await;
    for expected in &events[2..] {
        assert_eq!(
            resumed.event(WITHIN).await.expect("replayed")["id"],
            expected["id"]
        );
    }
    // Then live, without repeating what was replayed.
    let live = post(&app, &key, "even", "live").await;
    assert_eq!(resumed.event(WITHIN).await.expect("live")["id"], live["id"]);
    assert_eq!(resumed.event(Duration::from_millis(600)).await, None);

    // The query parameter, with a channel: only that channel's, after it.
    let mut even = Sse::open(
        &app,
        &key,
        &format!("?channel=even&lastEventId={}", id(&events[0])),
        None,
    )
    .await;
    for expected in [&events[2], &events[4], &live] {
        assert_eq!(
            even.event(WITHIN).await.expect("replayed")["id"],
            expected["id"]
        );
    }
}

async fn a_resumed_stream_never_gets_what_came_before_its_last_event_id(kind: StoreKind) {
    // The tail of this replica is following (a stream is open) but has not
    // polled yet when the resumed stream opens: the events recorded through
    // the other replica reach it only at the poll the live event's nudge
    // triggers, the resume point among them.
    let mut test = TestConfig::new(kind);
    test.config.stream_poll_interval_ms = 60_000.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let mut other = TestConfig::new(kind);
    other.config.backend = app.config.backend.clone();
    let other = TestApp::spawn_with(other).await;
    let key = busy_key(&app, &fresh_project()).await;
    let _following = Sse::open(&app, &key, "", None).await;
    let first = post(&other, &key, "c", "first").await;
    let second = post(&other, &key, "c", "second").await;
    let id = first["id"].as_str().expect("id");
    let mut resumed = Sse::open(&app, &key, "", Some(id)).await;
    assert_eq!(
        resumed.event(WITHIN).await.expect("replayed")["id"],
        second["id"]
    );
    let live = post(&app, &key, "c", "live").await;
    assert_eq!(resumed.event(WITHIN).await.expect("live")["id"], live["id"]);
    assert_eq!(resumed.event(Duration::from_millis(600)).await, None);
}

async fn events_recorded_by_another_replica_are_seen(kind: StoreKind) {
    let first = TestApp::spawn(kind).await;
    // A second replica on the same store: the same SQLite file, or the same
    // MongoDB database.
    let mut test = TestConfig::new(kind);
    test.config.backend = first.config.backend.clone();
    let second = TestApp::spawn_with(test).await;
    let project = fresh_project();
    let key = busy_key(&first, &project).await;
    let mut stream = Sse::open(&first, &key, "", None).await;
    let posted = post(&second, &key, "c", "through the other replica").await;
    let received = stream
        .event(WITHIN)
        .await
        .expect("the other replica's event");
    assert_eq!(received["id"], posted["id"]);
}

async fn quiet_streams_get_comments_and_open_streams_are_bounded_and_counted(kind: StoreKind) {
    let mut test = TestConfig::new(kind);
    test.config.stream_keepalive_seconds = 1.try_into().expect("non-zero");
    test.config.streams_per_key = 2;
    let app = TestApp::spawn_with(test).await;
    let key = busy_key(&app, &fresh_project()).await;
    let mut quiet = Sse::open(&app, &key, "", None).await;
    let frame = quiet
        .frame(Duration::from_secs(3))
        .await
        .expect("a comment");
    assert!(frame.comment && frame.id.is_none(), "{frame:?}");

    let second = Sse::open(&app, &key, "", None).await;
    let third = Reply::of(app.get_as("/v1/stream", &key).await).await;
    third.assert_error_envelope(429);
    assert!(
        third.body["error"]
            .as_str()
            .expect("error")
            .contains("streams open")
    );
    // Another key has streams of its own.
    let other = busy_key(&app, &fresh_project()).await;
    let _elsewhere = Sse::open(&app, &other, "", None).await;
    assert_eq!(app.scrape().await.value("tocsin_open_streams", &[]), 3.0);

    // A stream closed by its client frees its place.
    drop(second);
    eventually(
        Duration::from_secs(5),
        "the closed stream's place",
        async || {
            let n = app.scrape().await.value("tocsin_open_streams", &[]);
            (n == 2.0).then_some(()).ok_or(format!("{n} open"))
        },
    )
    .await;
    let _again = Sse::open(&app, &key, "", None).await;
}

async fn shutting_down_ends_open_streams(kind: StoreKind) {
    // A long grace: were the streams left open, stopping would wait it out.
    let mut test = TestConfig::new(kind);
    test.config.shutdown_grace_seconds = 60;
    let app = TestApp::spawn_with(test).await;
    let key = busy_key(&app, &fresh_project()).await;
    let mut stream = Sse::open(&app, &key, "", None).await;
    timeout(Duration::from_secs(20), app.stop())
        .await
        .expect("the server stops without waiting out the grace period");
    let end = timeout(Duration::from_secs(5), stream.response.chunk())
        .await
        .expect("the stream has ended");
    assert!(matches!(end, Ok(None)), "the stream ends cleanly: {end:?}");
}

/// An event recorded into the past (`timestamp`) is behind every open
/// stream: it is not sent live, nor replayed on a resume from an event
/// recorded after its time (docs/api.md, "History").
async fn history_never_reaches_an_open_stream_nor_a_resume(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let key = busy_key(&app, &fresh_project()).await;
    let first = post(&app, &key, "c", "first").await;
    let mut stream = Sse::open(&app, &key, "", None).await;
    let an_hour_ago = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let backfilled = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "c", "title": "history", "timestamp": an_hour_ago }),
        )
        .await,
    )
    .await;
    assert_eq!(backfilled.status, 201, "{}", backfilled.body);
    let live = post(&app, &key, "c", "live").await;
    assert_eq!(stream.event(WITHIN).await.expect("live")["id"], live["id"]);
    assert_eq!(
        stream.event(Duration::from_millis(600)).await,
        None,
        "nothing else"
    );

    let id = first["id"].as_str().expect("id");
    let mut resumed = Sse::open(&app, &key, "", Some(id)).await;
    assert_eq!(
        resumed.event(WITHIN).await.expect("replayed")["id"],
        live["id"]
    );
    assert_eq!(
        resumed.event(Duration::from_millis(600)).await,
        None,
        "nothing else"
    );
}

for_each_store!(
    shutting_down_ends_open_streams,
    an_event_posted_after_opening_arrives_within_a_second,
    another_projects_events_and_other_channels_never_show,
    a_stream_resumes_after_last_event_id,
    a_resumed_stream_never_gets_what_came_before_its_last_event_id,
    events_recorded_by_another_replica_are_seen,
    quiet_streams_get_comments_and_open_streams_are_bounded_and_counted,
    history_never_reaches_an_open_stream_nor_a_resume,
);

/// ST108: the published `text/event-stream` schema describes one message
/// as an SSE parser yields it (schemathesis's reading of OpenAPI 3.1), and
/// every real message matches it, its `data` matching the `contentSchema`.
#[tokio::test]
async fn every_message_matches_the_published_message_schema() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let doc = document(&app).await;
    let message = doc
        .pointer("/paths/~1v1~1stream/get/responses/200/content/text~1event-stream/schema")
        .cloned()
        .expect("the stream's schema");
    let validator = |schema: &Value| {
        let root = json!({ "allOf": [schema], "components": doc["components"] });
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&root)
            .expect("the schema compiles")
    };
    let key = busy_key(&app, &fresh_project()).await;
    let mut stream = Sse::open(&app, &key, "", None).await;
    post(&app, &key, "c", "one").await;
    let frame = loop {
        let frame = stream.frame(Duration::from_secs(5)).await.expect("a frame");
        if !frame.comment {
            break frame;
        }
    };
    let parsed = json!({ "event": frame.event, "id": frame.id, "data": frame.data });
    let errors: Vec<String> = validator(&message)
        .iter_errors(&parsed)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{parsed}: {errors:?}");
    let data: Value = serde_json::from_str(&frame.data).expect("JSON data");
    let content = &message["properties"]["data"]["contentSchema"];
    assert!(
        validator(content).is_valid(&data),
        "{data} against {content}"
    );
}

/// ST202: the resume parameters publish the form they take (an event id as
/// the stream gives it), and the stream accepts every value of that form:
/// a real event's id, and an id of no event here (a position all the same).
#[tokio::test]
async fn the_resume_parameters_publish_the_form_they_accept() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let doc = document(&app).await;
    let parameters = doc
        .pointer("/paths/~1v1~1stream/get/parameters")
        .and_then(Value::as_array)
        .expect("the stream's parameters");
    let key = busy_key(&app, &fresh_project()).await;
    let posted = post(&app, &key, "c", "one").await;
    let real = posted["id"].as_str().expect("an id").to_owned();
    let unknown = uuid::Uuid::now_v7().to_string();
    for name in ["lastEventId", "Last-Event-ID"] {
        let schema = &parameters
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is documented"))["schema"];
        let validator = jsonschema::draft202012::new(schema).expect("compiles");
        assert!(!validator.is_valid(&json!("")), "{name}: {schema}");
        assert!(!validator.is_valid(&json!("seven")), "{name}: {schema}");
        for id in [&real, &unknown] {
            assert!(validator.is_valid(&json!(id)), "{name}: {id}");
        }
    }
    for id in [&real, &unknown] {
        Sse::open(&app, &key, &format!("?lastEventId={id}"), None).await;
        Sse::open(&app, &key, "", Some(id)).await;
    }
}

//! Group commit on the write path, through the API: an event and the
//! idempotency outcome of the request that created it are stored together
//! or not at all, and a shutdown with writes in flight answers every
//! request and leaves nothing half-written. (The writer's batches, a
//! failed write among batch-mates, a batch that cannot commit and one key
//! claimed twice in one batch are tested beside the writer, in
//! `common/src/store/sqlite/group_commit.rs`; MongoDB's writer in
//! `mongo_group_commit.rs`.)

use std::{collections::HashMap, time::Duration};

use common::store::{IdempotencyBegin, Scope, StoreConfig};
use serde_json::{Value, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{Reply, StoreKind, TestApp, TestConfig, for_each_store};

/// The SQLite file of a test's settings.
fn sqlite_path(test: &TestConfig) -> std::path::PathBuf {
    match test.store_config() {
        StoreConfig::Sqlite { path, .. } => path,
        other => panic!("sqlite expected, got {other:?}"),
    }
}

/// An embedded (SQLite) app with a key, and a connection of the test's own
/// to its file on which `triggers` were created (SQLite triggers stand in
/// for a write that fails, or must not happen).
async fn app_with_triggers(triggers: &str) -> (TestApp, String, Scope, rusqlite::Connection) {
    let test = TestConfig::new(StoreKind::Sqlite);
    let path = sqlite_path(&test);
    let app = TestApp::spawn_with(test).await;
    let (key, scope) = app.new_key().await;
    let conn = rusqlite::Connection::open(&path).expect("sqlite opens");
    conn.execute_batch(triggers).expect("triggers");
    (app, key, scope, conn)
}

/// Before group commit, the event was committed first and the outcome
/// after: a failure (or a deadline) between the two left an event whose
/// retry was not a replay. Now a write that cannot store the outcome does
/// not store the event either, and the retry does the work once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_is_never_stored_without_its_idempotency_outcome() {
    let (app, key, scope, conn) = app_with_triggers(
        "CREATE TRIGGER no_outcome BEFORE UPDATE OF status ON idempotency \
         WHEN NEW.status IS NOT NULL \
         BEGIN SELECT RAISE(ABORT, 'the outcome cannot be stored'); END",
    )
    .await;
    let body = json!({ "channelName": "orders", "title": "Order placed", "notify": false });

    let failed = Reply::of(app.post_idempotent("/v1/events", &key, "k1", &body).await).await;
    failed.assert_error_envelope(500);
    assert_eq!(
        app.store.events_stored(&scope).await.expect("count"),
        0,
        "no event without its outcome"
    );

    conn.execute_batch("DROP TRIGGER no_outcome")
        .expect("dropped");
    let retried = Reply::of(app.post_idempotent("/v1/events", &key, "k1", &body).await).await;
    assert_eq!(retried.status, 201, "{}", retried.body);
    assert_eq!(
        retried.header("x-idempotent-replay"),
        None,
        "the work is done now"
    );
    let replayed = Reply::of(app.post_idempotent("/v1/events", &key, "k1", &body).await).await;
    assert_eq!(replayed.header("x-idempotent-replay"), Some("true"));
    assert_eq!(replayed.body, retried.body);
    assert_eq!(app.store.events_stored(&scope).await.expect("count"), 1);
}

/// In embedded mode the request that records an event asking for a push
/// writes once: the event goes in `queued`, with its outcome when it came
/// under an Idempotency-Key, and its job to the in-process queue. Triggers
/// refuse the writes that used to follow (labelling the event `queued`,
/// and storing the answer again because that label changed it): were they
/// made, the answer would say `pending` and its replay differ from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_event_asking_for_a_push_is_one_write() {
    let (app, key, _, _conn) = app_with_triggers(
        "CREATE TRIGGER no_label BEFORE UPDATE OF notification_state ON events \
         WHEN NEW.notification_state = 'queued' \
         BEGIN SELECT RAISE(ABORT, 'labelled after the insert'); END; \
         CREATE TRIGGER no_second_outcome BEFORE UPDATE OF status ON idempotency \
         WHEN OLD.status IS NOT NULL \
         BEGIN SELECT RAISE(ABORT, 'the outcome stored twice'); END",
    )
    .await;
    let body = json!({ "channelName": "c", "title": "t", "notify": true });

    let plain = Reply::of(app.post_event(&key, &body).await).await;
    assert_eq!(plain.status, 201, "{}", plain.body);
    assert_eq!(plain.body["data"]["notification"]["state"], "queued");

    let first = app.post_idempotent("/v1/events", &key, "k1", &body).await;
    assert_eq!(first.status(), 201);
    let first = first.bytes().await.expect("body");
    let answer: Value = serde_json::from_slice(&first).expect("json");
    assert_eq!(answer["data"]["notification"]["state"], "queued");
    let again = app.post_idempotent("/v1/events", &key, "k1", &body).await;
    assert_eq!(
        again
            .headers()
            .get("x-idempotent-replay")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    assert_eq!(again.bytes().await.expect("body"), first);

    // The job went to the queue all the same: the notifier settles the
    // event (no device: nothing to send).
    let id = answer["data"]["id"].as_str().expect("id");
    app.settled(&key, id, "skipped").await;
}

/// The outcome is stored with the event and, when the answer changes after
/// that write (the job queued), the final answer replaces it: a replay is
/// the answer the client got, byte for byte.
async fn a_replay_is_the_answer_given_whether_notified_or_not(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    for (i, notify) in [false, true].into_iter().enumerate() {
        let body = json!({ "channelName": "c", "title": "t", "notify": notify });
        let idempotency_key = format!("k{i}");
        let first = app
            .post_idempotent("/v1/events", &key, &idempotency_key, &body)
            .await;
        assert_eq!(first.status(), 201);
        let first = first.bytes().await.expect("body");
        let again = app
            .post_idempotent("/v1/events", &key, &idempotency_key, &body)
            .await;
        assert_eq!(
            again
                .headers()
                .get("x-idempotent-replay")
                .and_then(|v| v.to_str().ok()),
            Some("true")
        );
        assert_eq!(
            again.bytes().await.expect("body"),
            first,
            "notify: {notify}"
        );
    }
}

/// Requests in flight when the server is told to stop are all answered,
/// and what the store holds afterwards is whole: each event has its
/// outcome, and each request answered 201 replays that very answer.
async fn a_shutdown_with_writes_in_flight_answers_every_request_and_loses_nothing(kind: StoreKind) {
    const REQUESTS: usize = 48;
    let app = TestApp::spawn(kind).await;
    let (key, scope) = app.new_key().await;
    let store = std::sync::Arc::clone(&app.store);
    let body = json!({ "channelName": "c", "title": "in flight", "notify": true }).to_string();
    let client = app.client.clone();
    let url = app.url("/v1/events");
    let (first_answer, answered) = tokio::sync::watch::channel(false);
    let requests: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let (client, url, key, body) = (client.clone(), url.clone(), key.clone(), body.clone());
            let first_answer = first_answer.clone();
            tokio::spawn(async move {
                let sent = client
                    .post(url)
                    .bearer_auth(key)
                    .header("Idempotency-Key", format!("k{i}"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                let _ = first_answer.send(true);
                match sent {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let bytes = response.bytes().await.ok();
                        (format!("k{i}"), Some((status, bytes)))
                    }
                    // Never accepted: the server had stopped listening.
                    Err(_) => (format!("k{i}"), None),
                }
            })
        })
        .collect();
    let mut answered = answered;
    answered.wait_for(|a| *a).await.expect("a first answer");
    tokio::time::timeout(Duration::from_secs(60), app.stop())
        .await
        .expect("the server stops");

    let mut answers = HashMap::new();
    for request in requests {
        let (key, answer) = tokio::time::timeout(Duration::from_secs(60), request)
            .await
            .expect("every request is answered")
            .expect("task");
        answers.insert(key, answer);
    }
    let print = fingerprint(&body);
    let mut replayable = 0;
    for (idempotency_key, answer) in &answers {
        let begun = store
            .begin_idempotent(
                &scope,
                idempotency_key,
                &print,
                uuid::Uuid::now_v7(),
                common::time::now(),
                Duration::from_secs(3600),
                Duration::from_secs(3600),
            )
            .await
            .expect("claimed");
        match (answer, begun) {
            (answer, IdempotencyBegin::Replay(stored)) => {
                if let Some((status, body)) = answer {
                    assert_eq!(*status, stored.status, "{idempotency_key}");
                    assert_eq!(body.as_deref(), Some(&stored.body[..]), "{idempotency_key}");
                }
                let sent: Value = serde_json::from_slice(&stored.body).expect("JSON");
                let id =
                    uuid::Uuid::parse_str(sent["data"]["id"].as_str().expect("id")).expect("uuid");
                assert!(
                    store.get_event(&scope, id).await.expect("get").is_some(),
                    "{idempotency_key}: the event of a stored outcome is stored"
                );
                replayable += 1;
            }
            (Some((201, _)), other) => {
                panic!("{idempotency_key}: answered 201 but its outcome is {other:?}")
            }
            // Not answered 201: not written, or cut before its write.
            (_, IdempotencyBegin::Started { .. } | IdempotencyBegin::InFlight) => {}
            (answer, other) => panic!("{idempotency_key}: {answer:?} then {other:?}"),
        }
    }
    assert!(
        replayable > 0,
        "some requests were answered before the stop"
    );
    assert_eq!(
        store.events_stored(&scope).await.expect("count"),
        replayable,
        "every stored event has its outcome"
    );
}

/// The fingerprint ingest keeps for a `POST /v1/events` of `body`
/// (`ingest/src/idempotency.rs`).
fn fingerprint(body: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("POST\n/v1/events\n{body}"));
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

for_each_store!(
    a_replay_is_the_answer_given_whether_notified_or_not,
    a_shutdown_with_writes_in_flight_answers_every_request_and_loses_nothing,
);

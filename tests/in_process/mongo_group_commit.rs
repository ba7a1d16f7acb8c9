//! Group commit on MongoDB, beside the writer's SQLite tests
//! (`common/src/store/sqlite/group_commit_tests.rs`): concurrent inserts
//! share one bulk write, a failed write among batch-mates fails alone, one
//! Idempotency-Key twice in a batch records one event, a batch that fails
//! as a whole is a 503 for each caller and stores nothing, and an insert
//! whose caller gave up before its batch is not stored; and a shutdown
//! with a batch in flight answers every request and loses nothing.
//!
//! The store reaches the MongoDB-compatible server through a proxy the
//! test pauses: the writer's bulk write stays on the wire while the
//! inserts started meanwhile queue, and all of those make its next batch.

use std::{sync::Arc, time::Duration};

use common::store::{
    Event, IdempotencyBegin, IdempotentOutcome, Inserted, Scope, Store, StoreError, StoreResult,
    StoredResponse, mongo::MongoStore,
};
use common::store::{EventStore, IdempotencyStore};
use serde_json::{Value, json};
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{
    Embedded, StoreKind, TestApp, TestConfig, pending_event, proxy::Proxy, unique_db_name,
};
use tokio::task::JoinHandle;
use uuid::Uuid;

/// A store of its own database, reached through a proxy.
async fn behind_proxy() -> (Arc<MongoStore>, Proxy) {
    let (proxy, through) = Proxy::to_mongo().await;
    let store = MongoStore::connect(
        &through,
        &unique_db_name(),
        Default::default(),
        Duration::from_secs(3),
    )
    .await
    .expect("store opens");
    (Arc::new(store), proxy)
}

fn scope() -> Scope {
    Scope::new("acme", format!("p{}", Uuid::new_v4().simple()))
}

fn event(scope: &Scope, title: &str) -> Event {
    Event {
        title: title.into(),
        ..pending_event(scope)
    }
}

fn insert(store: &Arc<MongoStore>, event: &Event) -> JoinHandle<StoreResult<Inserted>> {
    let (store, event) = (Arc::clone(store), event.clone());
    tokio::spawn(async move { store.insert_event(&event).await })
}

fn insert_with_outcome(
    store: &Arc<MongoStore>,
    event: &Event,
    outcome: &IdempotentOutcome,
) -> JoinHandle<StoreResult<Inserted>> {
    let (store, event, outcome) = (Arc::clone(store), event.clone(), outcome.clone());
    tokio::spawn(async move { store.insert_event_with_outcome(&event, &outcome).await })
}

/// Pauses the proxy and starts one insert (into a scope of its own, whose
/// channel exists), returned once the writer has sent its bulk write: it
/// is held on the wire until the proxy is restored, and the inserts
/// started meanwhile queue behind it.
async fn hold(store: &Arc<MongoStore>, proxy: &Proxy) -> JoinHandle<StoreResult<Inserted>> {
    let holder = scope();
    store
        .insert_event(&event(&holder, "creates the channel"))
        .await
        .expect("stored");
    let sent = store.group_commit_counts().bulk_writes;
    proxy.pause();
    let held = insert(store, &event(&holder, "held"));
    for _ in 0..1000 {
        if store.group_commit_counts().bulk_writes > sent {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the held insert was never sent");
}

/// Waits until `n` inserts wait in the writer's queue.
async fn queued(store: &MongoStore, n: usize) {
    for _ in 0..1000 {
        if store.group_commit_counts().queued == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{n} inserts never queued");
}

async fn answers(tasks: Vec<JoinHandle<StoreResult<Inserted>>>) -> Vec<StoreResult<Inserted>> {
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task"));
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_concurrent_inserts_share_one_bulk_write() {
    let (store, proxy) = behind_proxy().await;
    let held = hold(&store, &proxy).await;
    let before = store.group_commit_counts();
    let scope = scope();
    let tasks: Vec<_> = (0..20)
        .map(|i| insert(&store, &event(&scope, &format!("e{i}"))))
        .collect();
    queued(&store, 20).await;
    proxy.restore();
    assert_eq!(held.await.expect("task").expect("stored"), Inserted::New);
    for answer in answers(tasks).await {
        assert_eq!(answer.expect("stored"), Inserted::New);
    }
    let after = store.group_commit_counts();
    assert_eq!(
        after.bulk_writes - before.bulk_writes,
        1,
        "the twenty queued inserts went in one bulk write: {before:?} then {after:?}"
    );
    assert_eq!(after.events - before.events, 21, "and the held one");
    assert_eq!(after.channel_upserts - before.channel_upserts, 1);
    assert_eq!(store.events_stored(&scope).await.expect("count"), 20);
    assert_eq!(
        store.channel_names(&scope).await.expect("channels"),
        vec!["c".to_owned()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_a_duplicate_in_a_batch_gets_the_stored_event_while_its_batch_mates_are_stored() {
    let (store, proxy) = behind_proxy().await;
    let scope = scope();
    let stored = event(&scope, "stored before");
    store.insert_event(&stored).await.expect("stored");
    let held = hold(&store, &proxy).await;
    // A retry of the stored event, the same new event twice (two tries of
    // one request in one batch), and events of their own.
    let retry = Event {
        title: "a retry".into(),
        ..stored.clone()
    };
    let twice = event(&scope, "twice (a)");
    let twice_again = Event {
        title: "twice (b)".into(),
        ..twice.clone()
    };
    let fresh: Vec<Event> = (0..8).map(|i| event(&scope, &format!("f{i}"))).collect();
    let mut tasks = vec![
        insert(&store, &retry),
        insert(&store, &twice),
        insert(&store, &twice_again),
    ];
    tasks.extend(fresh.iter().map(|e| insert(&store, e)));
    queued(&store, tasks.len()).await;
    proxy.restore();
    held.await.expect("task").expect("stored");
    let mut answers = answers(tasks).await.into_iter();

    let Some(Ok(Inserted::Existing(found))) = answers.next() else {
        panic!("the retry did not get the stored event");
    };
    assert_eq!(*found, stored, "the event as first stored, not the retry");
    let pair = [answers.next(), answers.next()].map(|a| a.expect("answer").expect("answered"));
    let (new, existing) = match pair {
        [Inserted::New, Inserted::Existing(e)] => (&twice, e),
        [Inserted::Existing(e), Inserted::New] => (&twice_again, e),
        other => panic!("one of the two is stored, the other finds it: {other:?}"),
    };
    assert_eq!(*existing, *new, "the other try gets the one stored");
    for answer in answers {
        assert_eq!(answer.expect("stored"), Inserted::New);
    }
    assert_eq!(
        store.events_stored(&scope).await.expect("count"),
        1 + 1 + 8,
        "the stored one, one of the two, the eight"
    );
    for e in &fresh {
        assert_eq!(
            store.get_event(&scope, e.id).await.expect("get").as_ref(),
            Some(e)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_one_idempotency_key_twice_in_a_batch_records_one_event_and_its_outcome() {
    let (store, proxy) = behind_proxy().await;
    let scope = scope();
    let (ttl, lock) = (Duration::from_secs(3600), Duration::from_secs(60));
    let claim = |resource| {
        let (store, scope) = (Arc::clone(&store), scope.clone());
        async move {
            store
                .begin_idempotent(
                    &scope,
                    "k",
                    "print",
                    resource,
                    common::time::now(),
                    ttl,
                    lock,
                )
                .await
                .expect("answered")
        }
    };
    let IdempotencyBegin::Started { resource } = claim(Uuid::now_v7()).await else {
        panic!("the first claim starts");
    };
    let held = hold(&store, &proxy).await;
    // Two tries of one request under the key (the first one's deadline
    // fired after its insert was sent, the retry took the claim over):
    // both carry the id the claim reserved, with their own answers.
    let tries: Vec<(Event, IdempotentOutcome)> = ["first", "second"]
        .into_iter()
        .map(|body| {
            let e = Event {
                id: resource,
                ..event(&scope, body)
            };
            let outcome = IdempotentOutcome {
                key: "k".into(),
                response: StoredResponse {
                    status: 201,
                    content_type: "application/json".into(),
                    body: body.as_bytes().to_vec(),
                },
            };
            (e, outcome)
        })
        .collect();
    let tasks: Vec<_> = tries
        .iter()
        .map(|(e, outcome)| insert_with_outcome(&store, e, outcome))
        .collect();
    queued(&store, 2).await;
    proxy.restore();
    held.await.expect("task").expect("stored");
    let answers = answers(tasks).await;
    let winner = match (&answers[0], &answers[1]) {
        (Ok(Inserted::New), Ok(Inserted::Existing(e))) => {
            assert_eq!(**e, tries[0].0);
            &tries[0]
        }
        (Ok(Inserted::Existing(e)), Ok(Inserted::New)) => {
            assert_eq!(**e, tries[1].0);
            &tries[1]
        }
        other => panic!("one try stores the event, the other finds it: {other:?}"),
    };
    assert_eq!(store.events_stored(&scope).await.expect("count"), 1);
    assert_eq!(
        claim(Uuid::now_v7()).await,
        IdempotencyBegin::Replay(winner.1.response.clone()),
        "the key replays the answer of the try that stored the event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_a_batch_that_fails_as_a_whole_is_unavailable_to_every_caller_and_stores_nothing() {
    let (store, proxy) = behind_proxy().await;
    let held = hold(&store, &proxy).await;
    let scope = scope();
    let tasks: Vec<_> = (0..5)
        .map(|i| insert(&store, &event(&scope, &format!("e{i}"))))
        .collect();
    queued(&store, 5).await;
    // The connection carrying the held bulk write closes under it, and
    // the server cannot be reached for the queued batch.
    proxy.cut();
    let held = held.await.expect("task");
    assert!(matches!(held, Err(StoreError::Unavailable(_))), "{held:?}");
    for answer in answers(tasks).await {
        assert!(
            matches!(answer, Err(StoreError::Unavailable(_))),
            "{answer:?}"
        );
    }
    proxy.restore();
    assert_eq!(store.events_stored(&scope).await.expect("count"), 0);
    // The writer carries on with the next batch.
    store
        .insert_event(&event(&scope, "after"))
        .await
        .expect("stored");
    assert_eq!(store.events_stored(&scope).await.expect("count"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_an_insert_whose_caller_gave_up_before_its_batch_is_not_stored() {
    let (store, proxy) = behind_proxy().await;
    let held = hold(&store, &proxy).await;
    let scope = scope();
    let tasks: Vec<_> = (0..3)
        .map(|i| insert(&store, &event(&scope, &format!("e{i}"))))
        .collect();
    queued(&store, 3).await;
    // As a deadline does: the callers stop waiting.
    for task in tasks {
        task.abort();
        assert!(task.await.expect_err("aborted").is_cancelled());
    }
    proxy.restore();
    held.await.expect("task").expect("stored");
    let before = store.group_commit_counts();
    store
        .insert_event(&event(&scope, "waited"))
        .await
        .expect("stored");
    assert_eq!(store.events_stored(&scope).await.expect("count"), 1);
    let after = store.group_commit_counts();
    assert_eq!(
        (
            after.bulk_writes - before.bulk_writes,
            after.events - before.events
        ),
        (1, 1),
        "nothing sent for the callers that left"
    );
}

/// Requests in flight when the server is told to stop, one bulk write of
/// theirs held on the wire, are all answered once the store answers, and
/// each event answered 201 is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_a_shutdown_with_a_batch_in_flight_answers_every_request_and_loses_nothing() {
    const REQUESTS: usize = 16;
    let (store, proxy) = behind_proxy().await;
    let mut test = TestConfig::new(StoreKind::Mongo);
    test.config.shutdown_grace_seconds = 60;
    let serving: Arc<dyn Store> = Arc::clone(&store) as Arc<dyn Store>;
    let app = TestApp::spawn_wrapped(test, Embedded::default(), move |_| serving).await;
    let (key, scope) = app.new_key().await;
    let body = json!({ "channelName": "c", "title": "in flight", "notify": false });
    assert_eq!(app.post_event(&key, &body).await.status(), 201);
    let sent = store.group_commit_counts().bulk_writes;
    proxy.pause();
    let requests: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let request = app
                .client
                .post(app.url("/v1/events"))
                .bearer_auth(&key)
                .json(&body);
            tokio::spawn(async move {
                // Not accepted before the listener closed, or not read
                // before the connections drained: never in flight.
                let response = request.send().await.ok()?;
                let status = response.status().as_u16();
                Some((status, response.json::<Value>().await.expect("JSON")))
            })
        })
        .collect();
    for _ in 0..1000 {
        if store.group_commit_counts().bulk_writes > sent {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        store.group_commit_counts().bulk_writes > sent,
        "a bulk write is on the wire"
    );
    let addr = app.base.trim_start_matches("http://").to_owned();
    let stopping = tokio::spawn(app.stop());
    // Stopping has begun once the listener refuses connections.
    for _ in 0..1000 {
        if tokio::net::TcpStream::connect(&addr).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.restore();
    tokio::time::timeout(Duration::from_secs(60), stopping)
        .await
        .expect("the server stops")
        .expect("task");
    let mut created = 0;
    for request in requests {
        let Some((status, answer)) = request.await.expect("task") else {
            continue;
        };
        assert_eq!(status, 201, "{answer}");
        let id = Uuid::parse_str(answer["data"]["id"].as_str().expect("id")).expect("uuid");
        assert!(
            store.get_event(&scope, id).await.expect("get").is_some(),
            "the event of a 201 is stored"
        );
        created += 1;
    }
    assert!(created > 0, "the requests of the held batch were answered");
    assert_eq!(
        store.events_stored(&scope).await.expect("count"),
        1 + created,
        "no event stored but those answered 201"
    );
}

/// The write concern the configuration names (by default `w: "majority"`,
/// `j: true`) is the one every write of the store carries, and the server
/// takes writes made with it: an event written with each choice is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_carry_the_configured_write_concern() {
    use common::store::{MongoWriteConcern, StoreConfig};
    use mongodb::options::Acknowledgment;
    let test = TestConfig::new(StoreKind::Mongo);
    let StoreConfig::Mongo {
        uri,
        database,
        write_concern,
    } = test.store_config()
    else {
        panic!("a MongoDB store");
    };
    assert_eq!(write_concern, MongoWriteConcern::Majority, "the default");
    for (choice, w, journal) in [
        (
            MongoWriteConcern::Majority,
            Acknowledgment::Majority,
            Some(true),
        ),
        (
            MongoWriteConcern::Journaled,
            Acknowledgment::Nodes(1),
            Some(true),
        ),
        (
            MongoWriteConcern::Acknowledged,
            Acknowledgment::Nodes(1),
            None,
        ),
    ] {
        let store = MongoStore::connect(&uri, &database, choice, Duration::from_secs(3))
            .await
            .expect("store opens");
        let concern = store.write_concern().expect("a write concern").clone();
        assert_eq!(
            (concern.w, concern.journal),
            (Some(w), journal),
            "{choice:?}"
        );
        let scope = scope();
        let written = event(&scope, "durable");
        assert_eq!(
            store.insert_event(&written).await.expect("written"),
            Inserted::New
        );
        assert!(
            store
                .get_event(&scope, written.id)
                .await
                .expect("read")
                .is_some(),
            "{choice:?}"
        );
    }
}

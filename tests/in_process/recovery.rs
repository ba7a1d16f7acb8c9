//! Recovery from what a crash leaves behind, in process: a dead worker's
//! claim, a backlog of jobs lost with the in-process queue, a job lost on
//! the broker, a poison job, and a store that answers too late. The same
//! states the crash suite (tests/binaries/faults.rs) produces with kill -9
//! on the real binaries, set up here directly so each case is exact.

use std::{sync::Arc, time::Duration};

use chrono::Duration as Age;
use common::store::{ApnsEnvironment, DeviceRegistration, Event, NotificationState, Scope, Store};
use serde_json::json;
use tocsin_tests::stored::StoredEvents as _;
use tocsin_tests::{
    Embedded, Reply, StoreKind, TestApp, TestConfig, eventually, for_each_store, pending_event,
    pipeline::{Pipeline, WAIT, token},
    recording::RecordingProvider,
    test_notifier_config,
};
use uuid::Uuid;

/// An event as a crashed ingest leaves it: stored, its job gone.
fn stranded_event(scope: &Scope, state: NotificationState, age: Age) -> Event {
    Event {
        created_at: common::time::now() - age,
        notification: state,
        notification_due_at: Some(common::time::now() - age),
        ..pending_event(scope)
    }
}

async fn register(store: &dyn Store, scope: &Scope, n: u8) -> Uuid {
    let (device, _) = store
        .upsert_device(
            scope,
            &DeviceRegistration {
                target: common::store::PushTarget::Apns {
                    token: token(n),
                    environment: ApnsEnvironment::Sandbox,
                },
                name: None,
                rules: common::rules::AlertRules::every_alert(),
            },
            common::time::now(),
        )
        .await
        .expect("device registered");
    device.id
}

/// Polls the store until every event is in a final state, or fails.
async fn wait_settled(store: &dyn Store, scope: &Scope, ids: &[Uuid]) -> Vec<Event> {
    eventually(WAIT, "every event to settle", async || {
        let mut events = Vec::new();
        for id in ids {
            events.push(
                store
                    .get_event(scope, *id)
                    .await
                    .expect("read")
                    .expect("stored"),
            );
        }
        let open = events
            .iter()
            .filter(|e| {
                matches!(
                    e.notification,
                    NotificationState::Pending | NotificationState::Queued
                )
            })
            .count();
        if open == 0 {
            Ok(events)
        } else {
            Err(format!("{open} of {} events open", ids.len()))
        }
    })
    .await
}

async fn embedded_with(test: TestConfig, provider: Arc<RecordingProvider>) -> TestApp {
    TestApp::spawn_with_options(
        test,
        Embedded {
            provider: Some(provider),
            notifier: test_notifier_config(),
        },
    )
    .await
}

/// A worker claimed the delivery and died: the claim is a lease, and once it
/// runs out the push is sent by someone else, counted as a possible repeat,
/// and the event settles.
async fn a_dead_workers_claim_is_retaken_when_its_lease_runs_out(kind: StoreKind) {
    let test = TestConfig::new(kind);
    let store = common::store::open(&test.store_config(), Duration::from_secs(10))
        .await
        .expect("store");
    let scope = Scope::new("acme", "lease");
    let device = register(store.as_ref(), &scope, 1).await;
    let event = stranded_event(&scope, NotificationState::Queued, Age::seconds(1));
    store.insert_event(&event).await.expect("inserted");
    store
        .claim_deliveries(
            &[common::store::lease::ClaimKey {
                scope: scope.clone(),
                event_id: event.id,
                device_id: device,
            }],
            &common::store::lease::ClaimRequest {
                now: common::time::now(),
                lease: Duration::from_secs(2),
                max_attempts: 4,
            },
        )
        .await
        .expect("the dead worker's claim");

    // The restarted ingest re-enqueues the event; the first look finds the
    // dead worker's live lease, a later one finds it expired.
    let provider = Arc::new(RecordingProvider::default());
    let app = embedded_with(test, Arc::clone(&provider)).await;
    let settled = wait_settled(app.store.as_ref(), &scope, &[event.id]).await;
    assert_eq!(settled[0].notification, NotificationState::Delivered);
    assert_eq!(provider.delivered_to(&token(1)).len(), 1);
    // The dead worker may have pushed before it died: the push that took
    // over is counted as a possible repeat (at-least-once to the provider).
    assert_eq!(
        app.scrape()
            .await
            .value("tocsin_notifier_possible_repeat_pushes_total", &[]),
        1.0
    );
    app.stop().await;
}

/// More stranded events than any relay batch, `queued` ones among them
/// (their jobs were lost with the in-process queue): every one is sent.
async fn start_up_relays_the_whole_backlog_queued_ones_included(kind: StoreKind) {
    let test = TestConfig::new(kind);
    let store = common::store::open(&test.store_config(), Duration::from_secs(10))
        .await
        .expect("store");
    let scope = Scope::new("acme", "backlog");
    register(store.as_ref(), &scope, 2).await;
    let count = if kind == StoreKind::Mongo { 260 } else { 325 };
    let mut ids = Vec::new();
    for i in 0..count {
        let state = if i % 3 == 0 {
            NotificationState::Pending
        } else {
            NotificationState::Queued
        };
        let event = stranded_event(&scope, state, Age::seconds(60));
        store.insert_event(&event).await.expect("inserted");
        ids.push(event.id);
    }
    let provider = Arc::new(RecordingProvider::default());
    let app = embedded_with(test, Arc::clone(&provider)).await;
    let settled = wait_settled(app.store.as_ref(), &scope, &ids).await;
    assert!(
        settled
            .iter()
            .all(|e| e.notification == NotificationState::Delivered)
    );
    let mut pushed: Vec<Uuid> = provider
        .delivered_to(&token(2))
        .iter()
        .map(|p| p.alert.event_id)
        .collect();
    pushed.sort();
    ids.sort();
    assert_eq!(pushed, ids, "each event pushed exactly once");
    app.stop().await;
}

for_each_store!(
    a_dead_workers_claim_is_retaken_when_its_lease_runs_out,
    start_up_relays_the_whole_backlog_queued_ones_included,
);

/// Production mode: a `queued` event whose job vanished from the broker is
/// published again by the relay once it is overdue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_event_whose_job_was_lost_is_published_again() {
    let pipeline = Pipeline::with_broker(StoreKind::Sqlite, None).await;
    let device = pipeline.register(&token(3), None).await;
    assert!(device["id"].is_string());
    let scope = pipeline.scope.clone();
    let event = stranded_event(&scope, NotificationState::Queued, Age::minutes(30));
    pipeline
        .app
        .store
        .insert_event(&event)
        .await
        .expect("inserted");
    let settled = wait_settled(pipeline.app.store.as_ref(), &scope, &[event.id]).await;
    assert_eq!(settled[0].notification, NotificationState::Delivered);
    assert_eq!(pipeline.provider.delivered_to(&token(3)).len(), 1);
    pipeline.finish().await;
}

/// A project whose devices the store cannot read back (here: a corrupt
/// row) makes every job for it fail the same way. It is retried a bounded number of times,
/// then dead-lettered and counted, not retried forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_job_is_dead_lettered_after_bounded_retries() {
    let test = TestConfig::new(StoreKind::Sqlite);
    let path = match test.store_config() {
        common::store::StoreConfig::Sqlite { path, .. } => path,
        other => panic!("sqlite expected, got {other:?}"),
    };
    let store = common::store::open(&test.store_config(), Duration::from_secs(10))
        .await
        .expect("store");
    let scope = Scope::new("acme", "poison");
    register(store.as_ref(), &scope, 4).await;
    let event = stranded_event(&scope, NotificationState::Queued, Age::seconds(60));
    store.insert_event(&event).await.expect("inserted");
    drop(store);
    let conn = rusqlite::Connection::open(&path).expect("sqlite opens");
    conn.execute(
        "UPDATE devices SET environment = 'bogus' WHERE project = 'poison'",
        [],
    )
    .expect("corrupted");
    drop(conn);

    let provider = Arc::new(RecordingProvider::default());
    let app = embedded_with(test, provider).await;
    let scope = Scope::new("acme", "poison");
    eventually(WAIT, "the poison job to be dead-lettered", async || {
        let scrape = app.scrape().await;
        let dead = scrape.value(
            "tocsin_notifier_jobs_dead_lettered_total",
            &[("reason", "poison")],
        );
        if dead >= 1.0 {
            Ok(())
        } else {
            Err(scrape.text().to_owned())
        }
    })
    .await;
    let stored = app
        .store
        .get_event(&scope, event.id)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(
        stored.notification,
        NotificationState::Failed,
        "settled as failed"
    );
    // And it stays dead: no more retries after the dead-lettering.
    let retries = |s: &tocsin_tests::openmetrics::Scrape| {
        s.value("tocsin_notifier_job_retries_total", &[("reason", "error")])
    };
    let before = retries(&app.scrape().await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        retries(&app.scrape().await),
        before,
        "retried after dead-lettering"
    );
    app.stop().await;
}

/// The store answers after the deadline, but the insert did commit: the
/// 503's Idempotency-Key is not released into a second event; the retry
/// gets the event that was recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_timeout_after_the_insert_committed_never_makes_a_duplicate() {
    let mut test = TestConfig::new(StoreKind::Sqlite);
    test.config.backend.store_timeout_ms = 300.try_into().expect("non-zero");
    let path = match test.store_config() {
        common::store::StoreConfig::Sqlite { path, .. } => path,
        other => panic!("sqlite expected, got {other:?}"),
    };
    let app = TestApp::spawn_with(test).await;
    let (key, scope) = app.new_key().await;
    let body = json!({ "channelName": "ops", "title": "Exactly one", "notify": false });

    // A trigger makes the insert itself slow (a large cross join), so the
    // request's deadline passes while the insert is still running; it
    // commits afterwards.
    let conn = rusqlite::Connection::open(&path).expect("sqlite opens");
    conn.execute_batch(
        "CREATE TABLE slow (x INTEGER);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 400)
         INSERT INTO slow SELECT x FROM n;
         CREATE TRIGGER slow_insert BEFORE INSERT ON events BEGIN
           SELECT count(*) FROM slow a, slow b, slow c;
         END;",
    )
    .expect("slow trigger");
    let first = Reply::of(app.post_idempotent("/v1/events", &key, "once", &body).await).await;
    first.assert_error_envelope(503);
    eventually(WAIT, "the insert to commit", async || {
        match app.store.events_stored(&scope).await {
            Ok(1) => Ok(()),
            other => Err(format!("{other:?} events")),
        }
    })
    .await;
    conn.execute_batch("DROP TRIGGER slow_insert")
        .expect("trigger dropped");

    let retry = Reply::of(app.post_idempotent("/v1/events", &key, "once", &body).await).await;
    assert_eq!(retry.status, 201, "{}", retry.body);
    assert_eq!(app.store.events_stored(&scope).await.expect("counted"), 1);
    let again = Reply::of(app.post_idempotent("/v1/events", &key, "once", &body).await).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.header("x-idempotent-replay"), Some("true"));
    assert_eq!(again.body["data"]["id"], retry.body["data"]["id"]);
    app.stop().await;
}

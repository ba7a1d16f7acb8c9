//! The delivery state machine in virtual time: claim, lease expiry and
//! takeover, retry after backoff, a push cut off at half the lease, giving
//! up after the last retry, and settling the event. tokio's clock is paused
//! and the deliverer reads the time from it, so the minutes a lease or a
//! backoff lasts pass instantly, and every instant asserted is exact. The
//! store is a real SQLite file; the jobs go through the in-process queue
//! and the real consume loop.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use common::{
    jobs::Job,
    queue::{JobQueue, local},
    store::{
        ApnsEnvironment, DeliveryState, DeviceRegistration, Event, NotificationState, Scope, Store,
        lease::ClaimRequest, sqlite::SqliteStore,
    },
    time::Clock,
};
use notifier::{
    deliver::{Deliverer, Parts},
    metrics::NotifierMetrics,
    push::{Push, PushOutcome, PushProvider},
    retry::RetryPolicy,
    worker,
};
use serde_json::Map;
use tokio::sync::watch;
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);
const RETRY: RetryPolicy = RetryPolicy {
    base: Duration::from_secs(10),
    max: Duration::from_secs(60),
    max_retries: 3,
};

/// What the provider does with one push.
#[derive(Clone)]
enum Answer {
    Now(PushOutcome),
    /// Never answers (a push service that hangs).
    Hang,
}

/// A push provider that records, in virtual time, every push it is given,
/// and answers from a script (then `Delivered`).
struct Scripted {
    clock: Clock,
    script: Mutex<VecDeque<Answer>>,
    sent: Mutex<Vec<DateTime<Utc>>>,
}

#[async_trait]
impl PushProvider for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }

    async fn send(&self, _: &Push) -> PushOutcome {
        self.sent.lock().expect("lock").push(self.clock.now());
        let answer = self.script.lock().expect("lock").pop_front();
        match answer.unwrap_or(Answer::Now(PushOutcome::Delivered { apns_id: None })) {
            Answer::Now(outcome) => outcome,
            Answer::Hang => std::future::pending().await,
        }
    }
}

struct World {
    store: Arc<dyn Store>,
    queue: Arc<dyn JobQueue>,
    provider: Arc<Scripted>,
    clock: Clock,
    scope: Scope,
    event: Event,
    device: Uuid,
    metrics: NotifierMetrics,
    stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

async fn world(script: Vec<Answer>) -> World {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("tocsin.sqlite3"))
            .await
            .expect("sqlite"),
    );
    let clock = Clock::tokio();
    let scope = Scope::new("acme", "lease");
    let (device, _) = store
        .upsert_device(
            &scope,
            &DeviceRegistration {
                target: common::store::PushTarget::Apns {
                    token: "ab".repeat(32),
                    environment: ApnsEnvironment::Sandbox,
                },
                name: None,
                rules: common::rules::AlertRules::every_alert(),
            },
            clock.now(),
        )
        .await
        .expect("device");
    let event = Event {
        id: Uuid::now_v7(),
        scope: scope.clone(),
        channel_name: "ops".into(),
        title: "Disk full".into(),
        description: None,
        icon: None,
        tags: vec![],
        metadata: Map::new(),
        user_id: None,
        notify: true,
        source: None,
        priority: Default::default(),
        alert_key: None,
        parser: common::store::Parser::Text,
        url: None,
        created_at: clock.now(),
        notification: NotificationState::Queued,
        request_id: None,
        notification_due_at: None,
    };
    store.insert_event(&event).await.expect("event");
    let provider = Arc::new(Scripted {
        clock,
        script: Mutex::new(script.into()),
        sent: Mutex::new(Vec::new()),
    });
    let (queue, consumer) = local::open();
    let queue: Arc<dyn JobQueue> = Arc::new(queue);
    let mut registry = common::metrics::registry();
    let metrics = NotifierMetrics::register(&mut registry);
    let deliverer = Arc::new(Deliverer::new(Parts {
        store: Arc::clone(&store),
        provider: provider.clone(),
        destinations: Arc::new(
            notifier::destinations::Senders::new(
                notifier::destination_sender_settings(&Default::default()).expect("settings"),
            )
            .expect("senders"),
        ),
        secrets_key: None,
        queue: Arc::clone(&queue),
        retry: RETRY,
        lease: LEASE,
        clock,
        metrics: metrics.clone(),
        max_in_flight: std::num::NonZeroUsize::new(16).expect("non-zero"),
        device_cache: Duration::from_secs(1),
    }));
    let (stop, stopped) = watch::channel(false);
    let concurrency = std::num::NonZeroUsize::new(4).expect("non-zero");
    tokio::spawn(worker::run(
        deliverer,
        Box::new(consumer),
        concurrency,
        stopped,
    ));
    World {
        store,
        queue,
        provider,
        clock,
        scope,
        event,
        device: device.id,
        metrics,
        stop,
        _dir: dir,
    }
}

impl World {
    async fn publish(&self) {
        let job = Job::notify(self.event.id, self.scope.clone(), None);
        self.queue.publish(&job).await.expect("published");
    }

    /// Lets virtual time run until the event settles (at most ten minutes).
    /// The poll's short sleep is also the step by which tokio moves the
    /// paused clock while the store answers, so instants stay exact to it.
    async fn settled(&self) -> NotificationState {
        for _ in 0..60_000 {
            let event = self
                .store
                .get_event(&self.scope, self.event.id)
                .await
                .expect("read")
                .expect("stored");
            if !matches!(
                event.notification,
                NotificationState::Pending | NotificationState::Queued
            ) {
                return event.notification;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the event never settled");
    }

    /// Claims the delivery as a worker that then dies without a word.
    async fn claim_and_die(&self) {
        self.store
            .claim_deliveries(
                &[common::store::lease::ClaimKey {
                    scope: self.scope.clone(),
                    event_id: self.event.id,
                    device_id: self.device,
                }],
                &ClaimRequest {
                    now: self.clock.now(),
                    lease: LEASE,
                    max_attempts: 4,
                },
            )
            .await
            .expect("the dead worker's claim");
    }

    fn sent(&self) -> Vec<DateTime<Utc>> {
        self.provider.sent.lock().expect("lock").clone()
    }

    async fn delivery(&self) -> common::store::Delivery {
        let mut all = self
            .store
            .list_deliveries(&self.scope, self.event.id)
            .await
            .expect("listed");
        assert_eq!(all.len(), 1);
        all.remove(0)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn secs(d: chrono::TimeDelta) -> f64 {
    d.num_milliseconds() as f64 / 1000.0
}

#[tokio::test(start_paused = true)]
async fn a_claim_sends_once_records_and_settles() {
    let w = world(vec![]).await;
    w.publish().await;
    assert_eq!(w.settled().await, NotificationState::Delivered);
    assert_eq!(w.sent().len(), 1);
    let delivery = w.delivery().await;
    assert_eq!(
        (delivery.state, delivery.attempts),
        (DeliveryState::Delivered, 1)
    );
    assert_eq!(delivery.lease_until, None);
}

#[tokio::test(start_paused = true)]
async fn a_dead_workers_lease_is_taken_over_when_it_runs_out_and_not_before() {
    let w = world(vec![]).await;
    let claimed_at = w.clock.now();
    w.claim_and_die().await;
    w.publish().await;
    assert_eq!(w.settled().await, NotificationState::Delivered);
    let sent = w.sent();
    assert_eq!(sent.len(), 1, "sent once, by the worker that took over");
    let waited = secs(sent[0] - claimed_at);
    assert!(
        (30.0..31.0).contains(&waited),
        "sent {waited} s after the dead worker's claim; its lease was 30 s"
    );
    let delivery = w.delivery().await;
    assert_eq!(
        (delivery.state, delivery.attempts),
        (DeliveryState::Delivered, 2)
    );
    let rechecks = w
        .metrics
        .job_retries
        .get_or_create(&notifier::metrics::RetryLabels { reason: "lease" })
        .get();
    assert_eq!(rechecks, 1, "one look again, when the lease ran out");
}

#[tokio::test(start_paused = true)]
async fn a_device_removed_while_its_delivery_waits_does_not_keep_the_event_open() {
    let w = world(vec![]).await;
    w.claim_and_die().await;
    w.publish().await;
    // While the dead worker's lease runs, the device is removed.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        w.store
            .delete_device(&w.scope, w.device)
            .await
            .expect("deleted")
    );
    assert_eq!(w.settled().await, NotificationState::Skipped);
    assert!(w.sent().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_is_retried_no_sooner_than_its_backoff() {
    let retry = PushOutcome::Retry {
        reason: "503".into(),
        after: None,
    };
    let w = world(vec![Answer::Now(retry)]).await;
    w.publish().await;
    assert_eq!(w.settled().await, NotificationState::Delivered);
    let sent = w.sent();
    assert_eq!(sent.len(), 2);
    let backoff = secs(sent[1] - sent[0]);
    // The first retry waits the base delay, less up to a quarter of jitter.
    assert!((7.5..=10.5).contains(&backoff), "retried after {backoff} s");
    let delivery = w.delivery().await;
    assert_eq!(
        (delivery.state, delivery.attempts),
        (DeliveryState::Delivered, 2)
    );
}

#[tokio::test(start_paused = true)]
async fn a_push_that_never_answers_is_cut_off_at_half_the_lease_and_retried() {
    let w = world(vec![Answer::Hang]).await;
    w.publish().await;
    assert_eq!(w.settled().await, NotificationState::Delivered);
    let sent = w.sent();
    assert_eq!(sent.len(), 2, "the hung push, then its retry");
    let gap = secs(sent[1] - sent[0]);
    // 15 s cut-off plus the first retry's backoff (7.5 to 10 s).
    assert!((22.5..=25.5).contains(&gap), "retried {gap} s later");
    // The worker kept its lease: the retry is its own second attempt, not a
    // takeover of a stale claim.
    assert_eq!(w.delivery().await.attempts, 2);
}

#[tokio::test(start_paused = true)]
async fn a_delivery_that_keeps_failing_is_given_up_after_the_last_retry() {
    let retry = Answer::Now(PushOutcome::Retry {
        reason: "503".into(),
        after: None,
    });
    let w = world(vec![retry; 10]).await;
    w.publish().await;
    assert_eq!(w.settled().await, NotificationState::Failed);
    assert_eq!(w.sent().len(), 4, "the first try and three retries");
    let delivery = w.delivery().await;
    assert_eq!(
        (delivery.state, delivery.attempts),
        (DeliveryState::Failed, 4)
    );
    assert!(
        delivery
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("gave up after 4 attempts")),
        "{delivery:?}"
    );
    let dead = w
        .metrics
        .jobs_dead_lettered
        .get_or_create(&notifier::metrics::DeadLetterLabels { reason: "gave_up" })
        .get();
    assert_eq!(dead, 1);
}

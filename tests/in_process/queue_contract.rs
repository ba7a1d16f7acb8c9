//! One contract, both queues: the same checks against the in-process queue
//! and RabbitMQ, through the `JobQueue`/`JobConsumer` pair the services use.
//! Where the two differ by design (what a restart keeps, where a dead
//! letter goes) the test says so.

use std::{
    num::NonZeroU16,
    sync::Arc,
    time::{Duration, Instant},
};

use common::{
    jobs::Job,
    queue::{
        self, ConsumeSettings, JobConsumer, JobQueue, QueueConfig, Received, amqp::AmqpConfig,
    },
    store::Scope,
};
use tocsin_tests::{amqp_url, eventually};
use uuid::Uuid;

/// Which queue a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueueKind {
    InProcess,
    Amqp,
}

macro_rules! for_each_queue {
    ($($name:ident),* $(,)?) => {
        mod in_process {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::QueueKind::InProcess).await
                }
            )*
        }
        mod amqp {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::QueueKind::Amqp).await
                }
            )*
        }
    };
}

const WAIT: Duration = Duration::from_secs(20);

/// A small prefetch, and the delays of a policy of 300 ms doubling to
/// 1200 ms for three retries.
fn settings() -> ConsumeSettings {
    ConsumeSettings {
        prefetch: NonZeroU16::new(8).expect("non-zero"),
        delays: [300, 600, 1200].map(Duration::from_millis).to_vec(),
    }
}

/// A queue of the test's own: for RabbitMQ, a topology under a fresh prefix.
fn config(kind: QueueKind) -> QueueConfig {
    match kind {
        QueueKind::InProcess => QueueConfig::InProcess,
        QueueKind::Amqp => QueueConfig::Amqp(AmqpConfig {
            url: amqp_url(),
            prefix: format!("t{}", Uuid::new_v4().simple()),
            timeout: Duration::from_secs(5),
        }),
    }
}

fn job() -> Job {
    Job::notify(Uuid::now_v7(), Scope::new("org", "project"), None)
}

fn event_id(received: &Received) -> Uuid {
    received.job.as_ref().expect("a readable job").subject()
}

/// The next job, failing the test if none comes.
async fn next(consumer: &mut Box<dyn JobConsumer>) -> Received {
    tokio::time::timeout(WAIT, consumer.next())
        .await
        .expect("a job within the wait")
        .expect("the consumer is running")
}

/// Whether a job arrives within `wait`.
async fn arrives_within(consumer: &mut Box<dyn JobConsumer>, wait: Duration) -> Option<Received> {
    tokio::time::timeout(wait, consumer.next())
        .await
        .ok()
        .flatten()
}

/// Opens a pair and starts its consumer (for RabbitMQ, once it consumes).
async fn started(config: &QueueConfig) -> (Arc<dyn JobQueue>, Box<dyn JobConsumer>) {
    let (producer, mut consumer) = queue::open(config);
    consumer.start(settings());
    let readiness = consumer.readiness();
    eventually(WAIT, "the consumer to be ready", async || {
        readiness.is_ready().then_some(())
    })
    .await;
    (producer, consumer)
}

async fn a_published_job_is_received_once_and_acked(kind: QueueKind) {
    let config = config(kind);
    let (producer, mut consumer) = started(&config).await;
    let sent = job();
    producer.publish(&sent).await.expect("published");
    let received = next(&mut consumer).await;
    assert_eq!(received.job.as_ref().expect("readable"), &sent);
    assert!(!received.redelivered);
    received.acker.ack().await.expect("acked");
    assert!(
        arrives_within(&mut consumer, Duration::from_millis(500))
            .await
            .is_none(),
        "an acked job is not delivered again"
    );
    consumer.close().await;
    if kind == QueueKind::Amqp {
        // Nothing is left on the broker for the next consumer either.
        let (_producer, mut again) = started(&config).await;
        assert!(
            arrives_within(&mut again, Duration::from_millis(500))
                .await
                .is_none()
        );
        again.close().await;
        delete_topology(&config).await;
    }
}

async fn a_delayed_job_arrives_after_its_delay_and_not_before(kind: QueueKind) {
    let config = config(kind);
    let (producer, mut consumer) = started(&config).await;
    let delay = Duration::from_millis(600);
    let sent = job();
    let published = Instant::now();
    producer
        .publish_delayed(&sent, delay)
        .await
        .expect("published");
    let received = next(&mut consumer).await;
    assert!(
        published.elapsed() >= delay,
        "arrived after {:?}, before its delay of {delay:?}",
        published.elapsed()
    );
    assert_eq!(received.job.as_ref().expect("readable"), &sent);
    received.acker.ack().await.expect("acked");
    consumer.close().await;
    delete_topology(&config).await;
}

/// Stopping hands back what was received but not given out; with RabbitMQ
/// every job not acked (given back or in hand at close) is delivered again
/// to the next consumer. The in-process queue keeps nothing past its
/// process: the outbox relay queues unfinished work again at start-up
/// (`recovery.rs`).
async fn stopping_hands_back_what_was_not_given_out(kind: QueueKind) {
    let config = config(kind);
    let (producer, mut consumer) = started(&config).await;
    let sent: Vec<Job> = (0..3).map(|_| job()).collect();
    for job in &sent {
        producer.publish(job).await.expect("published");
    }
    let first = next(&mut consumer).await;
    if kind == QueueKind::InProcess {
        // Everything published is in the channel by now.
        let returned = consumer.stop().await;
        assert_eq!(returned.len(), 2, "the two jobs not given out");
    } else {
        let returned = consumer.stop().await;
        assert!(returned.len() <= 2, "{} returned", returned.len());
        for received in returned {
            received.acker.requeue().await.expect("given back");
        }
    }
    assert!(
        consumer.next().await.is_none(),
        "a stopped consumer gives out nothing"
    );
    // The first job is still in hand when the consumer closes.
    drop(first);
    consumer.close().await;
    if kind == QueueKind::Amqp {
        let (_producer, mut again) = started(&config).await;
        let mut ids = Vec::new();
        for _ in 0..3 {
            let received = next(&mut again).await;
            assert!(received.redelivered, "a job given back is a redelivery");
            ids.push(event_id(&received));
            received.acker.ack().await.expect("acked");
        }
        ids.sort();
        let mut expected: Vec<Uuid> = sent.iter().map(Job::subject).collect();
        expected.sort();
        assert_eq!(ids, expected);
        again.close().await;
        delete_topology(&config).await;
    }
}

for_each_queue!(
    a_published_job_is_received_once_and_acked,
    a_delayed_job_arrives_after_its_delay_and_not_before,
    stopping_hands_back_what_was_not_given_out,
);

/// A dead-lettered message lands in `<prefix>.notify.dead`, body intact,
/// and is not delivered to consumers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_job_lands_in_the_dead_letter_queue() {
    let config = config(QueueKind::Amqp);
    let (producer, mut consumer) = started(&config).await;
    let sent = job();
    producer.publish(&sent).await.expect("published");
    let received = next(&mut consumer).await;
    received.acker.dead_letter().await.expect("dead-lettered");
    assert!(
        arrives_within(&mut consumer, Duration::from_millis(500))
            .await
            .is_none()
    );
    consumer.close().await;
    let QueueConfig::Amqp(amqp) = &config else {
        unreachable!("an AMQP test")
    };
    let conn = lapin::Connection::connect(&amqp.url, lapin::ConnectionProperties::default())
        .await
        .expect("broker");
    let channel = conn.create_channel().await.expect("channel");
    let queue = amqp.dead_letter_queue();
    let dead = eventually(WAIT, "the job in the dead-letter queue", async || {
        channel
            .basic_get(queue.as_str().into(), Default::default())
            .await
            .expect("basic.get")
    })
    .await;
    assert_eq!(Job::from_bytes(&dead.delivery.data).expect("a job"), sent);
    let _ = conn.close(200, "done".into()).await;
    delete_topology(&config).await;
}

/// Jobs are acknowledged in runs (one `multiple` frame), yet exactly the
/// ones reported done are: jobs done out of order, or behind one still in
/// hand, are not acknowledged for it, and when the worker goes away with
/// that one unrecorded, it alone comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledging_in_runs_covers_exactly_the_jobs_reported_done() {
    let config = config(QueueKind::Amqp);
    let (producer, mut consumer) = started(&config).await;
    let sent: Vec<Job> = (0..8).map(|_| job()).collect();
    for job in &sent {
        producer.publish(job).await.expect("published");
    }
    let mut received = Vec::new();
    for _ in &sent {
        received.push(Some(next(&mut consumer).await));
    }
    let ids: Vec<Uuid> = received.iter().flatten().map(event_id).collect();
    // Done in another order than received; the third is never recorded.
    for n in [4, 0, 7, 1, 5, 3, 6] {
        let job = received[n].take().expect("not settled yet");
        job.acker.ack().await.expect("acked");
    }
    let unrecorded = received[2].take().expect("in hand");
    // The worker goes away with it in hand: nothing settles it.
    drop(unrecorded);
    assert!(consumer.stop().await.is_empty(), "every job was given out");
    consumer.close().await;

    let (_producer, mut again) = started(&config).await;
    let back = next(&mut again).await;
    assert_eq!(event_id(&back), ids[2], "only the unrecorded job returns");
    assert!(back.redelivered);
    back.acker.ack().await.expect("acked");
    assert!(
        arrives_within(&mut again, Duration::from_millis(500))
            .await
            .is_none(),
        "every job reported done was acknowledged"
    );
    again.close().await;
    delete_topology(&config).await;
}

/// Delayed jobs wait in the consumer's retry queues: a producer whose
/// consumer has not started (ingest's) cannot publish one, and says why
/// instead of losing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_started_consumers_producer_publishes_delayed_jobs() {
    let config = config(QueueKind::Amqp);
    let (producer, _consumer) = queue::open(&config);
    let refused = producer
        .publish_delayed(&job(), Duration::from_millis(300))
        .await
        .expect_err("no retry queues declared");
    assert!(refused.to_string().contains("retry"), "{refused}");
    producer.publish(&job()).await.expect("publishing works");
    delete_topology(&config).await;
}

/// Removes a RabbitMQ test's queues and exchanges.
async fn delete_topology(config: &QueueConfig) {
    if let QueueConfig::Amqp(amqp) = config {
        tocsin_tests::pipeline::delete_queues(amqp, &settings().delays).await;
    }
}

/// Whether `queue` exists on the broker (a passive declare, on a channel
/// of its own: a miss closes the channel).
async fn queue_exists(conn: &lapin::Connection, queue: &str) -> bool {
    let channel = conn.create_channel().await.expect("channel");
    let options = lapin::options::QueueDeclareOptions {
        passive: true,
        ..Default::default()
    };
    channel
        .queue_declare(queue.into(), options, Default::default())
        .await
        .is_ok()
}

/// Ingest publishes and does not consume: it declares the exchange, the
/// notify queue and the dead-letter queue, and none of the notifier's retry
/// queues, whatever `NOTIFIER_RETRY_*` says (those belong to the consumer,
/// which declares them from its own settings).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_declares_what_it_publishes_to_and_no_retry_queues() {
    let prefix = format!("t{}", Uuid::new_v4().simple());
    let mut test = tocsin_tests::TestConfig::new(tocsin_tests::StoreKind::Sqlite);
    test.config.backend.amqp_url = Some(common::config::Secret::new(amqp_url()));
    test.config.backend.queue_prefix = prefix.clone();
    let app = tocsin_tests::TestApp::spawn_with(test).await;
    let (key, _) = app.new_key().await;
    let body = serde_json::json!({ "channelName": "c", "title": "t", "notify": true });
    assert_eq!(app.post_event(&key, &body).await.status(), 201);
    let amqp = AmqpConfig {
        url: amqp_url(),
        prefix,
        timeout: Duration::from_secs(5),
    };
    let conn = lapin::Connection::connect(&amqp.url, lapin::ConnectionProperties::default())
        .await
        .expect("broker");
    // The event's job was published, so the topology is there.
    eventually(WAIT, "ingest's notify queue", async || {
        queue_exists(&conn, &amqp.queue()).await.then_some(())
    })
    .await;
    assert!(queue_exists(&conn, &amqp.dead_letter_queue()).await);
    let policies = [
        tocsin_tests::test_notifier_config().retry(),
        notifier::Config::defaults().retry(),
    ];
    for delay in policies
        .iter()
        .flat_map(notifier::retry::RetryPolicy::delays)
    {
        let retry = amqp.retry_queue(delay);
        assert!(!queue_exists(&conn, &retry).await, "{retry} was declared");
    }
    let _ = conn.close(200, "done".into()).await;
    for policy in &policies {
        tocsin_tests::pipeline::delete_queues(&amqp, &policy.delays()).await;
    }
}

/// What survives a broker's power loss: the notify queue is a durable
/// quorum queue (its messages are fsynced before the publisher confirm)
/// and every job is published persistent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_persistent_on_a_durable_quorum_queue() {
    let config = config(QueueKind::Amqp);
    let QueueConfig::Amqp(amqp) = &config else {
        unreachable!("a RabbitMQ config");
    };
    let (producer, _consumer) = queue::open(&config);
    producer.publish(&job()).await.expect("published");
    let conn = lapin::Connection::connect(&amqp.url, lapin::ConnectionProperties::default())
        .await
        .expect("broker");
    // The broker refuses a declaration that does not match the queue, and
    // says what the queue is.
    let declare = async |queue_type: &str| {
        let channel = conn.create_channel().await.expect("channel");
        // The queue's other arguments as declared (topology.rs), so the
        // type is the one that can differ.
        let mut args = lapin::types::FieldTable::default();
        let text = |v: &str| lapin::types::AMQPValue::LongString(v.into());
        args.insert("x-queue-type".into(), text(queue_type));
        args.insert(
            "x-dead-letter-exchange".into(),
            text(&amqp.dead_letter_exchange()),
        );
        args.insert("x-dead-letter-routing-key".into(), text("notify"));
        args.insert(
            "x-delivery-limit".into(),
            lapin::types::AMQPValue::LongLongInt(20),
        );
        let options = lapin::options::QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        let declared = channel
            .queue_declare(amqp.queue().into(), options, args)
            .await;
        (channel, declared)
    };
    let (_, classic) = declare("classic").await;
    let refused = classic.expect_err("the queue is not a classic one");
    assert!(
        refused
            .to_string()
            .contains("inequivalent arg 'x-queue-type'")
            && refused.to_string().contains("current is 'quorum'"),
        "{refused}"
    );
    let channel = conn.create_channel().await.expect("channel");
    let message = channel
        .basic_get(
            amqp.queue().into(),
            lapin::options::BasicGetOptions::default(),
        )
        .await
        .expect("get")
        .expect("the job is in the queue");
    assert_eq!(
        *message.delivery.properties.delivery_mode(),
        Some(2),
        "persistent"
    );
    let _ = conn.close(200, "done".into()).await;
    delete_topology(&config).await;
}

//! Ingest's SIGTERM, on the real binary: it stops accepting, lets the
//! requests in flight finish within the grace period, flushes the outbox
//! relay, and exits 0.

use std::time::Duration;

use common::store::{NotificationState, Scope, StoreConfig};
use serde_json::{Value, json};
use tocsin_tests::{
    amqp_url, eventually,
    process::{self, Service},
    proxy::Proxy,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const START: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_requests_in_flight_flushes_the_outbox_and_exits_zero() {
    let (broker, through_proxy) = Proxy::to_broker().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let env = vec![
        ("INGEST_DATA_DIR", dir.path().display().to_string()),
        ("AMQP_URL", through_proxy),
        ("INGEST_QUEUE_PREFIX", prefix.clone()),
        ("INGEST_LISTEN", "127.0.0.1:0".to_owned()),
        ("INGEST_LOG_FORMAT", "json".to_owned()),
        ("INGEST_BROKER_TIMEOUT_MS", "500".to_owned()),
        // Only the shutdown flush may publish what the outage left pending.
        ("INGEST_RELAY_INTERVAL_MS", "3600000".to_owned()),
        ("INGEST_SHUTDOWN_GRACE_SECONDS", "3".to_owned()),
    ];
    let key = tocsin_tests::process::run(
        "ingest",
        &["keys", "create", "--org", "acme", "--project", "shutdown"],
        &env,
    )
    .trim()
    .to_owned();
    let mut ingest = Service::start("ingest", &[], &env);
    let addr = ingest.wait_for_log("ingest listening", START).await["addr"]
        .as_str()
        .expect("addr")
        .to_owned();
    let base = format!("http://{addr}");

    broker.cut();
    let event = json!({ "channelName": "ops", "title": "During the outage", "notify": true });
    let (status, during_outage) = process::post(&base, "/v1/events", &key, &event).await;
    assert_eq!(status, 201, "{during_outage}");
    assert_eq!(
        during_outage["data"]["notification"]["state"], "pending",
        "{during_outage}"
    );
    broker.restore();

    // Two requests in flight when SIGTERM arrives, their bodies half sent:
    // one is completed during the grace period, one never is.
    let body = json!({ "channelName": "ops", "title": "In flight", "notify": true }).to_string();
    let (head, tail) = body.split_at(body.len() / 2);
    let mut completing = half_sent(&addr, &key, &body, head).await;
    let _stalled = half_sent(&addr, &key, &body, head).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    ingest.terminate();
    ingest.wait_for_log("shutdown signal received", START).await;
    // New connections are refused once shutting down has begun.
    eventually(
        Duration::from_millis(2500),
        "new connections to be refused after SIGTERM",
        async || match tokio::net::TcpStream::connect(&addr).await {
            Err(_) => Ok(()),
            Ok(_) => Err("still accepted"),
        },
    )
    .await;

    completing
        .write_all(tail.as_bytes())
        .await
        .expect("rest of the body");
    let mut response = String::new();
    completing
        .read_to_string(&mut response)
        .await
        .expect("response");
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    let in_flight: Value = serde_json::from_str(
        response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .expect("body"),
    )
    .expect("json body");

    assert!(ingest.wait(START).await.success(), "ingest exit status");
    let flushed = ingest
        .lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == "outbox flushed")
        .expect("the relay flushed on the way out");
    // At least the outage's event; the in-flight one too when its own
    // publish fell in the broker client's fail-fast window after the outage.
    assert!(flushed["flushed"].as_u64() >= Some(1), "{flushed}");

    // Both events are on the queue: the outage's by the flush, the
    // in-flight one by its own request.
    let store = common::store::open(
        &StoreConfig::Sqlite {
            path: dir.path().join("tocsin.sqlite3"),
            synchronous: Default::default(),
        },
        Duration::from_secs(10),
    )
    .await
    .expect("store opens");
    let scope = Scope::new("acme", "shutdown");
    for event in [&during_outage, &in_flight] {
        let id = event["data"]["id"]
            .as_str()
            .expect("id")
            .parse()
            .expect("uuid");
        let stored = store
            .get_event(&scope, id)
            .await
            .expect("read")
            .expect("stored");
        assert_eq!(stored.notification, NotificationState::Queued, "{event}");
    }
    let mut config = notifier::Config::defaults();
    config.backend.amqp_url = Some(common::config::Secret::new(amqp_url()));
    config.backend.queue_prefix = prefix;
    assert_eq!(queued_jobs(&config).await, 2);
    tocsin_tests::pipeline::delete_topology(&config).await;
}

/// Opens a connection and sends a POST /v1/events whose body stops after
/// `sent` (of `body`).
async fn half_sent(addr: &str, key: &str, body: &str, sent: &str) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let request = format!(
        "POST /v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{sent}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request head sent");
    stream
}

/// How many messages wait on the test's notify queue.
async fn queued_jobs(config: &notifier::Config) -> u32 {
    let amqp = config.backend.amqp().expect("broker configured");
    let conn = lapin::Connection::connect(&amqp.url, lapin::ConnectionProperties::default())
        .await
        .expect("broker");
    let channel = conn.create_channel().await.expect("channel");
    let queue = channel
        .queue_declare(
            amqp.queue().as_str().into(),
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            Default::default(),
        )
        .await
        .expect("the notify queue exists");
    let _ = conn.close(200, "done".into()).await;
    queue.message_count()
}

//! What devices' rules hold back, end to end through the HTTP API: alerts
//! held during quiet hours come out as one summary when they end, alerts
//! past a burst limit as one digest when the window ends, each exactly
//! once, with its id on the held deliveries in `GET /v1/events/{id}` and
//! counted in the metrics. Real time, with windows that end within a
//! minute or so of now (quiet hours are reckoned to the minute).

use std::time::Duration;

use notifier::push::Push;
use serde_json::{Value, json};
use tocsin_tests::{
    Reply, StoreKind, eventually,
    pipeline::{Pipeline, token},
    windows::quiet_hours_ending_soon,
};

/// Long enough for a window ending a minute or two from now, and the relay.
const HELD_WAIT: Duration = Duration::from_secs(150);

async fn register(pipeline: &Pipeline, n: u8, rules: Value) -> String {
    let mut body = json!({ "token": token(n), "environment": "sandbox" });
    body.as_object_mut()
        .expect("object")
        .extend(rules.as_object().expect("object").clone());
    let reply = Reply::of(pipeline.app.post("/v1/devices", &pipeline.key, &body).await).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body["data"]["id"].as_str().expect("id").to_owned()
}

async fn record(pipeline: &Pipeline, channel: &str, title: &str, priority: &str) -> String {
    let body = json!({ "channelName": channel, "title": title, "priority": priority });
    pipeline.app.record_event(&pipeline.key, &body).await
}

/// The delivery of event `id` to `device`, once its event settled (as
/// `delivered`, or `skipped` when nothing was pushed for it).
async fn delivery(pipeline: &Pipeline, id: &str, device: &str) -> Value {
    let event = eventually(
        tocsin_tests::pipeline::WAIT,
        "the event to settle",
        async || {
            let reply = pipeline.lookup(id).await;
            let event = reply.body["data"].clone();
            ["delivered", "skipped", "failed"]
                .contains(&event["notification"]["state"].as_str().unwrap_or_default())
                .then_some(event)
                .ok_or(reply.body)
        },
    )
    .await;
    event["notification"]["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .find(|d| d["deviceId"] == device)
        .cloned()
        .unwrap_or_else(|| panic!("no delivery to {device}: {event}"))
}

/// The summaries `n` got, once it got at least one.
async fn summaries_of(pipeline: &Pipeline, n: u8) -> Vec<Push> {
    eventually(HELD_WAIT, "a summary push", async || {
        let summaries: Vec<Push> = pipeline
            .provider
            .delivered_to(&token(n))
            .into_iter()
            .filter(|p| p.alert.summary)
            .collect();
        (!summaries.is_empty())
            .then_some(summaries)
            .ok_or("none yet")
    })
    .await
}

/// After the first summary, two relay periods more: no second one comes.
async fn assert_only_one(pipeline: &Pipeline, n: u8) -> Push {
    let first = summaries_of(pipeline, n).await;
    tokio::time::sleep(pipeline.app.config.relay_interval() * 2 + Duration::from_secs(1)).await;
    let all = summaries_of(pipeline, n).await;
    assert_eq!(all.len(), 1, "exactly one summary: {all:?}");
    first.into_iter().next().expect("one")
}

async fn quiet_hours_hold_then_one_summary_says_what_was_held(pipeline: &Pipeline) {
    let quiet = register(
        pipeline,
        1,
        json!({ "quietHours": quiet_hours_ending_soon(), "channels": ["payments", "signups"] }),
    )
    .await;
    let awake = register(pipeline, 2, json!({})).await;
    let held = [
        record(pipeline, "payments", "Payment failed", "normal").await,
        record(pipeline, "signups", "New user", "low").await,
        record(pipeline, "payments", "Refund failed", "normal").await,
    ];
    let urgent = record(pipeline, "payments", "Database down", "high").await;

    for id in &held {
        let entry = delivery(pipeline, id, &quiet).await;
        assert_eq!(entry["state"], "held", "{entry}");
        assert_eq!(entry["reason"], "quietHours");
        assert_eq!(entry["summaryId"], Value::Null, "not sent yet");
        assert_eq!(delivery(pipeline, id, &awake).await["state"], "delivered");
    }
    let through = delivery(pipeline, &urgent, &quiet).await;
    assert_eq!(
        through["state"], "delivered",
        "high is allowed through: {through}"
    );
    let reached = pipeline.provider.delivered_to(&token(1));
    assert_eq!(
        reached.len(),
        1,
        "only the urgent alert reached the quiet device while quiet: {reached:?}"
    );

    let summary = assert_only_one(pipeline, 1).await;
    assert_eq!(
        summary.alert.title,
        "3 events while quiet: 2 in #payments, 1 in #signups"
    );
    assert_eq!(summary.alert.body.as_deref(), Some("Latest: Refund failed"));
    assert!(
        pipeline
            .provider
            .delivered_to(&token(2))
            .iter()
            .all(|p| !p.alert.summary),
        "nothing was held for the other device: no summary"
    );
    let summary_id = summary.alert.event_id.to_string();
    for id in &held {
        let entry = delivery(pipeline, id, &quiet).await;
        assert_eq!(entry["summaryId"], summary_id.as_str(), "{entry}");
    }
    // The notifier's metrics: ingest's own in embedded mode, the notifier
    // process's beside a broker.
    let scrape = match &pipeline.notifier {
        Some(running) => {
            let url = format!("http://{}/metrics", running.http_addr());
            tocsin_tests::scrape(&pipeline.app.client, &url).await
        }
        None => pipeline.app.scrape().await,
    };
    assert_eq!(
        scrape.value(
            "tocsin_notifier_alerts_withheld_total",
            &[("state", "held"), ("reason", "quietHours")]
        ),
        3.0
    );
    assert_eq!(
        scrape.value(
            "tocsin_notifier_summaries_sent_total",
            &[("reason", "quietHours")]
        ),
        1.0
    );
}

async fn a_burst_of_20_gives_max_pushes_and_one_digest(pipeline: &Pipeline) {
    let device = register(
        pipeline,
        3,
        json!({ "burst": { "max": 5, "perMinutes": 1 }, "channels": ["orders"] }),
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(record(pipeline, "orders", &format!("Order {i} failed"), "high").await);
    }
    let mut states = Vec::new();
    for id in &ids {
        // An event whose only delivery was held settles `skipped`: nothing
        // was pushed for it, and its digest is a push of its own.
        let entry = delivery(pipeline, id, &device).await;
        states.push((
            entry["state"].as_str().unwrap_or_default().to_owned(),
            entry["reason"].clone(),
        ));
    }
    let pushed = states.iter().filter(|(s, _)| s == "delivered").count();
    let held = states
        .iter()
        .filter(|(s, r)| s == "held" && r == "burst")
        .count();
    assert_eq!((pushed, held), (5, 15), "{states:?}");

    let digest = assert_only_one(pipeline, 3).await;
    assert_eq!(digest.alert.title, "15 more in #orders");
    assert_eq!(
        digest.alert.body.as_deref(),
        Some("Latest: Order 19 failed")
    );
    assert_eq!(
        pipeline.provider.delivered_to(&token(3)).len(),
        6,
        "five alerts and one digest"
    );
}

/// Both at once, on devices of their own: the windows are real minutes,
/// so each pipeline waits for them once.
async fn held_alerts_come_out_once(pipeline: Pipeline) {
    tokio::join!(
        quiet_hours_hold_then_one_summary_says_what_was_held(&pipeline),
        a_burst_of_20_gives_max_pushes_and_one_digest(&pipeline),
    );
    pipeline.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_sqlite() {
    held_alerts_come_out_once(Pipeline::embedded(StoreKind::Sqlite).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_mongo() {
    held_alerts_come_out_once(Pipeline::embedded(StoreKind::Mongo).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq() {
    held_alerts_come_out_once(Pipeline::with_broker(StoreKind::Sqlite, None).await).await;
}

/// Two notifiers on one broker, and the summary's job published three
/// times (the relay's, and two more, as another replica's relay or a
/// redelivery would, these two before the window ends): one summary push,
/// not cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_notifiers_given_a_summarys_job_three_times_send_it_once_when_its_window_ends() {
    let pipeline = Pipeline::with_broker(StoreKind::Sqlite, None).await;
    let second = notifier::start(
        &pipeline.notifier_config,
        std::sync::Arc::clone(&pipeline.app.store),
        pipeline.provider.clone(),
    )
    .await
    .expect("a second notifier starts");
    let quiet = quiet_hours_ending_soon();
    let device = register(&pipeline, 5, json!({ "quietHours": quiet })).await;
    let id = record(&pipeline, "payments", "Payment failed", "normal").await;
    assert_eq!(delivery(&pipeline, &id, &device).await["state"], "held");

    let summary = pipeline
        .app
        .store
        .summaries_due(
            chrono::DateTime::<chrono::Utc>::MAX_UTC,
            chrono::DateTime::<chrono::Utc>::MAX_UTC,
            None,
            100,
        )
        .await
        .expect("read")
        .into_iter()
        .find(|s| s.scope == pipeline.scope)
        .expect("the device's summary");
    let amqp = pipeline.notifier_config.backend.amqp().expect("a broker");
    let (producer, _) = common::queue::open(&common::queue::QueueConfig::Amqp(amqp));
    let job = common::jobs::Job::SummaryV1(common::jobs::SummaryJob {
        summary_id: summary.id,
        scope: summary.scope.clone(),
        device_id: summary.device_id,
        due_at: summary.due_at,
        attempt: 0,
    });
    for _ in 0..2 {
        producer.publish(&job).await.expect("published");
    }
    let sent = assert_only_one(&pipeline, 5).await;
    assert_eq!(sent.alert.event_id, summary.id);
    // Its push, claimed under its id, was sent once its window had ended.
    let pushed = pipeline
        .app
        .store
        .list_deliveries(&summary.scope, summary.id)
        .await
        .expect("listed");
    assert_eq!(pushed.len(), 1, "{pushed:?}");
    assert!(
        pushed[0].updated_at >= summary.due_at,
        "not before its window ended: {pushed:?}"
    );
    second.shutdown().await;
    pipeline.finish().await;
}

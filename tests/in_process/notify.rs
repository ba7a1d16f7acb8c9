//! The notify pipeline end to end: devices, jobs through RabbitMQ or the
//! in-process queue, the notifier with a recording push provider, retries,
//! dead tokens, a broker outage and a notifier replaced mid-stream.

use notifier::push::PushOutcome;
use serde_json::{Value, json};
use tocsin_tests::{
    Reply, StoreKind,
    pipeline::{Pipeline, token},
    proxy::Proxy,
};

async fn every_active_device_gets_one_push_and_channel_filters_hold(pipeline: Pipeline) {
    let (a, b, filtered) = (token(1), token(2), token(3));
    pipeline.register(&a, None).await;
    pipeline.register(&b, None).await;
    pipeline.register(&filtered, Some(vec!["deploys"])).await;

    let event = pipeline.event("payments", "Payment received", true).await;
    let id = event["id"].as_str().expect("id").to_owned();
    let settled = pipeline.settled(&id, "delivered").await;
    let states: Vec<(&str, &Value)> = settled["notification"]["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .map(|d| (d["state"].as_str().expect("state"), &d["reason"]))
        .collect();
    assert_eq!(states.len(), 3, "one entry per device: {settled}");
    assert_eq!(states.iter().filter(|(s, _)| *s == "delivered").count(), 2);
    assert!(
        states.contains(&("filtered", &json!("channel"))),
        "the other channel's device is filtered: {settled}"
    );
    let sent = pipeline.provider.sent();
    assert_eq!(sent.len(), 2, "exactly two pushes: {sent:?}");
    for (push, _) in &sent {
        assert!(push.address() == a || push.address() == b);
        assert_eq!(push.alert.title, "Payment received");
        assert_eq!(push.alert.body.as_deref(), Some("details"));
        assert_eq!(push.alert.icon.as_deref(), Some("🔔"));
        assert_eq!(push.alert.channel, "payments");
        assert_eq!(push.alert.event_id.to_string(), id);
    }

    let quiet = pipeline.event("payments", "No push please", false).await;
    assert_eq!(quiet["notification"]["state"], "skipped");

    let deploy = pipeline.event("deploys", "Deployed", true).await;
    pipeline
        .settled(deploy["id"].as_str().expect("id"), "delivered")
        .await;
    assert_eq!(
        pipeline.provider.delivered_to(&filtered).len(),
        1,
        "the filtered device gets its channel only"
    );
    assert_eq!(pipeline.provider.delivered_to(&a).len(), 2);
    assert_eq!(
        pipeline.provider.sent().len(),
        5,
        "nothing for notify: false"
    );
    pipeline.finish().await;
}

async fn a_dead_token_deactivates_its_device(pipeline: Pipeline) {
    let (dead, alive) = (token(4), token(5));
    let dead_device = pipeline.register(&dead, None).await;
    pipeline.register(&alive, None).await;
    pipeline.provider.script(
        &dead,
        vec![PushOutcome::DeviceGone {
            reason: "410 Unregistered".into(),
        }],
    );

    let first = pipeline.event("alerts", "First", true).await;
    pipeline
        .settled(first["id"].as_str().expect("id"), "delivered")
        .await;
    let devices = Reply::of(pipeline.app.get_as("/v1/devices", &pipeline.key).await).await;
    let listed = devices.body["data"]["devices"]
        .as_array()
        .expect("devices")
        .clone();
    let dead_now = listed
        .iter()
        .find(|d| d["id"] == dead_device["id"])
        .expect("still listed");
    assert_eq!(dead_now["active"], false);
    assert!(
        dead_now["deactivatedReason"]
            .as_str()
            .expect("reason")
            .contains("Unregistered")
    );

    let second = pipeline.event("alerts", "Second", true).await;
    pipeline
        .settled(second["id"].as_str().expect("id"), "delivered")
        .await;
    let to_dead = pipeline
        .provider
        .sent()
        .into_iter()
        .filter(|(p, _)| p.address() == dead)
        .count();
    assert_eq!(to_dead, 1, "nothing more is sent to a dead token");
    assert_eq!(pipeline.provider.delivered_to(&alive).len(), 2);
    pipeline.finish().await;
}

async fn transient_failures_are_retried_after_backoff_and_delivered_once(pipeline: Pipeline) {
    let flaky = token(6);
    pipeline.register(&flaky, None).await;
    let unavailable = || PushOutcome::Retry {
        reason: "503 ServiceUnavailable".into(),
        after: None,
    };
    pipeline
        .provider
        .script(&flaky, vec![unavailable(), unavailable()]);
    let event = pipeline.event("alerts", "Flaky", true).await;
    let settled = pipeline
        .settled(event["id"].as_str().expect("id"), "delivered")
        .await;
    let delivery = &settled["notification"]["deliveries"][0];
    assert_eq!(delivery["state"], "delivered");
    assert_eq!(delivery["attempts"], 3);
    assert_eq!(
        pipeline.provider.sent().len(),
        3,
        "two failures, then one delivery"
    );
    assert_eq!(pipeline.provider.delivered_to(&flaky).len(), 1);
    pipeline.finish().await;
}

async fn giving_up_after_the_last_retry_marks_the_delivery_failed(pipeline: Pipeline) {
    let broken = token(7);
    pipeline.register(&broken, None).await;
    let unavailable = || PushOutcome::Retry {
        reason: "500 InternalServerError".into(),
        after: None,
    };
    pipeline.provider.script(
        &broken,
        vec![
            unavailable(),
            unavailable(),
            unavailable(),
            unavailable(),
            unavailable(),
        ],
    );
    let event = pipeline.event("alerts", "Never", true).await;
    let settled = pipeline
        .settled(event["id"].as_str().expect("id"), "failed")
        .await;
    let delivery = &settled["notification"]["deliveries"][0];
    assert_eq!(delivery["state"], "failed");
    assert_eq!(
        delivery["attempts"], 4,
        "the first try and max_retries = 3 retries"
    );
    assert!(
        delivery["error"]
            .as_str()
            .expect("error")
            .contains("gave up")
    );
    pipeline.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_sqlite_pushes_to_every_device() {
    every_active_device_gets_one_push_and_channel_filters_hold(
        Pipeline::embedded(StoreKind::Sqlite).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_mongo_pushes_to_every_device() {
    every_active_device_gets_one_push_and_channel_filters_hold(
        Pipeline::embedded(StoreKind::Mongo).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_pushes_to_every_device() {
    every_active_device_gets_one_push_and_channel_filters_hold(
        Pipeline::with_broker(StoreKind::Mongo, None).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_dead_token_deactivates_its_device() {
    a_dead_token_deactivates_its_device(Pipeline::with_broker(StoreKind::Sqlite, None).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_dead_token_deactivates_its_device() {
    a_dead_token_deactivates_its_device(Pipeline::embedded(StoreKind::Mongo).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_retries_transient_failures() {
    transient_failures_are_retried_after_backoff_and_delivered_once(
        Pipeline::with_broker(StoreKind::Sqlite, None).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_retries_transient_failures() {
    transient_failures_are_retried_after_backoff_and_delivered_once(
        Pipeline::embedded(StoreKind::Sqlite).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_gives_up_after_the_last_retry() {
    giving_up_after_the_last_retry_marks_the_delivery_failed(
        Pipeline::with_broker(StoreKind::Sqlite, None).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_posted_while_the_broker_is_unreachable_are_all_pushed_once_it_returns() {
    let (proxy, through_proxy) = Proxy::to_broker().await;
    let pipeline = Pipeline::with_broker(StoreKind::Sqlite, Some(through_proxy)).await;
    let device = token(8);
    pipeline.register(&device, None).await;
    proxy.cut();
    let mut ids = Vec::new();
    for i in 0..5 {
        let event = pipeline
            .event("outage", &format!("During outage {i}"), true)
            .await;
        assert_eq!(
            event["notification"]["state"], "pending",
            "accepted, job not yet on the queue"
        );
        ids.push(event["id"].as_str().expect("id").to_owned());
    }
    proxy.restore();
    for id in &ids {
        pipeline.settled(id, "delivered").await;
    }
    let pushed: Vec<String> = pipeline
        .provider
        .delivered_to(&device)
        .iter()
        .map(|p| p.alert.event_id.to_string())
        .collect();
    let mut unique = pushed.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 5, "every event pushed: {pushed:?}");
    assert_eq!(pushed.len(), 5, "none twice: {pushed:?}");
    pipeline.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notifier_replaced_mid_stream_sends_every_push_exactly_once() {
    let mut pipeline = Pipeline::with_broker(StoreKind::Sqlite, None).await;
    let device = token(9);
    pipeline.register(&device, None).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let event = pipeline.event("stream", &format!("Event {i}"), true).await;
        ids.push(event["id"].as_str().expect("id").to_owned());
        if i == 5 {
            pipeline.stop_notifier().await;
        }
    }
    pipeline.start_notifier().await;
    for id in &ids {
        pipeline.settled(id, "delivered").await;
    }
    let mut pushed: Vec<String> = pipeline
        .provider
        .delivered_to(&device)
        .iter()
        .map(|p| p.alert.event_id.to_string())
        .collect();
    pushed.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(pushed, expected, "each event pushed exactly once");
    pipeline.finish().await;
}

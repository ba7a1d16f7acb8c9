//! The operators' endpoints: `/metrics` on both services, scraped after
//! real traffic (every counter moves by exactly what the traffic did), and
//! the notifier's readiness following the broker.

use std::time::Duration;

use notifier::push::PushOutcome;
use serde_json::json;
use tocsin_tests::{
    Reply, StoreKind, eventually,
    openmetrics::Scrape,
    pipeline::{Pipeline, token},
    proxy::Proxy,
    scrape,
};

fn requests(scrape: &Scrape, method: &str, route: &str, status: &str) -> f64 {
    scrape.value(
        "tocsin_http_requests_total",
        &[("method", method), ("route", route), ("status", status)],
    )
}

#[tokio::test]
async fn ingest_counts_requests_limits_replays_publishes_and_embedded_pushes() {
    let pipeline = Pipeline::embedded(StoreKind::Sqlite).await;
    let app = &pipeline.app;
    let key = &pipeline.key;
    // Before any traffic, every known series is there, at zero.
    let fresh = app.scrape().await;
    for (name, label) in [
        ("tocsin_rate_limited_total", ("limit", "anonymous")),
        ("tocsin_jobs_published_total", ("outcome", "failed")),
        ("tocsin_notifier_pushes_total", ("outcome", "device_gone")),
        ("tocsin_notifier_job_retries_total", ("reason", "error")),
    ] {
        assert!(
            fresh.has(name, &[label]),
            "{name} {label:?}: {}",
            fresh.text()
        );
        assert_eq!(fresh.value(name, &[label]), 0.0, "{name}");
    }
    pipeline.register(&token(1), None).await;

    let body = json!({ "channelName": "payments", "title": "Paid", "notify": true });
    let first = Reply::of(app.post_idempotent("/v1/events", key, "k-1", &body).await).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let again = Reply::of(app.post_idempotent("/v1/events", key, "k-1", &body).await).await;
    assert_eq!(again.status, 201, "{}", again.body);
    let invalid = app.post_event(key, &json!({ "title": "no channel" })).await;
    assert_eq!(invalid.status(), 400);
    let wrong_key = app.post_event("tocsin_wrong", &body).await;
    assert_eq!(wrong_key.status(), 401);
    let unknown = app.get("/nowhere").await;
    assert_eq!(unknown.status(), 404);
    let brew = reqwest::Method::from_bytes(b"BREW").expect("a method token");
    let odd = app.client.request(brew, app.url("/healthz")).send().await;
    assert_eq!(odd.expect("sent").status(), 405);
    let (limited_key, _) = {
        let project = format!("p{}", uuid::Uuid::new_v4().simple());
        (app.create_key("acme", &project, Some(1)).await, project)
    };
    assert_eq!(app.get_as("/v1/devices", &limited_key).await.status(), 200);
    assert_eq!(app.get_as("/v1/devices", &limited_key).await.status(), 429);

    let id = first.body["data"]["id"].as_str().expect("id").to_owned();
    pipeline.settled(&id, "delivered").await;

    let scrape = app.scrape().await;
    let page = scrape.text();
    assert_eq!(
        requests(&scrape, "POST", "/v1/events", "201"),
        2.0,
        "{page}"
    );
    assert_eq!(
        requests(&scrape, "POST", "/v1/events", "400"),
        1.0,
        "{page}"
    );
    assert_eq!(
        requests(&scrape, "POST", "/v1/events", "401"),
        1.0,
        "{page}"
    );
    assert_eq!(
        requests(&scrape, "GET", "/v1/devices", "429"),
        1.0,
        "{page}"
    );
    assert_eq!(requests(&scrape, "GET", "unmatched", "404"), 1.0, "{page}");
    assert_eq!(requests(&scrape, "OTHER", "/healthz", "405"), 1.0, "{page}");
    // Lookups are counted under the route's template, not the event's id.
    assert!(
        requests(&scrape, "GET", "/v1/events/{id}", "200") >= 1.0,
        "{page}"
    );
    assert_eq!(
        scrape.value(
            "tocsin_http_request_duration_seconds_count",
            &[("method", "POST"), ("route", "/v1/events")]
        ),
        4.0,
        "{page}"
    );
    assert_eq!(
        scrape.value("tocsin_rate_limited_total", &[("limit", "key")]),
        1.0,
        "{page}"
    );
    assert_eq!(
        scrape.value("tocsin_idempotent_replays_total", &[]),
        1.0,
        "{page}"
    );
    assert_eq!(
        scrape.value("tocsin_jobs_published_total", &[("outcome", "confirmed")]),
        1.0,
        "{page}"
    );
    assert_eq!(scrape.value("tocsin_outbox_backlog", &[]), 0.0, "{page}");
    // Embedded mode: the in-process notifier's counters are on the same page.
    assert_eq!(
        scrape.value("tocsin_notifier_jobs_consumed_total", &[]),
        1.0,
        "{page}"
    );
    assert_eq!(
        scrape.value("tocsin_notifier_pushes_total", &[("outcome", "delivered")]),
        1.0,
        "{page}"
    );
    assert_eq!(
        scrape.value(
            "tocsin_notifier_push_duration_seconds_count",
            &[("provider", "recording")]
        ),
        1.0,
        "{page}"
    );
    pipeline.finish().await;
}

#[tokio::test]
async fn the_notifier_counts_jobs_pushes_retries_and_dead_letters() {
    let pipeline = Pipeline::with_broker(StoreKind::Sqlite, None).await;
    let retries = pipeline.notifier_config.max_retries;
    let (flaky, broken) = (token(1), token(2));
    let transient = || PushOutcome::Retry {
        reason: "503 ServiceUnavailable".into(),
        after: None,
    };
    pipeline.provider.script(&flaky, vec![transient()]);
    pipeline
        .provider
        .script(&broken, (0..=retries).map(|_| transient()).collect());
    pipeline.register(&flaky, None).await;
    pipeline.register(&broken, None).await;

    let event = pipeline.event("ops", "Disk full", true).await;
    let id = event["id"].as_str().expect("id").to_owned();
    pipeline.settled(&id, "delivered").await;

    let running = pipeline.notifier.as_ref().expect("notifier running");
    let base = format!("http://{}", running.http_addr());
    let client = &pipeline.app.client;
    for path in ["/healthz", "/readyz"] {
        let status = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("sent")
            .status();
        assert_eq!(status, 200, "{path}");
    }
    // The job is dead-lettered right after the event settles; wait for it.
    let url = format!("{base}/metrics");
    let scrape = eventually(
        Duration::from_secs(10),
        "the job to be dead-lettered",
        async || {
            let scrape = scrape(client, &url).await;
            let dead = scrape.value(
                "tocsin_notifier_jobs_dead_lettered_total",
                &[("reason", "gave_up")],
            );
            if dead >= 1.0 {
                Ok(scrape)
            } else {
                Err(scrape.text().to_owned())
            }
        },
    )
    .await;
    let page = scrape.text();
    let pushes = |outcome| scrape.value("tocsin_notifier_pushes_total", &[("outcome", outcome)]);
    let retries = f64::from(retries);
    // Attempt 0 sends to both; each later attempt only to what failed.
    assert_eq!(pushes("delivered"), 1.0, "{page}");
    assert_eq!(pushes("retry"), 1.0 + retries, "{page}");
    assert_eq!(pushes("gave_up"), 1.0, "{page}");
    assert_eq!(
        scrape.value("tocsin_notifier_jobs_consumed_total", &[]),
        1.0 + retries,
        "{page}"
    );
    assert_eq!(
        scrape.value("tocsin_notifier_job_retries_total", &[("reason", "push")]),
        retries,
        "{page}"
    );
    assert_eq!(
        scrape.value(
            "tocsin_notifier_jobs_dead_lettered_total",
            &[("reason", "gave_up")],
        ),
        1.0,
        "{page}"
    );
    assert_eq!(
        scrape.value(
            "tocsin_notifier_push_duration_seconds_count",
            &[("provider", "recording")]
        ),
        3.0 + retries,
        "{page}"
    );
    let ingest = pipeline.app.scrape().await;
    assert_eq!(
        ingest.value("tocsin_jobs_published_total", &[("outcome", "confirmed")]),
        1.0,
        "{}",
        ingest.text()
    );
    pipeline.finish().await;
}

#[tokio::test]
async fn publish_failures_and_the_outbox_backlog_show_while_the_broker_is_away() {
    let (proxy, through_proxy) = Proxy::to_broker().await;
    let pipeline = Pipeline::with_broker(StoreKind::Sqlite, Some(through_proxy)).await;
    pipeline.register(&token(1), None).await;
    proxy.cut();

    let event = pipeline.event("ops", "Broker away", true).await;
    assert_eq!(event["notification"]["state"], "pending", "{event}");
    let away = pipeline.app.scrape().await;
    assert!(
        away.value("tocsin_jobs_published_total", &[("outcome", "failed")]) >= 1.0,
        "{}",
        away.text()
    );
    assert_eq!(
        away.value("tocsin_outbox_backlog", &[]),
        1.0,
        "{}",
        away.text()
    );

    proxy.restore();
    let id = event["id"].as_str().expect("id").to_owned();
    pipeline.settled(&id, "delivered").await;
    let back = pipeline.app.scrape().await;
    assert_eq!(
        back.value("tocsin_outbox_backlog", &[]),
        0.0,
        "{}",
        back.text()
    );
    assert_eq!(
        back.value("tocsin_jobs_published_total", &[("outcome", "confirmed")]),
        1.0,
        "{}",
        back.text()
    );
    pipeline.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notifier_is_ready_only_while_it_consumes_from_the_broker() {
    let (proxy, through_proxy) = Proxy::to_broker().await;
    proxy.cut();
    let test = tocsin_tests::TestConfig::new(StoreKind::Sqlite);
    let store = common::store::open(&test.store_config(), Duration::from_secs(10))
        .await
        .expect("store opens");
    let mut config = tocsin_tests::test_notifier_config();
    config.backend.amqp_url = Some(common::config::Secret::new(through_proxy));
    config.backend.queue_prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    config.backend.broker_timeout_ms = 500.try_into().expect("non-zero");
    let provider = std::sync::Arc::new(tocsin_tests::recording::RecordingProvider::default());
    let running = notifier::start(&config, store, provider)
        .await
        .expect("starts without the broker");
    let base = format!("http://{}", running.http_addr());
    let client = reqwest::Client::new();
    let status = |path: &'static str| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            client
                .get(format!("{base}{path}"))
                .send()
                .await
                .expect("sent")
                .status()
                .as_u16()
        }
    };

    assert_eq!(status("/healthz").await, 200, "alive without the broker");
    assert_eq!(status("/readyz").await, 503, "not ready without the broker");
    proxy.restore();
    eventually(
        Duration::from_secs(30),
        "readiness after the broker came back",
        async || match status("/readyz").await {
            200 => Ok(()),
            other => Err(other),
        },
    )
    .await;
    running.shutdown().await;
    tocsin_tests::pipeline::delete_topology(&config).await;
}

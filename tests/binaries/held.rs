//! What a device's quiet hours hold survives the process that held it: an
//! embedded ingest killed with SIGKILL during quiet hours still sends one
//! summary of what it held once they end, after its restart, and exactly
//! one, whichever process sends it. The pushes are logged (no provider
//! credentials), so each process's log says what it pushed.

use std::time::Duration;

use serde_json::{Value, json};
use tocsin_tests::{
    drill::{base_env, key, open_store, pushes, start_ingest},
    eventually,
    windows::quiet_hours_ending_soon,
};
use uuid::Uuid;

/// Long enough for quiet hours ending a minute or two from now, a restart
/// and the relay.
const SUMMARY_WAIT: Duration = Duration::from_secs(180);

async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    key: &str,
    body: Option<Value>,
) -> Value {
    let mut request = client.request(method, url).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("sent");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_embedded_ingest_during_quiet_hours_still_yields_exactly_one_summary() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = base_env(dir.path());
    let (mut first, base) = start_ingest(&env).await;
    let (key, scope) = key(&env);
    let client = reqwest::Client::new();
    let device = send(
        &client,
        reqwest::Method::POST,
        format!("{base}/v1/devices"),
        &key,
        Some(json!({ "token": "ab".repeat(32), "environment": "sandbox", "quietHours": quiet_hours_ending_soon() })),
    )
    .await["data"]["id"]
        .as_str()
        .expect("id")
        .parse::<Uuid>()
        .expect("a uuid");
    let mut held = Vec::new();
    for title in ["Payment failed", "Refund failed", "Card expired"] {
        let body = json!({ "channelName": "payments", "title": title });
        let event = send(
            &client,
            reqwest::Method::POST,
            format!("{base}/v1/events"),
            &key,
            Some(body),
        )
        .await;
        held.push(event["data"]["id"].as_str().expect("id").to_owned());
    }
    // Each is held (and so settled `skipped`) before the process dies.
    for id in &held {
        let url = format!("{base}/v1/events/{id}");
        eventually(Duration::from_secs(30), "the event held", async || {
            let event = send(&client, reqwest::Method::GET, url.clone(), &key, None).await;
            let delivery = &event["data"]["notification"]["deliveries"][0];
            (delivery["state"] == "held").then_some(()).ok_or(event)
        })
        .await;
    }
    first.kill();

    let (second, base) = start_ingest(&env).await;
    let url = format!("{base}/v1/events/{}", held[0]);
    let summary_id = eventually(SUMMARY_WAIT, "the summary sent", async || {
        let event = send(&client, reqwest::Method::GET, url.clone(), &key, None).await;
        let summary = &event["data"]["notification"]["deliveries"][0]["summaryId"];
        summary
            .as_str()
            .and_then(|s| s.parse::<Uuid>().ok())
            .ok_or(event)
    })
    .await;
    // Two more relay periods: no second summary comes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut sent = pushes(&first);
    sent.extend(pushes(&second));
    let summaries: Vec<_> = sent.iter().filter(|(id, _)| *id == summary_id).collect();
    assert_eq!(
        summaries,
        vec![&(summary_id, device)],
        "exactly one summary: {sent:?}"
    );
    assert!(
        sent.iter().all(|(id, _)| !held.contains(&id.to_string())),
        "no held alert was pushed on its own: {sent:?}"
    );
    let store = open_store(dir.path()).await;
    for id in &held {
        let deliveries = store
            .list_deliveries(&scope, id.parse().expect("uuid"))
            .await
            .expect("listed");
        assert_eq!(deliveries[0].summary_id, Some(summary_id), "{deliveries:?}");
    }
}

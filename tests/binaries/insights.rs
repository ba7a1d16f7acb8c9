//! Insights across real processes: two `ingest` binaries on one store (the
//! same SQLite file, or the same MongoDB database), eight clients each
//! sending 250 increments of one insight, alternating between the two.
//! Every increment counts once: the value is exactly 2,000, as both
//! processes read it; and a stream open on one process follows the
//! increments made through the other, up to that final value.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tocsin_tests::{
    drill::{base_env, key},
    eventually, mongo_uri,
    process::{Service, start_ingest},
    unique_db_name,
};

const CLIENTS: usize = 8;
const INCREMENTS: usize = 250;
const TITLE: &str = "Orders today";

/// Sends one request to a process and returns its status and JSON answer.
async fn call(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    key: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut request = client.request(method, url).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON answer"))
}

/// The insight's value as a process lists it.
async fn value_at(client: &reqwest::Client, base: &str, key: &str) -> Value {
    let url = format!("{base}/v1/insights");
    let (status, answer) = call(client, Method::GET, &url, key, None).await;
    assert_eq!(status, 200, "{answer}");
    answer["data"]["insights"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["title"] == TITLE))
        .map(|i| i["value"].clone())
        .unwrap_or(Value::Null)
}

/// The `data` of each `insight` message a stream sends, as they come.
fn insight_values(stream: reqwest::Response) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    let (sender, values) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = stream;
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = stream.chunk().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let insight = block.lines().any(|l| l == "event: insight");
                let data = block.lines().find_map(|l| l.strip_prefix("data: "));
                if let (true, Some(data)) = (insight, data) {
                    let data: Value = serde_json::from_str(data).expect("JSON data");
                    if sender.send(data["value"].clone()).is_err() {
                        return;
                    }
                }
            }
        }
    });
    values
}

/// Two processes on the store `store_env` names, the burst, and what each
/// process and a stream on the first then show.
async fn increments_through_two_processes_all_count(store_env: Vec<(&'static str, String)>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let env: Vec<(&'static str, String)> =
        base_env(dir.path()).into_iter().chain(store_env).collect();
    let (_first, first): (Service, String) = start_ingest(&env).await;
    let (_second, second): (Service, String) = start_ingest(&env).await;
    let (key, _) = key(&env);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("an HTTP client");

    // Following the first process, before any increment.
    let stream = client
        .get(format!("{first}/v1/stream"))
        .bearer_auth(&key)
        .send()
        .await
        .expect("the stream opens");
    assert_eq!(stream.status(), 200);
    let mut values = insight_values(stream);

    let bases = [first.clone(), second.clone()];
    let clients = (0..CLIENTS).map(|n| {
        let (client, key) = (client.clone(), key.clone());
        let url = format!("{}/v1/insights", bases[n % bases.len()]);
        tokio::spawn(async move {
            let body = json!({ "title": TITLE, "value": { "$inc": 1 } });
            for _ in 0..INCREMENTS {
                let (status, answer) = call(&client, Method::PATCH, &url, &key, Some(&body)).await;
                assert!(status == 200 || status == 201, "{status}: {answer}");
            }
        })
    });
    for finished in futures::future::join_all(clients).await {
        finished.expect("a client ran to the end");
    }

    let total = json!(CLIENTS * INCREMENTS);
    for base in [&first, &second] {
        assert_eq!(
            value_at(&client, base, &key).await,
            total,
            "as {base} lists it"
        );
    }
    // The first process's stream saw the increments through both, up to
    // the last; its messages never go back to an older value.
    let mut last = 0;
    eventually(
        Duration::from_secs(20),
        "the final value on the stream",
        async || {
            while let Ok(value) = values.try_recv() {
                let value = value.as_u64().expect("an integer");
                assert!(value >= last, "{value} after {last}");
                last = value;
            }
            (json!(last) == total)
                .then_some(())
                .ok_or(format!("last seen {last}"))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_on_one_sqlite_file_count_every_increment() {
    increments_through_two_processes_all_count(vec![]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_on_one_mongodb_database_count_every_increment() {
    increments_through_two_processes_all_count(vec![
        ("MONGODB_URI", mongo_uri()),
        ("MONGODB_DATABASE", unique_db_name()),
    ])
    .await;
}

//! What the services write to their logs, read from the real binaries'
//! stderr: JSON lines, one `requestId` that follows an event from the API
//! call through its job to every push, and no secret anywhere.

use std::time::Duration;

use serde_json::{Value, json};
use tocsin_tests::{
    amqp_url, eventually, mongo_uri,
    process::{self, Service},
    unique_db_name,
};

/// A P-256 key made for this test with `openssl genpkey`; it belongs to no
/// Apple account. Configured as the APNs key so the real provider signs
/// real tokens with it (the sends fail: Apple is unreachable from here).
const APNS_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgh3a9ImEtspFrFf6a
bekSbJVSQ4HTOoJpJ8Bvr/y1Oz+hRANCAATh2KoNTb1T3Fm3U+oGeQZa7G2Yc1e0
a24KQzZeBEIHJaHjFLLSHNnk6g4iljmKGRf9aLKWLD5VavZLD4Udgn0j
-----END PRIVATE KEY-----";

const DEVICE_TOKEN: &str = "c0ffee00d15ea5e5c0ffee00d15ea5e5c0ffee00d15ea5e5c0ffee00d15ea5e5";
const START: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_follows_an_event_to_every_push_and_no_secret_is_logged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key_path = dir.path().join("AuthKey_TEST.p8");
    std::fs::write(&key_path, APNS_KEY).expect("key written");
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let shared = [
        ("MONGODB_URI", mongo_uri()),
        ("MONGODB_DATABASE", unique_db_name()),
        ("AMQP_URL", amqp_url()),
        // Everything at its most verbose, libraries included: what an
        // operator chasing a problem might turn on.
        ("RUST_LOG", "trace".to_owned()),
    ];
    let ingest_env: Vec<(&str, String)> = shared
        .iter()
        .cloned()
        .chain([
            ("INGEST_LISTEN", "127.0.0.1:0".to_owned()),
            ("INGEST_QUEUE_PREFIX", prefix.clone()),
            ("INGEST_LOG_FORMAT", "json".to_owned()),
        ])
        .collect();
    let notifier_env: Vec<(&str, String)> = shared
        .iter()
        .cloned()
        .chain([
            ("NOTIFIER_LISTEN", "127.0.0.1:0".to_owned()),
            ("NOTIFIER_QUEUE_PREFIX", prefix.clone()),
            ("NOTIFIER_LOG_FORMAT", "json".to_owned()),
            ("NOTIFIER_MAX_RETRIES", "1".to_owned()),
            ("NOTIFIER_RETRY_BASE_MS", "100".to_owned()),
            ("NOTIFIER_RETRY_MAX_MS", "200".to_owned()),
            ("APNS_KEY_PATH", key_path.display().to_string()),
            ("APNS_KEY_ID", "KEYID12345".to_owned()),
            ("APNS_TEAM_ID", "TEAMID1234".to_owned()),
            ("APNS_TOPIC", "dev.tocsin.logs".to_owned()),
        ])
        .collect();

    let api_key = tocsin_tests::process::run(
        "ingest",
        &["keys", "create", "--org", "acme", "--project", "logs"],
        &ingest_env,
    )
    .trim()
    .to_owned();
    let mut ingest = Service::start("ingest", &[], &ingest_env);
    let listening = ingest.wait_for_log("ingest listening", START).await;
    let base = format!("http://{}", listening["addr"].as_str().expect("addr"));
    let mut notifier = Service::start("notifier", &[], &notifier_env);
    let port = notifier
        .wait_for_log("metrics and health endpoints listening", START)
        .await;
    notifier.wait_for_log("consuming notify jobs", START).await;
    // The container image's health check, against the running binary.
    let mut probe_env: Vec<(&str, String)> = notifier_env
        .iter()
        .filter(|(name, _)| *name != "NOTIFIER_LISTEN")
        .cloned()
        .collect();
    probe_env.push((
        "NOTIFIER_LISTEN",
        port["addr"].as_str().expect("addr").to_owned(),
    ));
    tocsin_tests::process::run("notifier", &["healthcheck"], &probe_env);

    let client = reqwest::Client::new();
    let device = json!({ "token": DEVICE_TOKEN, "environment": "sandbox" });
    let (status, _) = process::post(&base, "/v1/devices", &api_key, &device).await;
    assert_eq!(status, 201);
    let event = json!({ "channelName": "payments", "title": "Paid", "notify": true });
    let (status, created) = process::post(&base, "/v1/events", &api_key, &event).await;
    assert_eq!(status, 201, "{created}");
    let request_id = created["requestId"].as_str().expect("requestId").to_owned();
    let event_id = created["data"]["id"].as_str().expect("id").to_owned();

    // Apple is out of reach: the push is retried once, then given up.
    eventually(START, "the event's notification to fail", async || {
        let lookup: Value = client
            .get(format!("{base}/v1/events/{event_id}"))
            .bearer_auth(&api_key)
            .send()
            .await
            .expect("sent")
            .json()
            .await
            .expect("json");
        if lookup["data"]["notification"]["state"] == "failed" {
            Ok(())
        } else {
            Err(lookup)
        }
    })
    .await;

    notifier.terminate();
    ingest.terminate();
    assert!(notifier.wait(START).await.success(), "notifier exit");
    assert!(ingest.wait(START).await.success(), "ingest exit");
    delete_topology(&prefix).await;

    let ingest_lines = parse(&ingest.lines());
    let notifier_lines = parse(&notifier.lines());
    // The filter reached the libraries too (the broker client's frames).
    assert!(
        ingest_lines
            .iter()
            .chain(&notifier_lines)
            .any(|l| l["target"].as_str().is_some_and(|t| t.starts_with("lapin"))),
        "no library logged at trace"
    );

    // The request's own line, and every notifier line about its event,
    // carry its requestId as a top-level field.
    assert!(
        ingest_lines.iter().any(|l| l["requestId"] == request_id
            && l["message"] == "request handled"
            && l["path"] == "/v1/events"),
        "no ingest line with requestId {request_id}"
    );
    let about_event: Vec<&Value> = notifier_lines
        .iter()
        .filter(|l| l["eventId"] == event_id)
        .collect();
    let pushes = about_event
        .iter()
        .filter(|l| l["message"] == "push attempted")
        .count();
    assert_eq!(pushes, 2, "one push and its retry: {about_event:#?}");
    for line in &about_event {
        assert_eq!(line["requestId"], request_id, "{line}");
    }
    // One requestId, one of every field, per line: an event naming a field
    // its span already has would print a second, duplicate key.
    for line in ingest.lines().iter().chain(notifier.lines().iter()) {
        let mut keys = top_level_keys(line);
        keys.sort();
        let before = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), before, "a key twice: {line}");
    }

    // No secret in any line, whatever the field.
    let pem_body: Vec<&str> = APNS_KEY
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let mut secrets = vec![
        api_key.as_str(),
        DEVICE_TOKEN,
        "PRIVATE KEY",
        // A signed APNs provider token is a JWT: base64 of `{"`.
        "eyJ",
        // The broker password in the connection string.
        "guest:guest",
    ];
    secrets.extend(pem_body);
    let upper_token = DEVICE_TOKEN.to_uppercase();
    secrets.push(&upper_token);
    for line in ingest.lines().iter().chain(notifier.lines().iter()) {
        for secret in &secrets {
            assert!(!line.contains(secret), "{secret:?} logged: {line}");
        }
    }
}

/// Every line must be a JSON object: production logs are machine-read.
fn parse(lines: &[String]) -> Vec<Value> {
    assert!(!lines.is_empty(), "nothing logged");
    lines
        .iter()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            assert!(v.is_object(), "{l}");
            v
        })
        .collect()
}

/// The top-level keys of a JSON object, duplicates kept (a map type would
/// keep only the last of each).
fn top_level_keys(line: &str) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(Keys(Vec::new()))
        }
    }
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Keys;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<Keys, A::Error> {
            while let Some((key, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                self.0.push(key);
            }
            Ok(self)
        }
    }
    serde_json::from_str::<Keys>(line)
        .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"))
        .0
}

/// Removes the test's queues and exchanges from the shared broker.
async fn delete_topology(prefix: &str) {
    let mut config = notifier::Config::defaults();
    config.backend.amqp_url = Some(common::config::Secret::new(amqp_url()));
    config.backend.queue_prefix = prefix.to_owned();
    tocsin_tests::pipeline::delete_topology(&config).await;
}

//! Destinations across real processes (ingest and notifiers on RabbitMQ
//! and one SQLite file), against the local stand-ins of the six services:
//! a notifier killed with SIGKILL while its requests are in flight leaves
//! every destination's delivery to the next notifier, which settles each
//! exactly once (the webhook's retry carries the same `webhook-id`, the
//! mail the same Message-ID, so a receiver keeps one); a destination that
//! cannot be reached is retried until the job is dead-lettered; and no
//! secret (a signing secret, a webhook URL, a bot or access token) appears
//! in any process's log.

use std::time::Duration;

use serde_json::{Value, json};
use tocsin_tests::{
    amqp_url,
    drill::{base_env, broker_env, remove_queues, start_notifier, with},
    eventually,
    process::{self, Service, start_ingest},
    standins::Standins,
};

const BOT_TOKEN: &str = "987654321:AAHbinariesTelegramSecret_0123456789";
const NTFY_TOKEN: &str = "tk_binariesntfysecret0123456789";
const SLACK_PATH: &str = "/slack/services/T0BIN/B0BIN/binariesSlackSecret0123456";
const DISCORD_PATH: &str = "/discord/api/webhooks/2222222222/binariesDiscordSecret-0123456789";

/// The processes' settings: both allowed to reach the stand-ins, leases
/// long enough for a request to be in flight when the notifier dies.
fn env(dir: &std::path::Path, standins: &Standins, prefix: &str) -> Vec<(&'static str, String)> {
    with(
        base_env(dir),
        &[
            ("NOTIFIER_DESTINATIONS_ALLOW", "127.0.0.1".into()),
            ("NOTIFIER_TELEGRAM_BASE_URL", standins.url("/telegram")),
            ("NOTIFIER_SMTP_HOST", "127.0.0.1".into()),
            ("NOTIFIER_SMTP_PORT", standins.smtp.port().to_string()),
            ("NOTIFIER_SMTP_FROM", "alerts@tocsin.test".into()),
            ("NOTIFIER_SMTP_SECURITY", "none".into()),
            ("NOTIFIER_STALE_CLAIM_SECONDS", "6".into()),
            ("NOTIFIER_MAX_RETRIES", "2".into()),
        ],
    )
    .into_iter()
    .chain(broker_env(amqp_url(), prefix))
    .collect()
}

/// An admin token, an organization, a project and its API key.
struct Project {
    base: String,
    admin: String,
    id: String,
    key: String,
}

async fn call(base: &str, token: &str, method: reqwest::Method, path: &str, body: Value) -> Value {
    let response = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("sent");
    let status = response.status();
    let body: Value = response.json().await.expect("JSON");
    assert!(status.is_success(), "{path}: {status} {body}");
    body["data"].clone()
}

async fn project(env: &[(&'static str, String)], base: &str) -> Project {
    let admin = process::run("ingest", &["admin", "create", "--name", "ops"], env)
        .trim()
        .to_owned();
    let post = reqwest::Method::POST;
    let org = call(
        base,
        &admin,
        post.clone(),
        "/admin/v1/organizations",
        json!({ "name": "acme" }),
    )
    .await;
    let path = format!(
        "/admin/v1/organizations/{}/projects",
        org["id"].as_str().expect("id")
    );
    let id = call(base, &admin, post.clone(), &path, json!({ "name": "shop" })).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let key = call(
        base,
        &admin,
        post,
        &format!("/admin/v1/projects/{id}/keys"),
        json!({}),
    )
    .await["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    Project {
        base: base.to_owned(),
        admin,
        id,
        key,
    }
}

impl Project {
    /// Creates a destination; returns its id and its secrets.
    async fn destination(&self, kind: &str, settings: Value) -> (String, Value) {
        let created = call(
            &self.base,
            &self.admin,
            reqwest::Method::POST,
            &format!("/admin/v1/projects/{}/destinations", self.id),
            json!({ "kind": kind, "name": kind, "settings": settings }),
        )
        .await;
        let id = created["destination"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        (id, created["secrets"].clone())
    }

    async fn event(&self) -> String {
        call(
            &self.base,
            &self.key,
            reqwest::Method::POST,
            "/v1/events",
            json!({ "channelName": "payments", "title": "Payment failed" }),
        )
        .await["id"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    async fn lookup(&self, id: &str) -> Value {
        call(
            &self.base,
            &self.key,
            reqwest::Method::GET,
            &format!("/v1/events/{id}"),
            Value::Null,
        )
        .await
    }
}

/// Every destination of the six kinds, at its stand-in; their secrets.
async fn every_kind(project: &Project, standins: &Standins) -> Vec<String> {
    standins.expect_token("/telegram/", BOT_TOKEN).await;
    standins.expect_token("/ntfy", NTFY_TOKEN).await;
    let mut secrets = vec![
        BOT_TOKEN.to_owned(),
        NTFY_TOKEN.to_owned(),
        standins.url(SLACK_PATH),
        standins.url(DISCORD_PATH),
    ];
    let (_, webhook) = project
        .destination("webhook", json!({ "url": standins.url("/webhook/bin") }))
        .await;
    let secret = webhook["secret"].as_str().expect("secret");
    standins.set_webhook_secret("bin", secret).await;
    secrets.push(secret.to_owned());
    for (kind, settings) in [
        ("slack", json!({ "webhookUrl": standins.url(SLACK_PATH) })),
        (
            "discord",
            json!({ "webhookUrl": standins.url(DISCORD_PATH) }),
        ),
        (
            "telegram",
            json!({ "botToken": BOT_TOKEN, "chatId": "-100200300" }),
        ),
        (
            "ntfy",
            json!({ "serverUrl": standins.url("/ntfy"), "topic": "ops", "token": NTFY_TOKEN }),
        ),
        ("email", json!({ "to": ["ops@example.com"] })),
    ] {
        project.destination(kind, settings).await;
    }
    secrets
}

const HTTP_PREFIXES: [&str; 5] = ["/webhook/", "/slack/", "/discord/", "/telegram/", "/ntfy"];

/// No line of any process's log holds any secret, whole or its token part.
fn assert_no_secret_logged(services: &[&Service], secrets: &[String]) {
    let needles: Vec<&str> = secrets
        .iter()
        .flat_map(|s| {
            // The token at a URL's end, a signing secret's key after `whsec_`.
            let tail = s.rsplit(['/', '_']).next().unwrap_or(s);
            [s.as_str(), tail]
        })
        .filter(|n| n.len() >= 12)
        .collect();
    for service in services {
        for line in service.lines() {
            for needle in &needles {
                assert!(!line.contains(needle), "a secret in a log line: {line}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_notifier_mid_delivery_still_settles_each_destination_once() {
    let standins = Standins::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = format!("tocsin-dest-{}", uuid::Uuid::new_v4().simple());
    let env = env(dir.path(), &standins, &prefix);
    let (ingest, base) = start_ingest(&env).await;
    let project = project(&env, &base).await;
    let secrets = every_kind(&project, &standins).await;
    // Every service holds its first answer: the requests are in flight
    // when the notifier dies.
    for prefix in HTTP_PREFIXES {
        standins.script(prefix, json!([{ "delay_ms": 2500 }])).await;
    }
    standins
        .script("smtp", json!([{ "delay_ms": 2500, "at": "data" }]))
        .await;
    let mut first = start_notifier(&env).await;
    let event = project.event().await;
    eventually(
        Duration::from_secs(30),
        "every request in flight",
        async || {
            let mut arrived = Vec::new();
            for prefix in HTTP_PREFIXES.iter().chain(&["smtp"]) {
                arrived.push(!standins.received(prefix).await.is_empty());
            }
            arrived
                .iter()
                .all(|a| *a)
                .then_some(())
                .ok_or(format!("{arrived:?}"))
        },
    )
    .await;
    first.kill();

    let second = start_notifier(&env).await;
    let settled = eventually(
        Duration::from_secs(60),
        "every delivery settled",
        async || {
            let event = project.lookup(&event).await;
            let deliveries = event["notification"]["deliveries"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            (deliveries.len() == 6 && deliveries.iter().all(|d| d["state"] == "delivered"))
                .then_some(deliveries)
                .ok_or(event)
        },
    )
    .await;
    for delivery in &settled {
        assert!(delivery["destinationId"].is_string(), "{delivery}");
        // Claimed by the dead notifier, then taken over once its lease ran out.
        assert_eq!(delivery["attempts"], 2, "{delivery}");
    }
    for prefix in HTTP_PREFIXES {
        let got = standins.received(prefix).await;
        let taken: Vec<_> = got.iter().filter(|r| r["accepted"] == true).collect();
        assert_eq!(taken.len(), 1, "{prefix}: one taken: {got:#?}");
        standins.assert_no_problems(prefix).await;
    }
    // The webhook's receiver saw one delivery, twice at most, by one id.
    let hooks = standins.received("/webhook/").await;
    assert!(
        hooks
            .iter()
            .all(|h| h["headers"]["webhook-id"] == hooks[0]["headers"]["webhook-id"])
    );
    // The mail's server may have taken both (it finished the first after
    // the sender died): one Message-ID, so the inbox shows one.
    let mails = standins.received("smtp").await;
    let ids: Vec<&Value> = mails.iter().map(|m| &m["headers"]["message-id"]).collect();
    assert!(
        ids.iter().all(|id| *id == ids[0] && id.is_string()),
        "{mails:#?}"
    );
    // Stopped before the log is read: the last lines are in.
    second.terminate();
    let mut second = second;
    second.wait(Duration::from_secs(10)).await;
    assert_no_secret_logged(&[&ingest, &first, &second], &secrets);
    remove_queues(prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_destination_is_retried_then_dead_lettered_and_shown_unhealthy() {
    let standins = Standins::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = format!("tocsin-dest-{}", uuid::Uuid::new_v4().simple());
    let env = env(dir.path(), &standins, &prefix);
    let (ingest, base) = start_ingest(&env).await;
    let project = project(&env, &base).await;
    // A closed port: every try fails to connect; the URL is a secret.
    let closed = tocsin_tests::free_port();
    let url = format!("http://127.0.0.1:{closed}/api/webhooks/3333/unreachableDiscordSecret0123");
    let (id, _) = project
        .destination("discord", json!({ "webhookUrl": url }))
        .await;
    let mut notifier = start_notifier(&env).await;
    let event = project.event().await;
    let delivery = eventually(
        Duration::from_secs(60),
        "the delivery given up",
        async || {
            let event = project.lookup(&event).await;
            let delivery = event["notification"]["deliveries"][0].clone();
            (event["notification"]["state"] == "failed")
                .then_some(delivery)
                .ok_or(event)
        },
    )
    .await;
    assert_eq!(delivery["destinationId"], json!(id));
    assert_eq!(
        delivery["attempts"], 3,
        "the first try and two retries: {delivery}"
    );
    assert!(
        delivery["error"]
            .as_str()
            .expect("error")
            .starts_with("gave up after 3 attempts"),
        "{delivery}"
    );
    let shown = call(
        &base,
        &project.admin,
        reqwest::Method::GET,
        &format!("/admin/v1/projects/{}/destinations/{id}", project.id),
        Value::Null,
    )
    .await;
    assert_eq!(shown["health"]["status"], "unhealthy", "{shown}");
    assert_eq!(shown["health"]["failures"], 3);
    assert_eq!(shown["enabled"], true, "failing is not gone");
    notifier
        .wait_for_log(
            "deliveries gave up after the last retry; job dead-lettered",
            Duration::from_secs(10),
        )
        .await;
    notifier.terminate();
    assert_no_secret_logged(&[&ingest, &notifier], &[url]);
    remove_queues(prefix).await;
}

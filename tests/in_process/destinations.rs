//! Destinations end to end, on both stores, in embedded mode: a project's
//! webhook, Slack, Discord, Telegram, ntfy and email destinations, created
//! through the admin API, get each alert once through local stand-ins of
//! those services (tests/standins: the webhook's signature verified with
//! the reference Standard Webhooks library, each payload checked against
//! the service's documented shape and limits, mail parsed by a real MIME
//! parser); a markdown description in each kind's way, and the event's
//! `url` before its `metadata.url`; retried after a 500 and after a 429 with `Retry-After`;
//! disabled by a webhook's 410; filtered by their rules; summarised with
//! digests; reached only through the operator's allow-list.

use std::{collections::BTreeMap, time::Duration};

use reqwest::Method;
use serde_json::{Value, json};
use tocsin_tests::{
    Embedded, Reply, StoreKind, TestApp, TestConfig, for_each_store, standins::Standins,
    test_notifier_config,
};

/// How long a stand-in waits for what it expects.
const WAIT: Duration = Duration::from_secs(30);

/// Each kind, its stand-in's path prefix, and the settings that reach it.
struct Kind {
    kind: &'static str,
    prefix: &'static str,
}

const KINDS: [Kind; 6] = [
    Kind {
        kind: "webhook",
        prefix: "/webhook/",
    },
    Kind {
        kind: "slack",
        prefix: "/slack/",
    },
    Kind {
        kind: "discord",
        prefix: "/discord/",
    },
    Kind {
        kind: "telegram",
        prefix: "/telegram/",
    },
    Kind {
        kind: "ntfy",
        prefix: "/ntfy",
    },
    Kind {
        kind: "email",
        prefix: "smtp",
    },
];

/// Secrets the destinations are made with (the webhook's is generated).
const SLACK_URL_PATH: &str = "/slack/services/T0TOCSIN/B0TOCSIN/xSlackSecretToken0123456";
const DISCORD_URL_PATH: &str =
    "/discord/api/webhooks/1234567890/DiscordSecretToken-0123456789abcdef";
const BOT_TOKEN: &str = "123456789:AAHtelegramSecretToken_0123456789abcd";
const NTFY_TOKEN: &str = "tk_ntfysecrettoken0123456789abc";

/// Ingest with its embedded notifier, both allowed to reach the
/// stand-ins (and only through the allow-list), and an admin's project.
struct World {
    app: TestApp,
    standins: Standins,
    admin: String,
    project: String,
    key: String,
}

async fn world(kind: StoreKind) -> World {
    world_with(kind, |_| {}).await
}

async fn world_with(kind: StoreKind, tune: impl FnOnce(&mut notifier::Config)) -> World {
    let standins = Standins::start().await;
    let mut test = TestConfig::new(kind);
    test.config.backend.destinations_allow = "127.0.0.1".into();
    let mut notifier = test_notifier_config();
    let backend = &mut notifier.backend;
    backend.destinations_allow = "127.0.0.1".into();
    backend.telegram_base_url = standins.url("/telegram");
    backend.smtp_host = Some("127.0.0.1".into());
    backend.smtp_port = Some(standins.smtp.port());
    backend.smtp_from = Some("Tocsin <alerts@tocsin.test>".into());
    backend.smtp_security = "none".into();
    tune(&mut notifier);
    // The test alert is sent by ingest: the same settings.
    test.config.backend.telegram_base_url = notifier.backend.telegram_base_url.clone();
    test.config.backend.smtp_host = notifier.backend.smtp_host.clone();
    test.config.backend.smtp_port = notifier.backend.smtp_port;
    test.config.backend.smtp_from = notifier.backend.smtp_from.clone();
    test.config.backend.smtp_security = "none".into();
    let app = TestApp::spawn_with_options(
        test,
        Embedded {
            provider: None,
            notifier,
        },
    )
    .await;
    let admin = app.create_admin("ops").await;
    let org = ok(
        &app.call(
            Method::POST,
            "/admin/v1/organizations",
            &admin,
            Some(&json!({ "name": "acme" })),
        )
        .await,
        201,
    );
    let org_id = org["id"].as_str().expect("id").to_owned();
    let project = ok(
        &app.call(
            Method::POST,
            &format!("/admin/v1/organizations/{org_id}/projects"),
            &admin,
            Some(&json!({ "name": "shop" })),
        )
        .await,
        201,
    );
    let project = project["id"].as_str().expect("id").to_owned();
    let key = ok(
        &app.call(
            Method::POST,
            &format!("/admin/v1/projects/{project}/keys"),
            &admin,
            Some(&json!({})),
        )
        .await,
        201,
    );
    let key = key["secret"].as_str().expect("secret").to_owned();
    World {
        app,
        standins,
        admin,
        project,
        key,
    }
}

#[track_caller]
fn ok(reply: &Reply, status: u16) -> Value {
    assert_eq!(reply.status, status, "{}", reply.body);
    reply.body["data"].clone()
}

impl World {
    fn path(&self, rest: &str) -> String {
        format!("/admin/v1/projects/{}/destinations{rest}", self.project)
    }

    async fn admin(&self, method: Method, rest: &str, body: Option<&Value>) -> Reply {
        self.app
            .call(method, &self.path(rest), &self.admin, body)
            .await
    }

    /// The settings of a `kind` destination that reach its stand-in.
    fn settings(&self, kind: &str) -> Value {
        match kind {
            "webhook" => json!({ "url": self.standins.url("/webhook/hook") }),
            "slack" => json!({ "webhookUrl": self.standins.url(SLACK_URL_PATH) }),
            "discord" => json!({ "webhookUrl": self.standins.url(DISCORD_URL_PATH) }),
            "telegram" => json!({ "botToken": BOT_TOKEN, "chatId": "-1001234567890" }),
            "ntfy" => json!({
                "serverUrl": self.standins.url("/ntfy"),
                "topic": "tocsin-alerts",
                "token": NTFY_TOKEN,
            }),
            "email" => json!({ "to": ["ops@example.com", "oncall@example.com"] }),
            other => panic!("no kind {other}"),
        }
    }

    /// Creates a `kind` destination with `extra` fields (rules); returns
    /// its id and the creation answer.
    async fn create(&self, kind: &str, extra: Value) -> (String, Value) {
        let mut body = json!({
            "kind": kind,
            "name": format!("ops {kind}"),
            "settings": self.settings(kind),
        });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let created = ok(&self.admin(Method::POST, "", Some(&body)).await, 201);
        let id = created["destination"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        if kind == "webhook" {
            let secret = created["secrets"]["secret"].as_str().expect("a secret");
            self.standins.set_webhook_secret("hook", secret).await;
        }
        (id, created)
    }

    /// One destination of every kind; their ids by kind.
    async fn every_kind(&self) -> BTreeMap<&'static str, String> {
        self.standins.expect_token("/telegram/", BOT_TOKEN).await;
        self.standins.expect_token("/ntfy", NTFY_TOKEN).await;
        let mut ids = BTreeMap::new();
        for k in &KINDS {
            ids.insert(k.kind, self.create(k.kind, json!({})).await.0);
        }
        ids
    }

    async fn event(&self, channel: &str, title: &str) -> String {
        self.app
            .record_event(
                &self.key,
                &json!({
                    "channelName": channel,
                    "title": title,
                    "description": "Card declined <b>twice</b> & @everyone <!channel>",
                    "icon": "💸",
                    "tags": ["billing"],
                    "metadata": { "url": "https://shop.example.com/orders/42" },
                }),
            )
            .await
    }

    /// The event's deliveries once it settled, by destination id.
    async fn deliveries(&self, id: &str) -> BTreeMap<String, Value> {
        let event = self.app.settled(&self.key, id, "delivered").await;
        event["notification"]["deliveries"]
            .as_array()
            .expect("deliveries")
            .iter()
            .map(|d| {
                assert!(d.get("deviceId").is_none(), "{d}");
                (
                    d["destinationId"]
                        .as_str()
                        .expect("destinationId")
                        .to_owned(),
                    d.clone(),
                )
            })
            .collect()
    }
}

/// Requests a stand-in took (not scripted, not refused).
fn accepted(records: &[Value]) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| r["accepted"] == true && r["scripted"] != true)
        .collect()
}

async fn every_kind_gets_the_alert_once_in_its_own_form(kind: StoreKind) {
    let w = world(kind).await;
    let ids = w.every_kind().await;
    let event = w.event("payments", "Payment failed").await;
    let deliveries = w.deliveries(&event).await;
    assert_eq!(deliveries.len(), 6, "{deliveries:#?}");
    for k in &KINDS {
        let delivery = &deliveries[&ids[k.kind]];
        assert_eq!(delivery["state"], "delivered", "{}: {delivery}", k.kind);
        assert_eq!(delivery["provider"], k.kind);
        assert_eq!(delivery["attempts"], 1);
        let got = w.standins.wait_received(k.prefix, 1, WAIT).await;
        assert_eq!(accepted(&got).len(), 1, "{}: {got:#?}", k.kind);
        w.standins.assert_no_problems(k.prefix).await;
    }

    // The webhook: the event as the API shows it, signed (the stand-in
    // verified it with the reference library).
    let hook = &w.standins.received("/webhook/").await[0];
    assert_eq!(hook["body"]["type"], "event.created");
    assert_eq!(hook["body"]["data"]["id"], json!(event));
    assert_eq!(hook["body"]["data"]["channelName"], "payments");
    assert_eq!(hook["body"]["data"]["tags"], json!(["billing"]));
    let api = Reply::of(w.app.get_as(&format!("/v1/events/{event}"), &w.key).await).await;
    for field in [
        "id",
        "title",
        "description",
        "icon",
        "metadata",
        "createdAt",
        "priority",
        "parser",
        "descriptionHtml",
        "url",
    ] {
        assert_eq!(
            hook["body"]["data"][field], api.body["data"][field],
            "the webhook's {field} is the API's"
        );
    }
    // Email: one mail to both, its subject the channel and title.
    let mail = &w.standins.received("smtp").await[0];
    assert_eq!(mail["subject"], "[payments] 💸 Payment failed");
    assert!(
        mail["text"]
            .as_str()
            .expect("text")
            .contains("Card declined")
    );
    assert!(
        mail["html"]
            .as_str()
            .expect("html")
            .contains("&lt;b&gt;twice&lt;/b&gt;"),
        "user text is escaped in HTML: {mail}"
    );
    // Discord never pings @everyone for an event's text.
    let discord = &w.standins.received("/discord/").await[0];
    assert_eq!(discord["body"]["allowed_mentions"]["parse"], json!([]));
    // Destinations show healthy.
    let listed = ok(&w.admin(Method::GET, "", None).await, 200);
    for d in listed["items"].as_array().expect("items") {
        assert_eq!(d["health"]["status"], "healthy", "{d}");
        assert!(d["health"]["lastDeliveredAt"].is_string());
    }
    let metrics = w.app.scrape().await;
    for k in &KINDS {
        assert_eq!(
            metrics.value(
                "tocsin_notifier_destination_deliveries_total",
                &[("kind", k.kind), ("outcome", "delivered")]
            ),
            1.0,
            "{}",
            k.kind
        );
    }
}

/// An event written in markdown with a `url` (and an older
/// `metadata.url`, which gives way to it): Slack, Telegram and ntfy get the
/// description as plain text, Discord as its markdown, the mail's HTML
/// rendered and sanitised and its text plain; each links the event's
/// `url`; the webhook's data is the API's event.
async fn a_markdown_event_with_a_url_reaches_each_kind_as_it_can_show_it(kind: StoreKind) {
    let w = world(kind).await;
    w.every_kind().await;
    let url = "https://ci.example.com/runs/42";
    let markdown = "**Deploy 42** failed: see [the log](https://ci.example.com/runs/42/log). \
                    <script>alert(1)</script>";
    let plain = "Deploy 42 failed: see the log. <script>alert(1)</script>";
    let event = w
        .app
        .record_event(
            &w.key,
            &json!({
                "channelName": "deploys",
                "title": "Deploy 42 failed",
                "description": markdown,
                "parser": "markdown",
                "url": url,
                "metadata": { "url": "https://old.example.com/runs/42" },
            }),
        )
        .await;
    w.deliveries(&event).await;
    for k in &KINDS {
        w.standins.wait_received(k.prefix, 1, WAIT).await;
        w.standins.assert_no_problems(k.prefix).await;
    }
    let one = |records: Vec<Value>| records.into_iter().next().expect("one");

    let slack = one(w.standins.received("/slack/").await);
    let blocks = &slack["message"]["blocks"];
    assert_eq!(
        blocks[1]["text"]["text"],
        "Deploy 42 failed: see the log. &lt;script&gt;alert(1)&lt;/script&gt;"
    );
    let context = blocks[2]["elements"].as_array().expect("elements");
    assert_eq!(
        context.last().expect("link")["text"],
        format!("<{url}|Open>")
    );

    let telegram = one(w.standins.received("/telegram/").await);
    let shown = telegram["plain_text"].as_str().expect("parsed text");
    assert!(shown.contains(plain), "{shown}");
    assert!(
        telegram["text"]
            .as_str()
            .expect("text")
            .contains(&format!("<a href=\"{url}\">Open</a>")),
        "{telegram}"
    );

    let ntfy = one(w.standins.received("/ntfy").await);
    assert_eq!(ntfy["message"], plain);
    assert_eq!(ntfy["click"], url);
    assert_eq!(ntfy["markdown"], false);

    let discord = one(w.standins.received("/discord/").await);
    let embed = &discord["message"]["embeds"][0];
    assert_eq!(
        embed["description"],
        "**Deploy 42** failed: see [the log](https://ci.example.com/runs/42/log). \
         \\<script>alert(1)\\</script>"
    );
    assert_eq!(embed["url"], url);
    assert_eq!(discord["message"]["allowed_mentions"]["parse"], json!([]));

    let mail = one(w.standins.received("smtp").await);
    let html = mail["html"].as_str().expect("html");
    assert!(html.contains("<strong>Deploy 42</strong>"), "{html}");
    assert!(
        html.contains("href=\"https://ci.example.com/runs/42/log\""),
        "{html}"
    );
    assert!(!html.contains("<script>"), "{html}");
    assert!(html.contains(&format!("<a href=\"{url}\"")), "{html}");
    let text = mail["text"].as_str().expect("text");
    assert!(
        text.contains(plain) && text.contains(&format!("Open: {url}")),
        "{text}"
    );
    assert!(!text.contains("**"), "{text}");

    let hook = one(w.standins.received("/webhook/").await);
    let api = Reply::of(w.app.get_as(&format!("/v1/events/{event}"), &w.key).await).await;
    assert_eq!(hook["body"]["data"]["parser"], "markdown");
    assert_eq!(hook["body"]["data"]["url"], url);
    for field in [
        "description",
        "parser",
        "descriptionHtml",
        "url",
        "metadata",
    ] {
        assert_eq!(
            hook["body"]["data"][field], api.body["data"][field],
            "the webhook's {field} is the API's"
        );
    }
}

async fn a_500_and_a_429_are_retried_and_delivered_once(kind: StoreKind) {
    // Room for the 429's second: a Retry-After is capped at the longest
    // retry delay.
    let w = world_with(kind, |n| n.retry_max_ms = 3000).await;
    let ids = w.every_kind().await;
    for k in KINDS.iter().filter(|k| k.kind != "email") {
        w.standins
            .script(
                k.prefix,
                json!([{ "status": 500 }, { "status": 429, "retry_after": 1 }]),
            )
            .await;
    }
    w.standins
        .script("smtp", json!([{ "status": 451 }, { "status": 452 }]))
        .await;
    let event = w.event("payments", "Payment failed").await;
    let deliveries = w.deliveries(&event).await;
    for k in &KINDS {
        let delivery = &deliveries[&ids[k.kind]];
        assert_eq!(delivery["state"], "delivered", "{}: {delivery}", k.kind);
        assert_eq!(delivery["attempts"], 3, "{}: {delivery}", k.kind);
        let got = w.standins.received(k.prefix).await;
        assert_eq!(accepted(&got).len(), 1, "{}: {got:#?}", k.kind);
        assert_eq!(got.len(), 3, "two refused, then one taken: {got:#?}");
    }
    // One delivery of the webhook: one webhook-id on every try.
    let hooks = w.standins.received("/webhook/").await;
    let first = &hooks[0]["headers"]["webhook-id"];
    assert!(first.is_string());
    assert!(hooks.iter().all(|h| &h["headers"]["webhook-id"] == first));
    // Honoured: the 429's Retry-After of a second.
    let times: Vec<f64> = hooks
        .iter()
        .map(|h| h["received_at"].as_f64().expect("arrival time"))
        .collect();
    assert!(times[2] - times[1] >= 0.95, "{times:?}");
    let metrics = w.app.scrape().await;
    assert_eq!(
        metrics.value(
            "tocsin_notifier_destination_deliveries_total",
            &[("kind", "slack"), ("outcome", "retried")]
        ),
        2.0
    );
}

async fn a_webhook_answering_410_is_disabled_and_gets_nothing_more(kind: StoreKind) {
    let w = world(kind).await;
    let (id, _) = w.create("webhook", json!({})).await;
    w.standins
        .script("/webhook/", json!([{ "status": 410 }]))
        .await;
    let first = w.event("payments", "Payment failed").await;
    let event = w.app.settled(&w.key, &first, "failed").await;
    let delivery = &event["notification"]["deliveries"][0];
    assert_eq!(delivery["destinationId"], json!(id));
    assert_eq!(delivery["state"], "failed");
    assert_eq!(delivery["attempts"], 1, "a 410 is not retried: {delivery}");
    let shown = ok(&w.admin(Method::GET, &format!("/{id}"), None).await, 200);
    assert_eq!(shown["enabled"], false);
    assert_eq!(shown["health"]["status"], "disabled");
    assert!(
        shown["disabledReason"]
            .as_str()
            .expect("a reason")
            .contains("410"),
        "{shown}"
    );
    // Disabled: the next event is not sent to it.
    let second = w.event("payments", "Another").await;
    w.app.settled(&w.key, &second, "skipped").await;
    assert_eq!(w.standins.received("/webhook/").await.len(), 1);
    // Turned on again, it gets alerts again, healthy.
    let on = ok(
        &w.admin(
            Method::PATCH,
            &format!("/{id}"),
            Some(&json!({ "enabled": true })),
        )
        .await,
        200,
    );
    assert_eq!(on["disabledReason"], Value::Null);
    let third = w.event("payments", "Third").await;
    w.app.settled(&w.key, &third, "delivered").await;
    assert_eq!(accepted(&w.standins.received("/webhook/").await).len(), 1);
}

async fn rules_filter_a_destination_and_a_burst_sends_it_a_digest(kind: StoreKind) {
    let w = world(kind).await;
    let (only_deploys, _) = w
        .create(
            "slack",
            json!({ "channels": ["deploys"], "minPriority": "normal" }),
        )
        .await;
    let (limited, _) = w
        .create("discord", json!({ "burst": { "max": 1, "perMinutes": 1 } }))
        .await;
    let first = w.event("payments", "Payment failed").await;
    let deliveries = w.deliveries(&first).await;
    assert_eq!(deliveries[&only_deploys]["state"], "filtered");
    assert_eq!(deliveries[&only_deploys]["reason"], "channel");
    assert_eq!(deliveries[&limited]["state"], "delivered");
    let second = w.event("payments", "Payment failed again").await;
    // Filtered here, held there: nothing went out for it (yet).
    let event = w.app.settled(&w.key, &second, "skipped").await;
    let held = event["notification"]["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .find(|d| d["destinationId"] == json!(limited))
        .expect("the discord delivery")
        .clone();
    assert_eq!(held["state"], "held", "{held}");
    assert_eq!(held["reason"], "burst");
    assert!(w.standins.received("/slack/").await.is_empty());
    // The window ends within a minute: one digest, the held one in it.
    let digests = w
        .standins
        .wait_received("/discord/", 2, Duration::from_secs(90))
        .await;
    let digest = &accepted(&digests)[1]["body"]["embeds"][0];
    // Discord's Markdown is escaped in a title (`\#`).
    let title = digest["title"].as_str().expect("title").replace('\\', "");
    assert_eq!(title, "1 more in #payments", "{digest}");
    w.standins.assert_no_problems("/discord/").await;
}

async fn the_admin_api_shows_secrets_once_checks_urls_and_audits(kind: StoreKind) {
    let w = world(kind).await;
    let (id, created) = w.create("slack", json!({})).await;
    let full = w.standins.url(SLACK_URL_PATH);
    assert_eq!(created["secrets"]["webhookUrl"], json!(full));
    let shown = ok(&w.admin(Method::GET, &format!("/{id}"), None).await, 200);
    let origin = format!("http://127.0.0.1:{}/…", w.standins.http.port());
    assert_eq!(shown["settings"]["webhookUrl"], json!(origin));
    let listed = w.admin(Method::GET, "", None).await;
    assert!(!listed.body.to_string().contains("xSlackSecretToken"));
    let (hook, created) = w.create("webhook", json!({})).await;
    let secret = created["secrets"]["secret"].as_str().expect("secret");
    assert!(secret.starts_with("whsec_"));
    let again = w.admin(Method::GET, &format!("/{hook}"), None).await;
    assert!(!again.body.to_string().contains(&secret[6..]));
    // Sealed under another key (TOCSIN_SECRETS_KEY changed): its signing
    // secret cannot be kept, so new settings are refused, not given a
    // secret no answer would show.
    let other =
        common::sealed::SecretsKey::from_base64(&tocsin_tests::test_secrets_key()).expect("key");
    let hook_id: uuid::Uuid = hook.parse().expect("uuid");
    let foreign = common::destination::Settings::Webhook {
        url: "https://example.com/x".into(),
        secret: "whsec_x".into(),
    };
    let scope = common::store::Scope::new("acme", "shop");
    let resealed = common::store::DestinationPatch {
        settings: Some((foreign.masked(), foreign.seal(&other, hook_id))),
        ..Default::default()
    };
    w.app
        .store
        .update_destination(&scope, hook_id, &resealed, common::time::now())
        .await
        .expect("resealed")
        .expect("found");
    let refused = w
        .admin(
            Method::PATCH,
            &format!("/{hook}"),
            Some(&json!({ "settings": { "url": w.standins.url("/webhook/hook") } })),
        )
        .await;
    refused.assert_error_envelope(409);
    assert!(
        refused.body["error"]
            .as_str()
            .expect("error")
            .contains("delete")
    );

    // Not https, not public, not allowed: refused at creation, at its field.
    for url in [
        "http://example.com/hook",
        "https://10.1.2.3/hook",
        "https://[::ffff:192.168.1.1]/hook",
        "https://[::1]:1/hook",
        "https://user:pw@example.com/hook",
    ] {
        let refused = w
            .admin(
                Method::POST,
                "",
                Some(&json!({ "kind": "webhook", "name": "x", "settings": { "url": url } })),
            )
            .await;
        refused.assert_error_envelope(400);
        assert_eq!(
            refused.fault_paths(),
            vec![vec!["settings".to_owned(), "url".to_owned()]],
            "{url}: {}",
            refused.body
        );
    }
    // An address the published schema and the service read alike, U+0085
    // (whitespace to one regex dialect, not to the other) included: a
    // clear answer, never a 500 (schemathesis found the difference).
    for to in ["ops\u{85}@example.com", "ops\u{1}@example.com"] {
        let answer = w
            .admin(
                Method::POST,
                "",
                Some(&json!({ "kind": "email", "name": "x", "settings": { "to": [to] } })),
            )
            .await;
        assert!(
            matches!(answer.status, 201 | 400),
            "{to:?}: {}",
            answer.body
        );
    }
    // A body of another kind's settings, an unknown kind: 400.
    let wrong = w
        .admin(
            Method::POST,
            "",
            Some(&json!({ "kind": "telegram", "name": "x", "settings": { "webhookUrl": full } })),
        )
        .await;
    wrong.assert_error_envelope(400);
    let changed = w
        .admin(
            Method::PATCH,
            &format!("/{id}"),
            Some(&json!({ "settings": { "botToken": BOT_TOKEN, "chatId": "1" } })),
        )
        .await;
    changed.assert_error_envelope(400);
    // Changed, deleted; each in the audit log.
    let renamed = ok(
        &w.admin(
            Method::PATCH,
            &format!("/{id}"),
            Some(&json!({ "name": "ops channel", "tags": ["billing"] })),
        )
        .await,
        200,
    );
    assert_eq!(renamed["name"], "ops channel");
    assert_eq!(renamed["tags"], json!(["billing"]));
    ok(&w.admin(Method::DELETE, &format!("/{id}"), None).await, 200);
    w.admin(Method::GET, &format!("/{id}"), None)
        .await
        .assert_error_envelope(404);
    let audit = ok(
        &w.app
            .call(Method::GET, "/admin/v1/audit", &w.admin, None)
            .await,
        200,
    );
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| a.starts_with("destination."))
        .collect();
    for action in [
        "destination.create",
        "destination.update",
        "destination.delete",
    ] {
        assert!(actions.contains(&action), "{action}: {actions:?}");
    }
    assert!(!audit.to_string().contains("xSlackSecretToken"));
}

async fn a_test_alert_reports_its_outcome(kind: StoreKind) {
    let w = world(kind).await;
    let (id, _) = w.create("webhook", json!({})).await;
    let tested = ok(
        &w.admin(Method::POST, &format!("/{id}/test"), None).await,
        200,
    );
    assert_eq!(tested["outcome"], "delivered", "{tested}");
    let hook = &w.standins.wait_received("/webhook/", 1, WAIT).await[0];
    assert_eq!(hook["body"]["type"], "destination.test");
    w.standins
        .script("/webhook/", json!([{ "status": 503 }]))
        .await;
    let failed = ok(
        &w.admin(Method::POST, &format!("/{id}/test"), None).await,
        200,
    );
    assert_eq!(failed["outcome"], "retryable", "{failed}");
    assert!(failed["error"].as_str().expect("error").contains("503"));
    assert_eq!(failed["destination"]["health"]["failures"], 1);
}

/// A URL that passed at creation is checked again at every send, its name
/// resolved then: here the name resolves to an address ingest allowed
/// (its allow-list has 127.0.0.1) and the notifier does not (its list is
/// empty), as after a DNS rebinding; nothing is sent.
async fn a_url_is_checked_again_when_sent_with_its_name_resolved_again(kind: StoreKind) {
    let w = world_with(kind, |n| {
        n.backend.destinations_allow = String::new();
        // Plain SMTP is for allowed hosts only: none here.
        n.backend.smtp_host = None;
    })
    .await;
    let url = w
        .standins
        .url("/webhook/hook")
        .replace("http://127.0.0.1", "https://localhost");
    let created = ok(
        &w.admin(
            Method::POST,
            "",
            Some(&json!({ "kind": "webhook", "name": "rebound", "settings": { "url": url } })),
        )
        .await,
        201,
    );
    let id = created["destination"]["id"].clone();
    let event = w.event("payments", "Payment failed").await;
    let settled = w.app.settled(&w.key, &event, "failed").await;
    let delivery = &settled["notification"]["deliveries"][0];
    assert_eq!(delivery["destinationId"], id);
    let error = delivery["error"].as_str().expect("an error");
    assert!(
        error.contains("was not contacted") && error.contains("public address"),
        "{error}"
    );
    assert_eq!(
        delivery["attempts"], 1,
        "a refusal is not retried: {delivery}"
    );
    assert!(w.standins.received("/webhook/").await.is_empty());
}

/// The store keeps what it is given (sealed settings, masked view,
/// rules), changes it by patch, counts health, and never mixes scopes.
async fn the_store_keeps_destinations_and_their_health(kind: StoreKind) {
    use common::{
        destination::{DestinationKind, Settings, new_destination_id},
        rules::AlertRules,
        sealed::SecretsKey,
        store::{Attempt, Destination, DestinationPatch, Health, RulesPatch, Scope},
    };
    let (store, _test) = tocsin_tests::open_store(kind).await;
    let key = SecretsKey::from_base64(&tocsin_tests::test_secrets_key()).expect("key");
    let scope = Scope::new("acme", "shop");
    let settings = Settings::Telegram {
        bot_token: BOT_TOKEN.into(),
        chat_id: "42".into(),
    };
    let id = new_destination_id();
    let at = common::time::now();
    let made = Destination {
        id,
        scope: scope.clone(),
        kind: DestinationKind::Telegram,
        name: "ops".into(),
        enabled: true,
        disabled_reason: None,
        rules: AlertRules {
            channels: Some(vec!["payments".into()]),
            ..AlertRules::every_alert()
        },
        masked: settings.masked(),
        sealed: settings.seal(&key, id),
        health: Health::default(),
        created_at: at,
        updated_at: at,
    };
    store.create_destination(&made).await.expect("created");
    let read = store
        .get_destination(&scope, id)
        .await
        .expect("read")
        .expect("found");
    assert_eq!(read, made);
    assert_eq!(
        Settings::open(&key, id, &read.sealed).expect("opens"),
        settings
    );
    let other = Scope::new("acme", "blog");
    assert!(
        store
            .get_destination(&other, id)
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        store
            .list_destinations(&other)
            .await
            .expect("list")
            .is_empty()
    );

    let changes = store.device_changes();
    let patch = DestinationPatch {
        name: Some("pager".into()),
        rules: RulesPatch {
            channels: Some(None),
            ..RulesPatch::default()
        },
        ..DestinationPatch::default()
    };
    let later = at + chrono::Duration::seconds(1);
    let changed = store
        .update_destination(&scope, id, &patch, later)
        .await
        .expect("updated")
        .expect("found");
    assert_eq!(changed.name, "pager");
    assert_eq!(changed.rules.channels, None);
    assert!(
        store.device_changes() > changes,
        "the recipients' cache sees it"
    );

    let failed = Attempt::Failed {
        error: "Telegram answered 502".into(),
    };
    assert!(
        store
            .record_attempt(&scope, id, &failed, later)
            .await
            .expect("recorded")
    );
    assert!(
        store
            .record_attempt(&scope, id, &failed, later)
            .await
            .expect("recorded")
    );
    let health = store
        .get_destination(&scope, id)
        .await
        .expect("read")
        .expect("found")
        .health;
    assert_eq!(health.failures, 2);
    assert_eq!(health.last_error.as_deref(), Some("Telegram answered 502"));
    store
        .record_attempt(&scope, id, &Attempt::Delivered, later)
        .await
        .expect("recorded");
    let gone = Attempt::Gone {
        error: "chat not found".into(),
    };
    store
        .record_attempt(&scope, id, &gone, later)
        .await
        .expect("recorded");
    let now = store
        .get_destination(&scope, id)
        .await
        .expect("read")
        .expect("found");
    assert_eq!(
        now.health.failures, 1,
        "counted from the last delivered one"
    );
    assert!(now.health.last_delivered_at.is_some());
    assert!(!now.enabled);
    assert_eq!(now.disabled_reason.as_deref(), Some("chat not found"));

    assert!(store.delete_destination(&scope, id).await.expect("deleted"));
    assert!(!store.delete_destination(&scope, id).await.expect("deleted"));
    assert!(
        store
            .list_destinations(&scope)
            .await
            .expect("list")
            .is_empty()
    );
}

for_each_store!(
    the_store_keeps_destinations_and_their_health,
    a_url_is_checked_again_when_sent_with_its_name_resolved_again,
    every_kind_gets_the_alert_once_in_its_own_form,
    a_markdown_event_with_a_url_reaches_each_kind_as_it_can_show_it,
    a_500_and_a_429_are_retried_and_delivered_once,
    a_webhook_answering_410_is_disabled_and_gets_nothing_more,
    rules_filter_a_destination_and_a_burst_sends_it_a_digest,
    the_admin_api_shows_secrets_once_checks_urls_and_audits,
    a_test_alert_reports_its_outcome,
);

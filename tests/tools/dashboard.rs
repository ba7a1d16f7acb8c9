//! The dashboard (`GET /dashboard`) in a real headless Chromium, against
//! the real admin API: signed in with a token from `ingest admin create`,
//! an operator creates an organization, a project and an API key on the
//! page, copies the key from it, the key records an event (201), the key is
//! revoked on the page behind a confirmation, and the same request gets 401.
//! A wrong token is refused plainly and kept nowhere. A webhook destination
//! is added on the page, its signing secret shown once, and a test sent to
//! a receiver on this machine shows its outcome in its row. Needs the
//! `ingest` binary (`cargo build --workspace`) for `ingest admin create`.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU16, Ordering},
    },
};

use fantoccini::Locator;
use http_body_util::{BodyExt as _, Full};
use hyper::{Response, body::Bytes, service::service_fn};
use serde::Deserialize;
use serde_json::{Value, json};
use tocsin_tests::{StoreKind, TestApp, TestConfig, process};

use crate::browser::{Browser, LOAD_TIMEOUT};

/// What the dashboard shows, read from its DOM in one script.
const SNAPSHOT: &str = r#"
const $ = (id) => document.getElementById(id);
const shown = (id) => !$(id).hidden;
return {
  login: shown('login'),
  app: shown('app'),
  error: shown('error') ? $('error').textContent : null,
  notice: $('notice').textContent,
  who: $('who').textContent,
  orgs: [...document.querySelectorAll('#orgs .org')].map((o) => ({
    name: o.querySelector('h3').textContent,
    projects: [...o.querySelectorAll('.projects li .name')].map((n) => n.textContent),
  })),
  keys: [...document.querySelectorAll('#keys tbody tr')].map((tr) => ({
    id: tr.dataset.id,
    text: tr.textContent,
    revoked: tr.classList.contains('revoked'),
  })),
  secret: shown('secret') ? $('secret-value').textContent : null,
  curl: $('secret-curl').textContent,
  client: $('secret-client').textContent,
  dialog: $('dialog').open,
  stored: sessionStorage.getItem('tocsin.admin'),
  local: localStorage.length,
  cookies: document.cookie,
};
"#;

/// The actions the audit log lists, top to bottom.
const AUDIT: &str =
    "return [...document.querySelectorAll('#audit .action')].map((a) => a.textContent)";

#[derive(Debug, Deserialize)]
struct Dashboard {
    login: bool,
    app: bool,
    error: Option<String>,
    notice: String,
    who: String,
    orgs: Vec<Org>,
    keys: Vec<KeyRow>,
    secret: Option<String>,
    curl: String,
    client: String,
    dialog: bool,
    stored: Option<String>,
    local: u32,
    cookies: String,
}

#[derive(Debug, Deserialize)]
struct Org {
    name: String,
    projects: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct KeyRow {
    id: String,
    text: String,
    revoked: bool,
}

/// A token from `ingest admin create`, against the test app's SQLite store.
fn admin_token(app: &TestApp, name: &str) -> String {
    let data_dir = app.config.backend.data_dir.display().to_string();
    process::run(
        "ingest",
        &["admin", "create", "--name", name],
        &[("INGEST_DATA_DIR", data_dir)],
    )
    .trim()
    .to_owned()
}

impl Browser {
    async fn dashboard(&self, what: &str, ready: impl Fn(&Dashboard) -> bool) -> Dashboard {
        self.wait_for(SNAPSHOT, LOAD_TIMEOUT, what, ready).await
    }

    /// Types `text` into the field `css` names.
    async fn type_into(&self, css: &str, text: &str) {
        let field = self
            .client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no field {css} ({e})"));
        field.clear().await.expect("cleared");
        field.send_keys(text).await.expect("typed");
    }
}

/// POST /v1/events with `key`: the status.
async fn post_event(app: &TestApp, key: &str) -> u16 {
    let body = json!({ "channelName": "deploys", "title": "From the dashboard's key",
        "notify": false });
    app.post_event(key, &body).await.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_makes_a_key_on_the_dashboard_uses_it_and_revokes_it() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let token = admin_token(&app, "ops-lead");
    let browser = Browser::opened_at(&app.url("/dashboard")).await;

    browser.dashboard("the sign-in form", |d| d.login).await;
    browser.type_into("#token-input", &token).await;
    browser.click("#token-form button[type=submit]").await;
    let page = browser
        .dashboard("the signed-in dashboard", |d| {
            d.app && d.who.contains("ops-lead")
        })
        .await;
    assert_eq!(page.stored.as_deref(), Some(token.as_str()));
    assert_eq!(page.local, 0, "something kept in local storage");
    assert_eq!(page.cookies, "", "the dashboard set a cookie");

    // An organization and a project, made on the page.
    browser.type_into("#org-name", "acme").await;
    browser.click("#org-form button[type=submit]").await;
    browser
        .dashboard("the new organization", |d| {
            d.orgs.iter().any(|o| o.name == "acme")
        })
        .await;
    browser
        .type_into("#orgs .org form input[name=name]", "web")
        .await;
    browser.click("#orgs .org form button[type=submit]").await;
    browser
        .dashboard("the new project", |d| {
            d.orgs
                .iter()
                .any(|o| o.name == "acme" && o.projects == ["web"])
        })
        .await;

    // Settings → API Keys: a key named "ci", all four scopes by default.
    browser.click("#orgs .projects li button.keys").await;
    browser
        .dashboard("the project's (empty) key list", |d| d.keys.is_empty())
        .await;
    browser.type_into("#key-name", "ci").await;
    browser.type_into("#key-rate", "600").await;
    browser.click("#key-form button[type=submit]").await;
    let page = browser
        .dashboard("the new key, shown once", |d| {
            d.secret.is_some() && d.keys.len() == 1
        })
        .await;
    browser.click("[data-copy=secret-value]").await;
    let secret = page.secret.clone().expect("the secret");
    assert!(secret.starts_with("tocsin_"), "{secret:?}");
    let row = &page.keys[0];
    for shown in [
        "ci",
        "events:write",
        "events:read",
        "devices:write",
        "devices:read",
        "600/min",
        "never",
    ] {
        assert!(
            row.text.contains(shown),
            "{shown:?} not in the key's row: {}",
            row.text
        );
    }
    assert!(!row.text.contains(&secret), "the list shows the secret");
    // Ready to paste: this server's origin and the key.
    assert!(
        page.curl.contains(&format!("{}/v1/events", app.base)) && page.curl.contains(&secret),
        "{}",
        page.curl
    );
    assert!(
        page.client.contains("@tocsin/client") && page.client.contains(&secret),
        "{}",
        page.client
    );
    browser
        .dashboard("the copy acknowledged", |d| !d.notice.is_empty())
        .await;

    assert_eq!(
        post_event(&app, &secret).await,
        201,
        "the new key is refused"
    );
    browser.screenshot("dashboard.png").await;

    // On a phone's width nothing runs off the side.
    browser.assert_fits_a_phone("dashboard-phone.png").await;

    // Revoke, behind a confirmation: cancelling keeps the key.
    browser.click("#secret-done").await;
    let revoke = format!("#keys tr[data-id=\"{}\"] button.revoke", row.id);
    browser.click(&revoke).await;
    browser.dashboard("the confirmation", |d| d.dialog).await;
    browser.click("#dialog-cancel").await;
    browser
        .dashboard("the confirmation closed", |d| !d.dialog)
        .await;
    assert_eq!(
        post_event(&app, &secret).await,
        201,
        "cancelling revoked the key"
    );
    browser.click(&revoke).await;
    browser.dashboard("the confirmation", |d| d.dialog).await;
    browser.click("#dialog-ok").await;
    let page = browser
        .dashboard("the key marked revoked", |d| {
            d.keys.len() == 1 && d.keys[0].revoked
        })
        .await;
    assert_eq!(page.error, None);
    assert_eq!(
        post_event(&app, &secret).await,
        401,
        "the revoked key still works"
    );

    // The audit log has what happened here, newest first (after the
    // token's own creation by the CLI).
    browser.click(".tabs a[data-view=audit]").await;
    let actions: Vec<String> = browser
        .wait_for(AUDIT, LOAD_TIMEOUT, "the audit log", |a: &Vec<String>| {
            a.len() >= 5
        })
        .await;
    assert_eq!(
        actions,
        [
            "key.revoke",
            "key.create",
            "project.create",
            "organization.create",
            "admin.create"
        ],
    );

    // Signing out forgets the token.
    browser.click("#sign-out").await;
    let page = browser
        .dashboard("the sign-in form again", |d| d.login)
        .await;
    assert_eq!(page.stored, None);
    assert!(!page.app);
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_refuses_an_api_key_or_a_wrong_token_and_keeps_neither() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (api_key, _) = app.new_key().await;
    let browser = Browser::opened_at(&app.url("/dashboard")).await;
    for wrong in [api_key.as_str(), "tocsinadm_not-a-real-token"] {
        browser.type_into("#token-input", wrong).await;
        browser.click("#token-form button[type=submit]").await;
        let page = browser
            .dashboard("the refusal", |d| d.error.is_some())
            .await;
        let error = page.error.as_deref().unwrap_or_default();
        assert!(
            error.contains("not accepted") && page.login && !page.app,
            "{wrong}: {error:?}"
        );
        assert_eq!(page.stored, None, "the refused token was kept");
        browser
            .script("document.getElementById('error').hidden = true; return null")
            .await;
    }
    browser.close().await;
}

/// Each device's alert rules in its row of the project's devices, in a
/// line, the defaults as "all alerts".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_device_list_shows_each_devices_alert_rules() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let token = app.create_admin("ops-lead").await;
    let admin = |path: &str, body: serde_json::Value| {
        let (app, token, path) = (&app, &token, path.to_owned());
        async move {
            let reply = app
                .call(reqwest::Method::POST, &path, token, Some(&body))
                .await;
            assert_eq!(reply.status, 201, "{path}: {}", reply.body);
            reply.body["data"].clone()
        }
    };
    let org = admin("/admin/v1/organizations", json!({ "name": "acme" })).await;
    let project = admin(
        &format!(
            "/admin/v1/organizations/{}/projects",
            org["id"].as_str().expect("id")
        ),
        json!({ "name": "web" }),
    )
    .await;
    let key = admin(
        &format!(
            "/admin/v1/projects/{}/keys",
            project["id"].as_str().expect("id")
        ),
        json!({ "scopes": ["devices:write"] }),
    )
    .await;
    let key = key["secret"].as_str().expect("the secret");
    for (n, name, rules) in [
        (1, "Plain phone", json!({})),
        (
            2,
            "On-call phone",
            json!({ "minPriority": "normal", "channels": ["payments"], "tags": ["db", "disk"],
                "quietHours": { "start": "22:00", "end": "07:00", "timeZone": "Europe/Berlin" },
                "burst": { "max": 5, "perMinutes": 10 } }),
        ),
        (
            3,
            "Night tablet",
            json!({ "minPriority": "high", "quietHours": { "start": "23:30", "end": "06:00",
                "timeZone": "UTC", "allowPriority": null } }),
        ),
    ] {
        let mut body = json!({ "token": tocsin_tests::pipeline::token(n), "environment": "sandbox",
            "name": name });
        body.as_object_mut()
            .expect("object")
            .extend(rules.as_object().expect("object").clone());
        let status = app.post("/v1/devices", key, &body).await.status();
        assert_eq!(status, 201, "{name}");
    }

    let browser = Browser::opened_at(&app.url("/dashboard")).await;
    browser.type_into("#token-input", &token).await;
    browser.click("#token-form button[type=submit]").await;
    browser
        .dashboard("the signed-in dashboard", |d| {
            d.orgs.iter().any(|o| o.projects == ["web"])
        })
        .await;
    // The tab (the project list is drawn again as it loads: a button of
    // it may be replaced between finding and clicking it); the only
    // project is the one shown.
    browser.click(".tabs a[data-view=devices]").await;
    let rows: Vec<(String, String)> = browser
        .wait_for(
            "return [...document.querySelectorAll('#devices tbody tr')].map((tr) =>\
               [tr.querySelector('td[data-label=Name]').textContent,\
                tr.querySelector('td[data-label=Rules]').textContent]);",
            LOAD_TIMEOUT,
            "the devices with their rules",
            |rows: &Vec<(String, String)>| rows.len() == 3,
        )
        .await;
    let rules = |name: &str| {
        rows.iter()
            .find(|(n, _)| n == name)
            .map(|(_, rules)| rules.as_str())
            .unwrap_or_else(|| panic!("no row for {name}: {rows:?}"))
    };
    assert_eq!(rules("Plain phone"), "all alerts");
    assert_eq!(
        rules("On-call phone"),
        "≥ normal · quiet 22:00–07:00 Europe/Berlin (high through) · 5/10 min · #payments · tagged db, disk"
    );
    assert_eq!(
        rules("Night tablet"),
        "≥ high · quiet 23:30–06:00 UTC (nothing through)"
    );
    let heading = browser
        .script("return [...document.querySelectorAll('#devices thead th')].map((th) => th.textContent)")
        .await;
    assert!(
        heading
            .as_array()
            .expect("headings")
            .contains(&json!("Rules")),
        "{heading}"
    );
    browser.screenshot("dashboard-devices.png").await;
    browser
        .assert_fits_a_phone("dashboard-devices-phone.png")
        .await;
    browser.close().await;
    app.stop().await;
}

/// The destinations page, read from its DOM in one script.
const DESTINATIONS: &str = r#"
const $ = (id) => document.getElementById(id);
return {
  view: !$('view-destinations').hidden,
  error: $('error').hidden ? null : $('error').textContent,
  notice: $('notice').textContent,
  secret: $('dest-secret').hidden ? null : ($('dest-secret-secret') || {}).textContent || null,
  rows: [...document.querySelectorAll('#destinations tbody tr')].map((tr) => {
    const text = (label) => tr.querySelector(`td[data-label="${label}"]`).textContent;
    return {
      name: text('Name'),
      kind: text('Kind'),
      sendsTo: text('Sends to'),
      rules: text('Rules'),
      health: text('Health'),
      outcome: tr.querySelector('.outcome').textContent,
      toggle: tr.querySelector('button.toggle').textContent,
    };
  }),
  empty: !$('destinations-empty').hidden,
  dialog: $('dialog').open,
};
"#;

#[derive(Debug, Deserialize)]
struct DestinationsPage {
    view: bool,
    error: Option<String>,
    notice: String,
    secret: Option<String>,
    rows: Vec<DestinationRow>,
    empty: bool,
    dialog: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DestinationRow {
    name: String,
    kind: String,
    sends_to: String,
    rules: String,
    health: String,
    outcome: String,
    toggle: String,
}

impl DestinationsPage {
    /// Its only row.
    fn row(&self) -> &DestinationRow {
        assert_eq!(self.rows.len(), 1, "{self:?}");
        &self.rows[0]
    }
}

impl Browser {
    async fn destinations(
        &self,
        what: &str,
        ready: impl Fn(&DestinationsPage) -> bool,
    ) -> DestinationsPage {
        self.wait_for(DESTINATIONS, LOAD_TIMEOUT, what, ready).await
    }

    /// How many times `text` is in the page's markup (its text, its
    /// attributes, its form fields' values) and in its storage.
    async fn occurrences(&self, text: &str) -> u64 {
        let script = "const [text] = arguments;\
            const fields = [...document.querySelectorAll('input')].map((i) => i.value).join(' ');\
            const all = document.documentElement.outerHTML + fields\
              + JSON.stringify(sessionStorage) + JSON.stringify(localStorage);\
            return all.split(text).length - 1;";
        self.client
            .execute(script, vec![json!(text)])
            .await
            .expect("the page searched")
            .as_u64()
            .expect("a count")
    }

    /// Chooses `value` in the select `css` names, as a person would.
    async fn choose(&self, css: &str, value: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no select {css} ({e})"))
            .select_by_value(value)
            .await
            .unwrap_or_else(|e| panic!("{value} cannot be chosen in {css} ({e})"));
    }
}

/// A webhook receiver on 127.0.0.1: records each request's headers and
/// body, and answers with the status it is set to (204 at first).
struct Receiver {
    addr: SocketAddr,
    status: Arc<AtomicU16>,
    requests: Arc<Mutex<Vec<(hyper::HeaderMap, Value)>>>,
}

impl Receiver {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("addr");
        let status = Arc::new(AtomicU16::new(204));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (answer, record) = (Arc::clone(&status), Arc::clone(&requests));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (answer, record) = (Arc::clone(&answer), Arc::clone(&record));
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let (answer, record) = (Arc::clone(&answer), Arc::clone(&record));
                    async move {
                        let (head, body) = request.into_parts();
                        let body = body.collect().await?.to_bytes();
                        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        record.lock().expect("lock").push((head.headers, body));
                        let mut response = Response::new(Full::new(Bytes::new()));
                        *response.status_mut() =
                            hyper::StatusCode::from_u16(answer.load(Ordering::SeqCst))
                                .expect("a status");
                        Ok::<_, hyper::Error>(response)
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        Self {
            addr,
            status,
            requests,
        }
    }

    fn requests(&self) -> Vec<(hyper::HeaderMap, Value)> {
        self.requests.lock().expect("lock").clone()
    }

    fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }
}

/// On the Destinations page an operator adds a webhook (pointed at a
/// receiver on this machine, a host the server's settings allow), copies
/// its signing secret from the one answer that shows it (afterwards only
/// its hint is anywhere on the page), sends it a test and sees it
/// delivered, then sees the receiver's failures: each test's error in its
/// row, and the destination marked unhealthy after three in a row. It is
/// then turned off and deleted behind a confirmation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_adds_a_webhook_destination_sees_its_secret_once_sends_a_test_and_sees_the_outcome()
 {
    let receiver = Receiver::start().await;
    // Destinations reach only public https addresses, and hosts the
    // operator allows.
    let mut settings = TestConfig::new(StoreKind::Sqlite);
    settings.config.backend.destinations_allow = "127.0.0.1".into();
    let app = TestApp::spawn_with(settings).await;
    let token = app.create_admin("ops-lead").await;
    let create = async |path: String, name: &str| {
        let body = json!({ "name": name });
        let reply = app
            .call(reqwest::Method::POST, &path, &token, Some(&body))
            .await;
        assert_eq!(reply.status, 201, "{path}: {}", reply.body);
        reply.body["data"]["id"].as_str().expect("id").to_owned()
    };
    let org = create("/admin/v1/organizations".into(), "acme").await;
    create(format!("/admin/v1/organizations/{org}/projects"), "web").await;

    let browser = Browser::opened_at(&app.url("/dashboard")).await;
    browser.type_into("#token-input", &token).await;
    browser.click("#token-form button[type=submit]").await;
    browser
        .dashboard("the signed-in dashboard", |d| {
            d.orgs.iter().any(|o| o.projects == ["web"])
        })
        .await;
    // The tab (the project list may be drawn again between finding and
    // clicking one of its buttons); the only project is the one shown.
    browser.click(".tabs a[data-view=destinations]").await;
    browser
        .destinations("the project's (empty) destinations", |p| p.view && p.empty)
        .await;

    // The kind chooses the settings asked for.
    let shown = "return ['webhook', 'slack'].map((k) =>\
        !document.querySelector(`fieldset[data-kind=${k}]`).hidden)";
    browser.choose("#dest-kind", "slack").await;
    assert_eq!(browser.script(shown).await, json!([false, true]));
    browser.choose("#dest-kind", "webhook").await;
    assert_eq!(browser.script(shown).await, json!([true, false]));

    let url = format!("http://{}/hooks/tocsin", receiver.addr);
    browser.type_into("#dest-name", "Ops webhook").await;
    browser.type_into("#dest-webhook-url", &url).await;
    browser
        .type_into("#dest-channels", "deploys, payments")
        .await;
    browser.choose("#dest-priority", "normal").await;
    browser.click("#dest-form button[type=submit]").await;
    let page = browser
        .destinations("the new destination and its secret", |p| {
            p.secret.is_some() && p.rows.len() == 1
        })
        .await;
    assert_eq!(page.error, None);
    let secret = page.secret.clone().expect("the secret");
    assert!(secret.starts_with("whsec_"), "{secret:?}");
    let hint = format!("whsec_…{}", &secret[secret.len() - 4..]);
    let row = page.row();
    assert_eq!(
        (row.name.as_str(), row.kind.as_str()),
        ("Ops webhook", "Webhook")
    );
    assert!(
        row.sends_to.contains(&url) && row.sends_to.contains(&hint),
        "{row:?}"
    );
    assert_eq!(row.rules, "≥ normal · #deploys #payments");
    assert!(row.health.contains("Untested"), "{row:?}");
    assert_eq!(browser.occurrences(&secret).await, 1, "the secret, once");
    browser.click("[data-copy=dest-secret-secret]").await;
    browser
        .destinations("the copy acknowledged", |p| !p.notice.is_empty())
        .await;
    browser
        .screenshot("dashboard-destinations-secret.png")
        .await;

    // Loaded again, the page has the hint and nothing more of it.
    browser.client.refresh().await.expect("the page reloads");
    let page = browser
        .destinations("the destinations again", |p| p.view && p.rows.len() == 1)
        .await;
    assert_eq!(page.secret, None);
    assert!(page.row().sends_to.contains(&hint), "{page:?}");
    assert_eq!(browser.occurrences(&secret).await, 0, "the secret, again");

    // A test, delivered: the receiver has it, signed.
    let test = "#destinations tbody tr button.test";
    browser.click(test).await;
    let page = browser
        .destinations("the test delivered", |p| {
            p.rows.len() == 1 && p.rows[0].outcome.contains("delivered")
        })
        .await;
    let row = page.row();
    assert!(row.outcome.starts_with("✓ test delivered in "), "{row:?}");
    assert!(row.health.contains("Healthy"), "{row:?}");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (headers, body) = &requests[0];
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("no {name} in {headers:?}"))
    };
    assert!(header("webhook-id").starts_with("msg_"), "{headers:?}");
    assert!(
        header("webhook-timestamp").parse::<i64>().is_ok(),
        "{headers:?}"
    );
    assert!(
        header("webhook-signature").starts_with("v1,"),
        "{headers:?}"
    );
    assert_eq!(body["type"], "destination.test", "{body}");

    // The receiver fails: each test shows its error; three in a row mark
    // the destination unhealthy, with the last error and when.
    receiver.answer(500);
    browser.click(test).await;
    let page = browser
        .destinations("the failed test", |p| {
            p.rows.len() == 1 && p.rows[0].health.contains("1 failure")
        })
        .await;
    let row = page.row();
    assert!(
        row.outcome.starts_with("✗ test failed")
            && row.outcome.contains("the endpoint answered 500"),
        "{row:?}"
    );
    assert!(row.health.contains("the endpoint answered 500"), "{row:?}");
    assert_eq!(receiver.requests().len(), 2);
    for failures in ["2 failures in a row", "3 failures in a row"] {
        browser.click(test).await;
        browser
            .destinations(failures, |p| {
                p.rows.len() == 1 && p.rows[0].health.contains(failures)
            })
            .await;
    }
    let page = browser
        .destinations("the destination unhealthy", |p| {
            p.rows.len() == 1 && p.rows[0].health.starts_with("Unhealthy")
        })
        .await;
    assert!(
        page.row().health.contains("the endpoint answered 500"),
        "{page:?}"
    );
    browser
        .script("document.getElementById('destinations').scrollIntoView(); return null")
        .await;
    browser.screenshot("dashboard-destinations.png").await;
    browser
        .assert_fits_a_phone("dashboard-destinations-phone.png")
        .await;

    // Turned off, then deleted behind a confirmation.
    browser.click("#destinations tbody tr button.toggle").await;
    let page = browser
        .destinations("the destination turned off", |p| {
            p.rows.len() == 1 && p.rows[0].health.starts_with("Disabled")
        })
        .await;
    assert_eq!(page.row().toggle, "Enable");
    browser.click("#destinations tbody tr button.delete").await;
    browser.destinations("the confirmation", |p| p.dialog).await;
    browser.click("#dialog-ok").await;
    let page = browser
        .destinations("no destination left", |p| p.empty && p.rows.is_empty())
        .await;
    assert_eq!(page.error, None);
    browser.close().await;
    app.stop().await;
}

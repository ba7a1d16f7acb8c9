//! `/docs`: the interactive API reference (Scalar), opened in headless
//! Chromium to check that its JavaScript really renders the published
//! OpenAPI 3.1 document.
//!
//! The page served by `/docs` carries the whole document as JSON inside a
//! `<script>` tag, so every summary and path is in the raw HTML already. The
//! assertions therefore look only at elements outside `<script>` and
//! `<style>`, which exist only once Scalar has run.

use std::{process::Stdio, time::Duration};

use scraper::{ElementRef, Html, Selector};
use serde_json::{Value, json};
use tocsin_tests::{Reply, StoreKind, TestApp, contract::document, test_tool};

/// How long Chromium may take in all (it usually needs a few seconds).
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

/// Virtual time the page gets before the DOM is dumped. Virtual time runs
/// ahead whenever the page is idle, so slack here costs almost nothing.
const VIRTUAL_TIME_BUDGET_MS: u32 = 15_000;

/// Where Scalar renders `POST /v1/events` (tag `Events`).
const CREATE_EVENT_SECTION: &str = "tag/events/POST/v1/events";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_renders_the_published_document_in_a_browser() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;

    // The premise: the served page has the operation only inside <script>,
    // so finding it below proves the JavaScript rendered it.
    let response = app.get("/docs").await;
    assert_eq!(response.status(), 200);
    let served = response.text().await.expect("body");
    assert!(
        served.contains("Record an event") && served.contains("\"openapi\":\"3.1.0\""),
        "/docs does not embed the published 3.1 document"
    );
    let served = Html::parse_document(&served);
    assert!(
        by_id(&served, CREATE_EVENT_SECTION).is_none()
            && !rendered_text(served.root_element()).contains("Record an event"),
        "the served page already shows the operation without JavaScript; \
         the browser check below would prove nothing"
    );
    drop(served);

    // Scalar expands only the first tag (Events) at first; a link to the
    // operation opens its tag, as a reader following one would see it.
    let dump = headless_chromium_dom(&app.url(&format!("/docs#{CREATE_EVENT_SECTION}"))).await;
    let dom = Html::parse_document(&dump.dom);
    let headings = texts(&dom, ".section-header-label");
    let context = || {
        format!(
            "\nheadings rendered: {headings:?}\nvisible text (start): {:.2000}\nChromium stderr (end): {}",
            rendered_text(dom.root_element()),
            dump.stderr_tail()
        )
    };

    // The document's metadata, as Scalar shows it: the 3.1 document is the
    // one loaded (poem-openapi's own would say OAS 3.0.0).
    assert!(
        headings.iter().any(|h| h == "Tocsin event alerting API"),
        "the API title is not rendered{}",
        context()
    );
    let badges = texts(&dom, ".badge");
    assert!(
        badges.iter().any(|b| b == "OAS 3.1.0") && badges.iter().any(|b| b == "v1.0.0"),
        "the OpenAPI and API versions are not rendered as 3.1.0 / 1.0.0: {badges:?}{}",
        context()
    );

    // The operation: its own section, with its summary as heading, its
    // method and path, and an entry in the sidebar.
    let section = by_id(&dom, CREATE_EVENT_SECTION)
        .unwrap_or_else(|| panic!("no section {CREATE_EVENT_SECTION:?} rendered{}", context()));
    assert_eq!(
        section.value().name(),
        "section",
        "{CREATE_EVENT_SECTION:?} is not a section{}",
        context()
    );
    let in_section = |css: &str| format!(r#"section[id="{CREATE_EVENT_SECTION}"] {css}"#);
    let heading = texts(&dom, &in_section("h3.section-header-label"));
    assert_eq!(
        heading.first().map(String::as_str),
        Some("Record an event"),
        "the operation's heading{}",
        context()
    );
    // Its description is Markdown, turned into HTML by the page.
    let code = texts(&dom, &in_section("code"));
    assert!(
        code.iter().any(|c| c == "notify"),
        "the operation's description is not rendered from Markdown: <code> in the section: \
         {code:?}{}",
        context()
    );
    let section_text = rendered_text(section);
    assert!(
        section_text.contains("POST") && section_text.contains("/v1/events"),
        "the operation's method and path are not rendered: {section_text:.500}"
    );
    let sidebar = by_id(&dom, &format!("sidebar-{CREATE_EVENT_SECTION}"))
        .map(rendered_text)
        .unwrap_or_default();
    assert!(
        sidebar.contains("Record an event"),
        "the sidebar has no entry for the operation: {sidebar:?}{}",
        context()
    );
}

/// What a reader meets before clicking anything: the page's own title, the
/// tags in reading order (Events open first, Devices after), and "Test
/// Request" set up for a bearer key, with a field to paste it into.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_is_titled_lists_events_first_and_asks_for_a_bearer_key() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let dump = headless_chromium_dom(&app.url("/docs")).await;
    let dom = Html::parse_document(&dump.dom);
    let context = || {
        format!(
            "\nvisible text (start): {:.2000}\nChromium stderr (end): {}",
            rendered_text(dom.root_element()),
            dump.stderr_tail()
        )
    };

    assert_eq!(texts(&dom, "head > title"), ["Tocsin API"], "{}", context());

    // The sidebar's tag entries, in the order they are rendered.
    let tags: Vec<String> = select(&dom, r#"[id^="sidebar-tag/"]"#)
        .into_iter()
        .filter_map(|e| e.value().id())
        .filter_map(|id| id.strip_prefix("sidebar-tag/"))
        .filter(|rest| !rest.contains('/'))
        .map(String::from)
        .collect();
    let position = |tag: &str| {
        tags.iter()
            .position(|t| t == tag)
            .unwrap_or_else(|| panic!("no {tag:?} in the navigation: {tags:?}{}", context()))
    };
    assert_eq!(position("events"), 0, "Events is not first: {tags:?}");
    assert!(
        position("events") < position("devices"),
        "Devices comes before Events: {tags:?}"
    );

    // Each auth panel names its selected scheme after a screen-reader label.
    let selected: Vec<String> = texts(&dom, "button")
        .into_iter()
        .filter_map(|b| {
            b.strip_prefix("Selected Auth Type:")
                .map(|s| s.trim().to_owned())
        })
        .collect();
    assert!(
        !selected.is_empty() && selected.iter().all(|s| s == "bearerAuth"),
        "the selected auth is not bearerAuth everywhere: {selected:?}{}",
        context()
    );
    let page = rendered_text(dom.root_element());
    assert!(
        !page.contains("No authentication selected"),
        "a panel says no authentication is selected{}",
        context()
    );
    let token_fields = select(&dom, r#"input[placeholder="Token"]"#);
    assert!(
        !token_fields.is_empty() && page.contains("Bearer Token"),
        "no Bearer Token field to paste a key into{}",
        context()
    );
}

/// "Test Request" sends the sample body Scalar builds from the document, so
/// each one must be a body the service accepts: built here as Scalar builds
/// it, then posted with a real key.
#[tokio::test]
async fn every_sample_body_the_docs_page_sends_is_accepted() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = app.new_key().await;
    let doc = document(&app).await;
    let mut bodies = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let Some(media) = op.pointer("/requestBody/content/application~1json") else {
                continue;
            };
            // The admin API's bodies go to objects named in the path (and
            // take an admin token): its samples are sent, with real ids, by
            // the in_process protocol and admin tests.
            if path.starts_with("/admin/") {
                continue;
            }
            bodies += 1;
            let body = media
                .get("example")
                .cloned()
                .or_else(|| {
                    media["examples"]
                        .as_object()
                        .and_then(|e| e.values().next())
                        .map(|e| e["value"].clone())
                })
                .unwrap_or_else(|| scalar_sample(&media["schema"], &doc));
            // The one body that changes something named in the path: a
            // device's rules, sent to a device the test registers.
            let (method, path) = match (method.as_str(), path.as_str()) {
                ("post", _) => (reqwest::Method::POST, path.clone()),
                // An increment names its insight in the body.
                ("patch", "/v1/insights") => (reqwest::Method::PATCH, path.clone()),
                ("patch", "/v1/devices/{id}") => {
                    let device = json!({ "token": "ef".repeat(32), "environment": "sandbox" });
                    let registered = Reply::of(app.post("/v1/devices", &key, &device).await).await;
                    let id = registered.body["data"]["id"]
                        .as_str()
                        .expect("id")
                        .to_owned();
                    (reqwest::Method::PATCH, format!("/v1/devices/{id}"))
                }
                _ => panic!("{method} {path} reads a body this test does not know how to send"),
            };
            let reply = app.call(method.clone(), &path, &key, Some(&body)).await;
            assert!(
                reply.status == 200 || reply.status == 201,
                "{method} {path} with the docs' sample {body} answered {}: {}",
                reply.status,
                reply.body
            );
        }
    }
    assert!(bodies >= 3, "only {bodies} operations read a body");
}

/// The value Scalar's example generator gives for `schema`: its first
/// example, else its example, default or first enum value, else one built
/// from its properties or items, else a blank of its type.
fn scalar_sample(schema: &Value, doc: &Value) -> Value {
    if let Some(reference) = schema["$ref"].as_str() {
        let target = reference.strip_prefix('#').expect("a local reference");
        return scalar_sample(doc.pointer(target).expect("the reference resolves"), doc);
    }
    if let Some(first) = schema["examples"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    for key in ["example", "default"] {
        if let Some(value) = schema.get(key) {
            return value.clone();
        }
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    // A union shows its first variant (the device body: APNs, the default kind).
    for key in ["allOf", "oneOf", "anyOf"] {
        if let Some(first) = schema[key].as_array().and_then(|s| s.first()) {
            return scalar_sample(first, doc);
        }
    }
    if let Some(properties) = schema["properties"].as_object() {
        return Value::Object(
            properties
                .iter()
                .map(|(name, property)| (name.clone(), scalar_sample(property, doc)))
                .collect(),
        );
    }
    match schema["type"].as_str() {
        Some("array") => json!([scalar_sample(&schema["items"], doc)]),
        Some("object") => json!({}),
        Some("string") => json!(""),
        Some("boolean") => json!(true),
        Some("integer" | "number") => schema.get("minimum").cloned().unwrap_or(json!(1)),
        _ => Value::Null,
    }
}

/// What `chromium --dump-dom` printed.
struct Dump {
    dom: String,
    stderr: String,
}

impl Dump {
    fn stderr_tail(&self) -> &str {
        let start = self.stderr.len().saturating_sub(4000);
        let start = (start..=self.stderr.len())
            .find(|&i| self.stderr.is_char_boundary(i))
            .unwrap_or(0);
        &self.stderr[start..]
    }
}

/// Loads `url` in headless Chromium, lets its scripts run, and returns the
/// resulting DOM. Nothing leaves the machine: every host name but the
/// loopback fails to resolve at once, so fonts from a CDN cannot hang it.
async fn headless_chromium_dom(url: &str) -> Dump {
    // An absolute default: the workspace root is not prepended to it.
    let chromium = test_tool("CHROMIUM", "/usr/bin/chromium");
    let profile = tempfile::tempdir().expect("profile dir");
    let mut command = tokio::process::Command::new(&chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}"))
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout can take the renderer and
        // the other helpers down with it.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap_or_else(|e| {
        panic!(
            "{} does not start ({e}): run scripts/install-test-tools (or set CHROMIUM)",
            chromium.display()
        )
    });
    let group = child.id().expect("a running child has an id");
    let stdout = read_all(child.stdout.take().expect("piped stdout"));
    let stderr = read_all(child.stderr.take().expect("piped stderr"));
    let started = std::time::Instant::now();
    let status = tokio::time::timeout(CHROMIUM_TIMEOUT, child.wait()).await;
    if status.is_err() {
        // Chromium itself, then the renderer and other helpers.
        let _ = child.start_kill();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .status();
    }
    let dump = Dump {
        dom: collect(stdout).await,
        stderr: collect(stderr).await,
    };
    let Ok(status) = status else {
        panic!(
            "Chromium did not finish loading {url} within {CHROMIUM_TIMEOUT:?}; killed it. \
             Its stderr (end):\n{}",
            dump.stderr_tail()
        );
    };
    let status = status.expect("waited for Chromium");
    assert!(
        status.success(),
        "Chromium failed on {url} ({status}) after {:?}; its stderr (end):\n{}",
        started.elapsed(),
        dump.stderr_tail()
    );
    assert!(
        !dump.dom.trim().is_empty(),
        "Chromium printed no DOM for {url}; its stderr (end):\n{}",
        dump.stderr_tail()
    );
    eprintln!(
        "headless Chromium rendered {url} in {:.1?}",
        started.elapsed()
    );
    dump
}

/// Reads a pipe to its end in the background, so neither pipe can fill up
/// and stall Chromium.
fn read_all(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> tokio::task::JoinHandle<String> {
    tokio::spawn(async move {
        let mut bytes = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut pipe, &mut bytes).await;
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// What a reader got; a helper still holding the pipe open cannot hang the
/// test.
async fn collect(reader: tokio::task::JoinHandle<String>) -> String {
    match tokio::time::timeout(Duration::from_secs(10), reader).await {
        Ok(text) => text.expect("pipe reader"),
        Err(_) => "(the pipe stayed open after Chromium exited)".into(),
    }
}

/// The elements matching `css`.
fn select<'a>(dom: &'a Html, css: &str) -> Vec<ElementRef<'a>> {
    let selector =
        Selector::parse(css).unwrap_or_else(|e| panic!("invalid CSS selector {css:?}: {e}"));
    dom.select(&selector).collect()
}

/// The element with this `id` (which may hold `/`, so no `#id` selector).
fn by_id<'a>(dom: &'a Html, id: &str) -> Option<ElementRef<'a>> {
    select(dom, &format!(r#"[id="{id}"]"#)).into_iter().next()
}

/// The rendered text of each element matching `css`.
fn texts(dom: &Html, css: &str) -> Vec<String> {
    select(dom, css).into_iter().map(rendered_text).collect()
}

/// The text of `element` and its descendants, whitespace collapsed, leaving
/// out what is inside `<script>` and `<style>`: that is data and code, not
/// text on the page.
fn rendered_text(element: ElementRef) -> String {
    let mut text = String::new();
    for node in element.descendants() {
        let Some(piece) = node.value().as_text() else {
            continue;
        };
        let hidden = node
            .ancestors()
            .filter_map(ElementRef::wrap)
            .any(|e| matches!(e.value().name(), "script" | "style"));
        if !hidden {
            text.push_str(piece);
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

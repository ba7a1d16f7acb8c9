//! `/docs`: the interactive API reference (Scalar), opened in headless
//! Chromium to check that its JavaScript really renders the published
//! OpenAPI 3.1 document.
//!
//! The page served by `/docs` carries the whole document as JSON inside a
//! `<script>` tag, so every summary and path is in the raw HTML already. The
//! assertions therefore look only at elements outside `<script>` and
//! `<style>`, which exist only once Scalar has run.

use std::{process::Stdio, time::Duration};

use tocsin_tests::{StoreKind, TestApp, test_tool};

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
    let response = app.client.get(app.url("/docs")).send().await.expect("sent");
    assert_eq!(response.status(), 200);
    let served = response.text().await.expect("body");
    assert!(
        served.contains("Record an event") && served.contains("\"openapi\":\"3.1.0\""),
        "/docs does not embed the published 3.1 document"
    );
    let served = Dom::parse(&served);
    assert!(
        served.by_id(CREATE_EVENT_SECTION).is_none()
            && !served.visible_text().contains("Record an event"),
        "the served page already shows the operation without JavaScript; \
         the browser check below would prove nothing"
    );

    // Scalar expands only the first tag (Devices) at first; a link to the
    // operation opens its tag, as a reader following one would see it.
    let dump = headless_chromium_dom(&app.url(&format!("/docs#{CREATE_EVENT_SECTION}"))).await;
    let dom = Dom::parse(&dump.dom);
    let context = || {
        format!(
            "\nheadings rendered: {:?}\nvisible text (start): {:.2000}\nChromium stderr (end): {}",
            dom.texts_of_class("section-header-label"),
            dom.visible_text(),
            dump.stderr_tail()
        )
    };

    // The document's metadata, as Scalar shows it: the 3.1 document is the
    // one loaded (poem-openapi's own would say OAS 3.0.0).
    let headings = dom.texts_of_class("section-header-label");
    assert!(
        headings.iter().any(|h| h == "Tocsin event alerting API"),
        "the API title is not rendered{}",
        context()
    );
    let badges = dom.texts_of_class("badge");
    assert!(
        badges.iter().any(|b| b == "OAS 3.1.0") && badges.iter().any(|b| b == "v1.0.0"),
        "the OpenAPI and API versions are not rendered as 3.1.0 / 1.0.0: {badges:?}{}",
        context()
    );

    // The operation: its own section, with its summary as heading, its
    // method and path, and an entry in the sidebar.
    let section = dom
        .by_id(CREATE_EVENT_SECTION)
        .unwrap_or_else(|| panic!("no section {CREATE_EVENT_SECTION:?} rendered{}", context()));
    assert_eq!(section.name, "section");
    let heading = dom
        .descendants(section)
        .find(|e| e.name == "h3" && e.has_class("section-header-label"))
        .map(|e| e.text())
        .unwrap_or_default();
    assert_eq!(heading, "Record an event", "{}", context());
    // Its description is Markdown, turned into HTML by the page.
    assert!(
        dom.descendants(section)
            .any(|e| e.name == "code" && e.text() == "notify"),
        "the operation's description is not rendered from Markdown{}",
        context()
    );
    let section_text = section.text();
    assert!(
        section_text.contains("POST") && section_text.contains("/v1/events"),
        "the operation's method and path are not rendered: {section_text:.500}"
    );
    let sidebar = dom
        .by_id(&format!("sidebar-{CREATE_EVENT_SECTION}"))
        .map(|e| e.text())
        .unwrap_or_default();
    assert!(
        sidebar.contains("Record an event"),
        "the sidebar has no entry for the operation: {sidebar:?}{}",
        context()
    );
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

/// A serialised DOM as a flat list of elements, each knowing its parent.
/// Enough of HTML for what Chromium's serialiser writes; the contents of
/// `<script>` and `<style>` are dropped, so only rendered text remains.
struct Dom {
    elements: Vec<Element>,
}

struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    parent: Option<usize>,
    /// The text of the element and all its descendants.
    text: String,
}

impl Element {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn has_class(&self, class: &str) -> bool {
        self.attr("class")
            .is_some_and(|c| c.split_ascii_whitespace().any(|c| c == class))
    }

    /// The text with whitespace collapsed.
    fn text(&self) -> String {
        self.text.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

const VOID_ELEMENTS: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

impl Dom {
    fn parse(html: &str) -> Self {
        let mut elements: Vec<Element> = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        let mut rest = html;
        while !rest.is_empty() {
            let Some(lt) = rest.find('<') else {
                add_text(&mut elements, &open, rest);
                break;
            };
            add_text(&mut elements, &open, &rest[..lt]);
            rest = &rest[lt..];
            if let Some(after) = rest.strip_prefix("<!--") {
                rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            } else if rest.starts_with("<!") || rest.starts_with("<?") {
                rest = rest.find('>').map_or("", |end| &rest[end + 1..]);
            } else if let Some(after) = rest.strip_prefix("</") {
                let end = after.find('>').unwrap_or(after.len());
                let name = after[..end].trim().to_ascii_lowercase();
                if let Some(depth) = open.iter().rposition(|&i| elements[i].name == name) {
                    open.truncate(depth);
                }
                rest = after.get(end + 1..).unwrap_or("");
            } else if rest[1..].starts_with(|c: char| c.is_ascii_alphabetic()) {
                let (name, attrs, self_closing, after) = start_tag(&rest[1..]);
                rest = after;
                if name == "script" || name == "style" {
                    let close = format!("</{name}");
                    rest = find_ascii_case_insensitive(rest, &close).map_or("", |at| &rest[at..]);
                    continue;
                }
                elements.push(Element {
                    parent: open.last().copied(),
                    attrs,
                    text: String::new(),
                    name,
                });
                let index = elements.len() - 1;
                if !self_closing && !VOID_ELEMENTS.contains(&elements[index].name.as_str()) {
                    open.push(index);
                }
            } else {
                add_text(&mut elements, &open, "<");
                rest = &rest[1..];
            }
        }
        Self { elements }
    }

    fn by_id(&self, id: &str) -> Option<&Element> {
        self.elements.iter().find(|e| e.attr("id") == Some(id))
    }

    fn texts_of_class(&self, class: &str) -> Vec<String> {
        self.elements
            .iter()
            .filter(|e| e.has_class(class))
            .map(Element::text)
            .collect()
    }

    /// Every element inside `ancestor`.
    fn descendants<'a>(&'a self, ancestor: &'a Element) -> impl Iterator<Item = &'a Element> {
        self.elements.iter().filter(move |e| {
            let mut parent = e.parent;
            while let Some(p) = parent {
                if std::ptr::eq(&self.elements[p], ancestor) {
                    return true;
                }
                parent = self.elements[p].parent;
            }
            false
        })
    }

    /// All text outside `<script>` and `<style>`, whitespace collapsed.
    fn visible_text(&self) -> String {
        self.elements
            .iter()
            .find(|e| e.name == "html")
            .map(Element::text)
            .unwrap_or_default()
    }
}

/// Appends text to every open element, entities decoded.
fn add_text(elements: &mut [Element], open: &[usize], raw: &str) {
    if raw.is_empty() || open.is_empty() {
        return;
    }
    let text = decode_entities(raw);
    for &i in open {
        elements[i].text.push_str(&text);
    }
}

/// Parses a start tag after its `<`: name, attributes, whether it ends in
/// `/>`, and what follows the tag.
fn start_tag(s: &str) -> (String, Vec<(String, String)>, bool, &str) {
    let name_end = s
        .find(|c: char| c.is_ascii_whitespace() || c == '>' || c == '/')
        .unwrap_or(s.len());
    let name = s[..name_end].to_ascii_lowercase();
    let mut rest = &s[name_end..];
    let mut attrs = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("/>") {
            return (name, attrs, true, after);
        }
        if let Some(after) = rest.strip_prefix('>') {
            return (name, attrs, false, after);
        }
        if let Some(after) = rest.strip_prefix('/') {
            rest = after;
            continue;
        }
        if rest.is_empty() {
            return (name, attrs, false, rest);
        }
        let end = rest
            .find(|c: char| c.is_ascii_whitespace() || c == '=' || c == '>' || c == '/')
            .unwrap_or(rest.len())
            .max(1);
        let attr = rest[..end].to_ascii_lowercase();
        rest = rest[end..].trim_start();
        let mut value = String::new();
        if let Some(after) = rest.strip_prefix('=') {
            let after = after.trim_start();
            let (raw, remaining) = match after.chars().next() {
                Some(quote @ ('"' | '\'')) => {
                    let body = &after[1..];
                    let close = body.find(quote).unwrap_or(body.len());
                    (&body[..close], body.get(close + 1..).unwrap_or(""))
                }
                _ => {
                    let close = after
                        .find(|c: char| c.is_ascii_whitespace() || c == '>')
                        .unwrap_or(after.len());
                    (&after[..close], &after[close..])
                }
            };
            value = decode_entities(raw);
            rest = remaining;
        }
        attrs.push((attr, value));
    }
}

fn find_ascii_case_insensitive(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

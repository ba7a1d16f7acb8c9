//! What an event's own content becomes on the feed page, in headless
//! Chromium: a markdown description rendered yet inert whatever it holds,
//! the event's link, and an icon given as a shortcode.

use serde::Deserialize;
use serde_json::{Value, json};
use tocsin_tests::{StoreKind, TestApp};

use crate::browser::{Browser, LOAD_TIMEOUT};

/// Everything a hostile description tries: a script, an image whose error
/// runs code, `javascript:` and `data:` links, event-handler attributes,
/// an iframe, a style, an SVG with a script, a form.
const HOSTILE: &str = "**Bold** claim with [docs](https://docs.example.com/a).\n\n\
<script>window.pwned = 'script'</script>\n\n\
<img src=x onerror=\"window.pwned = 'img'\">\n\n\
[click me](javascript:window.pwned='link') [data](data:text/html,<script>1</script>)\n\n\
<a href=\"https://ok.example\" onclick=\"window.pwned = 'onclick'\">a</a> \
<b onmouseover=\"window.pwned = 'hover'\">hover</b>\n\n\
<iframe src=\"javascript:window.parent.pwned='iframe'\"></iframe>\n\n\
<svg onload=\"window.pwned = 'svg'\"><script>window.pwned = 'svg-script'</script></svg>\n\n\
<style>body { display: none }</style>\n\n\
![pixel](https://tracker.example/p.gif)";

/// The rendered description, read from the DOM in one script.
const SNAPSHOT: &str = r#"
const li = [...document.querySelectorAll('#events > li.event')]
  .find((li) => li.querySelector('.title')?.textContent === 'Hostile');
if (!li) return null;
const desc = li.querySelector('.desc');
const all = [...desc.querySelectorAll('*')];
return {
  markdown: desc.classList.contains('markdown'),
  text: desc.textContent,
  tags: [...new Set(all.map((e) => e.localName))].sort(),
  handlers: all.flatMap((e) => [...e.attributes].map((a) => a.name)).filter((n) => n.startsWith('on')),
  links: [...desc.querySelectorAll('a')].map((a) => ({ href: a.getAttribute('href'), rel: a.rel })),
  bold: desc.querySelector('strong')?.textContent ?? null,
  link: li.querySelector('a.link')?.href ?? null,
  icon: li.querySelector('.icon').textContent,
  pwned: window.pwned ?? null,
  hidden: getComputedStyle(document.body).display === 'none',
};
"#;

#[derive(Debug, Deserialize)]
struct Rendered {
    markdown: bool,
    text: String,
    tags: Vec<String>,
    handlers: Vec<String>,
    links: Vec<Link>,
    bold: Option<String>,
    link: Option<String>,
    icon: String,
    pwned: Option<String>,
    hidden: bool,
}

#[derive(Debug, Deserialize)]
struct Link {
    href: Option<String>,
    rel: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_markdown_description_renders_as_inert_text() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = app.new_key().await;
    post(
        &app,
        &key,
        json!({ "channelName": "security", "title": "Hostile", "description": HOSTILE,
            "parser": "markdown", "icon": ":rotating_light:",
            "url": "https://status.example.com/incidents/7", "notify": false }),
    )
    .await;

    let browser = Browser::opened_at(&app.url(&format!("/#key={key}"))).await;
    let page: Option<Rendered> = browser
        .wait_for(
            SNAPSHOT,
            LOAD_TIMEOUT,
            "the hostile event",
            |p: &Option<Rendered>| p.is_some(),
        )
        .await;
    let page = page.expect("shown");
    // Hover and click everything a person could, then look again.
    browser
        .script(
            "for (const e of document.querySelectorAll('#events .desc *')) { \
               e.dispatchEvent(new MouseEvent('mouseover', { bubbles: true })); } \
             return null;",
        )
        .await;
    for link in &page.links {
        if let Some(href) = &link.href {
            assert!(
                href.starts_with("https://") || href.starts_with("http://"),
                "a link that is not http(s): {href}"
            );
        }
        assert_eq!(link.rel, "noopener noreferrer", "{link:?}");
    }
    assert!(page.markdown, "the description is rendered as markdown");
    assert_eq!(
        page.bold.as_deref(),
        Some("Bold"),
        "markdown's own tags stay"
    );
    let allowed = ["a", "p", "strong"];
    for tag in &page.tags {
        assert!(
            allowed.contains(&tag.as_str()),
            "<{tag}> in the description: {page:?}"
        );
    }
    assert!(
        page.handlers.is_empty(),
        "event handlers: {:?}",
        page.handlers
    );
    // The raw HTML is there to read, as text.
    assert!(
        page.text
            .contains("<script>window.pwned = 'script'</script>"),
        "{}",
        page.text
    );
    assert!(page.text.contains("<img src=x onerror="), "{}", page.text);
    assert_eq!(
        page.link.as_deref(),
        Some("https://status.example.com/incidents/7")
    );
    assert_eq!(page.icon, "🚨", "the shortcode is shown as its emoji");

    let after: Option<Rendered> = browser
        .wait_for(
            SNAPSHOT,
            LOAD_TIMEOUT,
            "the page after hovering",
            |p: &Option<Rendered>| p.is_some(),
        )
        .await;
    let after = after.expect("still shown");
    assert_eq!(after.pwned, None, "something in the description ran");
    assert!(!after.hidden, "a style in the description applied");
    browser.screenshot("feed-markdown.png").await;
    browser.close().await;
}

/// POSTs an event and returns its `data`.
async fn post(app: &TestApp, key: &str, body: Value) -> Value {
    let response = app.post_event(key, &body).await;
    let status = response.status();
    let answer: Value = response.json().await.expect("a JSON answer");
    assert_eq!(status, 201, "POST /v1/events {body}: {answer}");
    answer["data"].clone()
}

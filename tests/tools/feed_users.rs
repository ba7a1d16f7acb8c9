//! The feed's users in a real headless Chromium: a user's chip on any of
//! its events opens its view, with its properties, aliases, first and last
//! seen, event count and its events newest first (those recorded under an
//! alias too, paged, and a new one live); and the list of users, most
//! recently seen first, searched by id or alias.

use std::time::Duration;

use fantoccini::Locator;
use serde::Deserialize;
use serde_json::{Value, json};
use tocsin_tests::{Reply, StoreKind, TestApp, TestConfig};

use crate::browser::{Browser, LOAD_TIMEOUT};

/// Where the screenshot of a user's view is kept for people to look at.
const SCREENSHOT: &str = "/work/notes/user-view.png";

/// The user view (or the list of users) as the page shows it.
const SNAPSHOT: &str = r#"
const shown = (id) => !document.getElementById(id).hidden;
const text = (id) => document.getElementById(id).textContent;
const time = (id) => { const t = document.querySelector('#' + id + ' time'); return t ? t.dateTime : null; };
return {
  feed: shown('feed'),
  view: shown('user-view'),
  list: shown('users-view'),
  title: text('user-title'),
  count: text('user-count'),
  first: time('user-first'),
  last: time('user-last'),
  aliases: [...document.querySelectorAll('#user-aliases li')].map((li) => li.textContent),
  properties: [...document.querySelectorAll('#user-properties > div')].map((d) =>
    [d.querySelector('dt').textContent, d.querySelector('dd').textContent]),
  timeline: [...document.querySelectorAll('#user-events > li.event')].map((li) =>
    li.querySelector('.title').textContent),
  more: shown('user-more'),
  users: [...document.querySelectorAll('#users-list .user-open')].map((b) => b.textContent),
  error: shown('error') ? text('error') : null,
};
"#;

#[derive(Debug, Deserialize)]
struct Page {
    feed: bool,
    view: bool,
    list: bool,
    title: String,
    count: String,
    first: Option<String>,
    last: Option<String>,
    aliases: Vec<String>,
    properties: Vec<(String, String)>,
    timeline: Vec<String>,
    more: bool,
    users: Vec<String>,
    error: Option<String>,
}

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> Value {
    let reply = Reply::of(app.post(path, key, &body).await).await;
    assert!(reply.status < 300, "POST {path} {body}: {}", reply.body);
    reply.body["data"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_chip_opens_its_view_with_its_counts_and_its_timeline() {
    let mut test = TestConfig::new(StoreKind::Sqlite);
    test.config.rate_limit_per_minute = 10_000.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let (key, _) = app.new_key().await;
    let event = |title: &str, user: &str| json!({ "channelName": "journeys", "title": title, "userId": user, "notify": false });
    // A backfilled first visit, before anyone knew who it was.
    let mut visit = event("Visited the pricing page", "anon-7f3a");
    visit["icon"] = json!("👀");
    visit["timestamp"] = json!("2026-01-05T09:30:00.000Z");
    let first = post(&app, &key, "/v1/events", visit).await;
    post(
        &app,
        &key,
        "/v1/events",
        event("Started a trial", "anon-7f3a"),
    )
    .await;
    // Enough steps that the timeline pages (20 at a time).
    for n in 1..=20 {
        post(
            &app,
            &key,
            "/v1/events",
            event(&format!("Opened report {n}"), "ada"),
        )
        .await;
    }
    post(
        &app,
        &key,
        "/v1/identify",
        json!({ "user_id": "ada",
        "properties": { "plan": "pro", "seats": 3, "company": "Analytical Engines" },
        "aliases": ["anon-7f3a", "ada@example.com"] }),
    )
    .await;
    let mut paid = event("Upgraded to Pro", "ada@example.com");
    paid["icon"] = json!("💳");
    post(&app, &key, "/v1/events", paid).await;
    post(&app, &key, "/v1/events", event("Signed up", "grace")).await;
    let user = Reply::of(app.get_as("/v1/users/ada", &key).await)
        .await
        .body["data"]
        .clone();
    assert_eq!(user["eventCount"], 23, "{user}");

    let browser = Browser::opened_at(&app.url(&format!("/#key={key}"))).await;
    browser
        .client
        .wait()
        .at_most(LOAD_TIMEOUT)
        .for_element(Locator::Css("#events li.event .meta .user"))
        .await
        .expect("the feed lists events with user chips");
    // The chip of the alias's event opens the user it names.
    browser
        .script(
            "[...document.querySelectorAll('#events li.event')]\
             .find((li) => li.querySelector('.title').textContent === 'Upgraded to Pro')\
             .querySelector('.meta .user').click(); return null",
        )
        .await;
    let page = browser
        .wait_users(LOAD_TIMEOUT, "the user's view", |p| {
            p.view && p.title == "ada" && p.timeline.len() == 20
        })
        .await;
    assert!(!page.feed && !page.list, "{page:?}");
    assert_eq!(page.error, None);
    assert_eq!(page.count, "23");
    // First seen: the backfilled visit under the alias.
    assert_eq!(page.first.as_deref(), first["createdAt"].as_str());
    assert_eq!(page.first.as_deref(), user["firstSeenAt"].as_str());
    assert_eq!(page.last.as_deref(), user["lastSeenAt"].as_str());
    assert_eq!(page.aliases, ["anon-7f3a", "ada@example.com"]);
    assert_eq!(
        page.properties,
        [
            ("company".to_owned(), "Analytical Engines".to_owned()),
            ("plan".into(), "pro".into()),
            ("seats".into(), "3".into()),
        ]
    );
    assert_eq!(page.timeline[0], "Upgraded to Pro");
    assert_eq!(page.timeline[1], "Opened report 20");
    assert!(page.more, "no way to older events");
    browser.screenshot("user-view.png").await;
    save_screenshot(&browser).await;

    // Older events: the alias's first visit at the end.
    browser.click("#user-more").await;
    let page = browser
        .wait_users(LOAD_TIMEOUT, "the older events", |p| {
            p.timeline.len() == 23 && !p.more
        })
        .await;
    assert_eq!(
        page.timeline[20..],
        [
            "Opened report 1",
            "Started a trial",
            "Visited the pricing page"
        ]
    );

    // A new event under an alias, live: first in the timeline, counted.
    post(
        &app,
        &key,
        "/v1/events",
        event("Invited a teammate", "anon-7f3a"),
    )
    .await;
    let page = browser
        .wait_users(Duration::from_secs(5), "the live event", |p| {
            p.timeline.first().map(String::as_str) == Some("Invited a teammate")
        })
        .await;
    assert_eq!(page.count, "24");

    // Back to the feed, then the list of users: most recently seen first,
    // searched by alias.
    browser.click("#user-back").await;
    browser
        .wait_users(LOAD_TIMEOUT, "the feed again", |p| p.feed && !p.view)
        .await;
    browser.click("#users-open").await;
    let page = browser
        .wait_users(LOAD_TIMEOUT, "the list of users", |p| {
            p.list && p.users.len() == 2
        })
        .await;
    assert_eq!(page.users, ["👤 ada", "👤 grace"]);
    let search = browser
        .client
        .find(Locator::Css("#users-search"))
        .await
        .expect("a search box");
    search.send_keys("EXAMPLE.COM").await.expect("typed");
    browser
        .wait_users(LOAD_TIMEOUT, "the search result", |p| p.users == ["👤 ada"])
        .await;
    browser.click("#users-list .user-open").await;
    browser
        .wait_users(LOAD_TIMEOUT, "ada's view from the list", |p| {
            p.view && p.title == "ada" && p.count == "24"
        })
        .await;
    // On a phone's width nothing runs off the side.
    browser.assert_fits_a_phone("user-view-phone.png").await;
    browser.close().await;
}

/// Keeps the user view's screenshot where people look for it.
async fn save_screenshot(browser: &Browser) {
    let png = browser.client.screenshot().await.expect("a screenshot");
    let path = std::path::Path::new(SCREENSHOT);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("the notes folder");
    }
    std::fs::write(path, png).expect("the screenshot is saved");
    eprintln!("screenshot: {SCREENSHOT}");
}

impl Browser {
    async fn wait_users(
        &self,
        timeout: Duration,
        what: &str,
        ready: impl Fn(&Page) -> bool,
    ) -> Page {
        self.wait_for(SNAPSHOT, timeout, what, ready).await
    }
}

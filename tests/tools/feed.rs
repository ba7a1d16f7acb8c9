//! The feed page (`GET /`) in a real headless Chromium: opened with a key
//! in its fragment, it lists the project's events, shows a new one live
//! from the stream without reloading, filters by channel, tag and search,
//! loads older events with the cursor, and says plainly when a key is wrong
//! or lacks `events:read`.
//! The browser is headless Chromium over WebDriver (browser.rs).

use std::time::Duration;

use common::store::KeyScope;
use fantoccini::Locator;
use serde::Deserialize;
use serde_json::{Value, json};
use tocsin_tests::{StoreKind, TestApp, TestConfig, proxy::Proxy};

use crate::browser::{Browser, LOAD_TIMEOUT};

/// The issue's promise: a posted event is on the page within two seconds.
const LIVE_WITHIN: Duration = Duration::from_secs(2);

/// The page's first request asks for this many events.
const PAGE_SIZE: usize = 50;

/// What the page shows, read from its DOM in one script.
const SNAPSHOT: &str = r#"
const text = (root, css) => { const e = root.querySelector(css); return e ? e.textContent : null; };
const shown = (id) => !document.getElementById(id).hidden;
return {
  items: [...document.querySelectorAll('#events > li.event')].map((li) => ({
    id: li.dataset.id,
    title: text(li, '.title'),
    icon: text(li, '.icon'),
    description: text(li, '.desc'),
    channel: text(li, '.meta .channel'),
    tags: [...li.querySelectorAll('.meta .tag')].map((t) => t.textContent),
    user: text(li, '.meta .user'),
    time: text(li, 'time'),
  })),
  channels: [...document.querySelectorAll('#channels button')].map((b) => ({
    channel: b.dataset.channel,
    label: text(b, '.name'),
    count: text(b, '.count'),
    pressed: b.getAttribute('aria-pressed') === 'true',
  })),
  bars: [...document.querySelectorAll('#chart rect')].map((r) => !r.classList.contains('zero')),
  caption: text(document, '#chart-caption'),
  error: shown('error') ? text(document, '#error') : null,
  login: shown('login'),
  live: text(document, '#live'),
  more: shown('more'),
  url: location.href,
  stored: localStorage.getItem('tocsin.key'),
  marker: window.feedTestMarker === undefined ? null : window.feedTestMarker,
};
"#;

#[derive(Debug, Deserialize)]
struct Page {
    items: Vec<Item>,
    channels: Vec<ChannelEntry>,
    /// For each hour bar of the chart: whether it has any event.
    bars: Vec<bool>,
    caption: Option<String>,
    error: Option<String>,
    login: bool,
    live: Option<String>,
    more: bool,
    url: String,
    stored: Option<String>,
    marker: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Item {
    id: String,
    title: Option<String>,
    icon: Option<String>,
    description: Option<String>,
    channel: Option<String>,
    tags: Vec<String>,
    user: Option<String>,
    time: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChannelEntry {
    channel: String,
    label: Option<String>,
    count: Option<String>,
    pressed: bool,
}

impl Page {
    fn titles(&self) -> Vec<&str> {
        self.items
            .iter()
            .map(|i| i.title.as_deref().unwrap_or(""))
            .collect()
    }

    fn item(&self, title: &str) -> &Item {
        self.items
            .iter()
            .find(|i| i.title.as_deref() == Some(title))
            .unwrap_or_else(|| panic!("no event titled {title:?} on the page: {:?}", self.titles()))
    }

    fn channel(&self, channel: &str) -> &ChannelEntry {
        self.channels
            .iter()
            .find(|c| c.channel == channel)
            .unwrap_or_else(|| panic!("no channel {channel:?} listed: {:?}", self.channels))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_shows_events_and_a_new_one_live_and_filters_them() {
    let mut test = TestConfig::new(StoreKind::Sqlite);
    // Fifty-odd events are posted below, and the page reads too.
    test.config.rate_limit_per_minute = 10_000.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let (key, _) = app.new_key().await;

    // Older than a page: the last three only come with "load older".
    for n in 0..PAGE_SIZE {
        post(
            &app,
            &key,
            json!({ "channelName": "batch", "title": format!("Batch job {n}"),
            "notify": false }),
        )
        .await;
    }
    let payment = post(
        &app,
        &key,
        json!({ "channelName": "payments", "title": "Payment failed", "icon": "💸",
            "description": "Card declined", "tags": ["eu", "card"], "userId": "user_7",
            "notify": false }),
    )
    .await;
    post(
        &app,
        &key,
        json!({ "channelName": "payments", "title": "Refund issued", "icon": "↩️",
            "tags": ["us"], "notify": false }),
    )
    .await;
    post(
        &app,
        &key,
        json!({ "channelName": "signups", "title": "New user <b>signed up</b>", "icon": "🎉",
            "description": "From the landing page", "tags": ["eu"], "userId": "user_8",
            "notify": false }),
    )
    .await;

    let browser = Browser::opened_at(&app.url(&format!("/#key={key}"))).await;

    let page = browser
        // The list, the stream and the chart load independently: wait for
        // all three.
        .wait(
            LOAD_TIMEOUT,
            "the first page of events and the chart",
            |p| {
                p.items.len() == PAGE_SIZE
                    && p.live.as_deref() == Some("Live")
                    && !p.bars.is_empty()
            },
        )
        .await;
    // Newest first; the oldest batch jobs wait for the next page.
    assert_eq!(
        &page.titles()[..4],
        [
            "New user <b>signed up</b>",
            "Refund issued",
            "Payment failed",
            "Batch job 49"
        ],
        "the events are not newest first"
    );
    assert!(page.more, "no way to load older events");
    let failed = page.item("Payment failed");
    assert_eq!(failed.id, payment["id"].as_str().expect("an id"));
    assert_eq!(failed.icon.as_deref(), Some("💸"));
    assert_eq!(failed.description.as_deref(), Some("Card declined"));
    assert_eq!(failed.channel.as_deref(), Some("#payments"));
    assert_eq!(failed.tags, ["eu", "card"]);
    assert_eq!(failed.user.as_deref(), Some("👤 user_7"));
    assert_eq!(failed.time.as_deref(), Some("just now"));
    // Titles are text, never markup.
    assert_eq!(
        browser
            .script("return document.querySelectorAll('#events b').length")
            .await,
        json!(0),
        "an event's title was rendered as HTML"
    );
    assert_eq!(page.channel("payments").count.as_deref(), Some("2"));
    assert_eq!(page.channel("batch").count.as_deref(), Some("50"));
    assert_eq!(page.channel("").label.as_deref(), Some("All channels"));
    assert_eq!(page.channel("").count.as_deref(), Some("53"));
    assert!(page.channel("").pressed, "\"All channels\" is not selected");

    // The key left the address bar (and so the history) for local storage.
    assert!(
        !page.url.contains('#') && !page.url.contains(&key),
        "the key is still in the URL: {}",
        page.url
    );
    assert_eq!(page.stored.as_deref(), Some(key.as_str()));

    // The chart: a day of hourly bars, this hour's holding every event.
    assert!(
        (24..=25).contains(&page.bars.len()),
        "{} bars in the chart",
        page.bars.len()
    );
    // Every event is from the last minute: this hour's bar, or the one
    // before if the hour turned since.
    let with_events: Vec<usize> = (0..page.bars.len()).filter(|i| page.bars[*i]).collect();
    assert!(
        !with_events.is_empty() && with_events.iter().all(|i| i + 2 >= page.bars.len()),
        "bars with events: {with_events:?} of {}",
        page.bars.len()
    );
    assert!(
        page.caption
            .as_deref()
            .is_some_and(|c| c.starts_with("53 events in the last 24 h")),
        "chart caption: {:?}",
        page.caption
    );

    // Live: posted through the API, shown without a reload (the marker set
    // on this window survives only if the page was not loaded again).
    browser
        .script("window.feedTestMarker = 'same page'; return null")
        .await;
    let live = post(
        &app,
        &key,
        json!({ "channelName": "deploys", "title": "Deployed v2.4.1", "icon": "🚀",
            "tags": ["prod"], "notify": false }),
    )
    .await;
    let page = browser
        .wait(LIVE_WITHIN, "the new event, live", |p| {
            p.items.first().map(|i| i.id.as_str()) == live["id"].as_str()
        })
        .await;
    assert_eq!(
        page.marker.as_deref(),
        Some("same page"),
        "the page reloaded"
    );
    let shown = page.item("Deployed v2.4.1");
    assert_eq!(shown.icon.as_deref(), Some("🚀"));
    assert_eq!(shown.channel.as_deref(), Some("#deploys"));
    assert_eq!(shown.tags, ["prod"]);
    // The channel list and the chart catch up with it.
    browser
        .wait(LOAD_TIMEOUT, "the new channel counted", |p| {
            p.channels.iter().any(|c| c.channel == "deploys")
                && p.channel("").count.as_deref() == Some("54")
                && p.caption
                    .as_deref()
                    .is_some_and(|c| c.starts_with("54 events"))
        })
        .await;

    browser.screenshot("feed.png").await;

    // On a phone's width nothing runs off the side.
    browser.assert_fits_a_phone("feed-phone.png").await;

    // Older events: scrolling to the end loads the next page by its cursor.
    browser
        .script("document.getElementById('more').scrollIntoView(); return null")
        .await;
    let page = browser
        .wait(LOAD_TIMEOUT, "the older events", |p| {
            p.items.len() == PAGE_SIZE + 4 && !p.more
        })
        .await;
    assert_eq!(
        page.items.last().and_then(|i| i.title.as_deref()),
        Some("Batch job 0")
    );

    // A channel from the list: only its events, and its chart.
    browser
        .click("#channels button[data-channel=\"payments\"]")
        .await;
    let page = browser
        .wait(LOAD_TIMEOUT, "the payments channel alone", |p| {
            p.titles() == ["Refund issued", "Payment failed"]
                && p.caption
                    .as_deref()
                    .is_some_and(|c| c.starts_with("2 events"))
        })
        .await;
    assert!(page.channel("payments").pressed);
    assert!(!page.channel("").pressed);
    assert!(
        page.caption
            .as_deref()
            .is_some_and(|c| c.contains("#payments"))
    );
    // A live event of another channel stays out of this view.
    post(
        &app,
        &key,
        json!({ "channelName": "signups", "title": "Another signup", "notify": false }),
    )
    .await;
    let marker = post(
        &app,
        &key,
        json!({ "channelName": "payments", "title": "Payment retried", "notify": false }),
    )
    .await;
    let page = browser
        .wait(LOAD_TIMEOUT, "the payments event, live", |p| {
            p.items.first().map(|i| i.id.as_str()) == marker["id"].as_str()
        })
        .await;
    assert_eq!(
        page.titles(),
        ["Payment retried", "Refund issued", "Payment failed"]
    );
    // Counted as they come: the channel's bar, and both channels' entries.
    browser
        .wait(LOAD_TIMEOUT, "the live events counted", |p| {
            p.caption
                .as_deref()
                .is_some_and(|c| c.starts_with("3 events"))
                && p.channel("payments").count.as_deref() == Some("3")
                && p.channel("signups").count.as_deref() == Some("2")
                && p.channel("").count.as_deref() == Some("56")
        })
        .await;

    // A tag on an event filters by it, across channels once "All" is back.
    browser.click("#channels button[data-channel=\"\"]").await;
    browser
        .wait(LOAD_TIMEOUT, "every channel again", |p| {
            p.items.len() == PAGE_SIZE
        })
        .await;
    browser
        .click(&format!(
            "#events li[data-id=\"{}\"] .meta .tag",
            payment["id"].as_str().expect("an id")
        ))
        .await;
    browser
        .wait(LOAD_TIMEOUT, "the events tagged eu", |p| {
            p.titles() == ["New user <b>signed up</b>", "Payment failed"]
        })
        .await;
    browser.click("#filters button").await;
    browser
        .wait(LOAD_TIMEOUT, "the tag filter removed", |p| {
            p.items.len() == PAGE_SIZE
        })
        .await;

    // The search box: the API's case-insensitive match on title or
    // description.
    let search = browser
        .client
        .find(Locator::Css("#search"))
        .await
        .expect("a search box");
    search.send_keys("DECLINED").await.expect("typed");
    browser
        .wait(LOAD_TIMEOUT, "the search result", |p| {
            p.titles() == ["Payment failed"]
        })
        .await;
    search.clear().await.expect("cleared");
    search.send_keys("refund").await.expect("typed");
    browser
        .wait(LOAD_TIMEOUT, "the other search result", |p| {
            p.titles() == ["Refund issued"]
        })
        .await;

    // Forgetting the key: back to the form, nothing stored.
    browser.click("#forget").await;
    let page = browser
        .wait(LOAD_TIMEOUT, "the key form", |p| p.login)
        .await;
    assert_eq!(page.stored, None);
    assert!(
        page.items.is_empty(),
        "events still shown: {:?}",
        page.titles()
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_says_when_a_key_is_not_accepted() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let browser = Browser::start().await;

    // A key nobody issued, in the fragment.
    browser
        .client
        .goto(&app.url("/#key=tsn_not-a-real-key"))
        .await
        .expect("the page opens");
    let page = browser
        .wait(LOAD_TIMEOUT, "the refusal", |p| p.error.is_some())
        .await;
    let error = page.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("not accepted") && page.login,
        "a wrong key: {error:?}, key form shown: {}",
        page.login
    );
    assert_eq!(page.stored, None, "the refused key was kept");
    assert!(!page.url.contains("tsn_"), "the key is still in the URL");

    // A real key, pasted into the form: the feed opens.
    let (key, _) = app.new_key().await;
    post(
        &app,
        &key,
        json!({ "channelName": "ops", "title": "Disk full", "notify": false }),
    )
    .await;
    let input = browser
        .client
        .find(Locator::Css("#key-input"))
        .await
        .expect("the key field");
    input.send_keys(&key).await.expect("typed");
    browser.click("#key-form button[type=submit]").await;
    let page = browser
        .wait(LOAD_TIMEOUT, "the feed of the pasted key", |p| {
            p.titles() == ["Disk full"]
        })
        .await;
    assert_eq!(page.error, None, "the earlier error is still shown");
    assert!(!page.login);
    assert_eq!(page.stored.as_deref(), Some(key.as_str()));
    browser.close().await;
}

/// A real key that may record events but not read them: the page names
/// the missing scope, keeps nothing, and offers the key form again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_names_the_missing_events_read_scope() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let key = app
        .create_key_with_scopes("acme", "writer", &[KeyScope::EventsWrite])
        .await;
    post(
        &app,
        &key,
        json!({ "channelName": "ops", "title": "Recorded, not readable", "notify": false }),
    )
    .await;
    let browser = Browser::opened_at(&app.url(&format!("/#key={key}"))).await;
    let page = browser
        .wait(LOAD_TIMEOUT, "the refusal", |p| p.error.is_some())
        .await;
    let error = page.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("lacks the events:read scope") && page.login,
        "a key without events:read: {error:?}, key form shown: {}",
        page.login
    );
    assert!(page.items.is_empty(), "events shown: {:?}", page.titles());
    assert_eq!(page.stored, None, "the refused key was kept");
    browser.close().await;
}

/// The stream drops (the connection is cut between browser and server):
/// the page says so, reconnects with `Last-Event-ID`, and shows what was
/// recorded meanwhile, still without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_catches_up_after_the_stream_drops() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = app.new_key().await;
    let upstream = app
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("the app's address");
    let proxy = Proxy::start(upstream).await;
    let browser = Browser::opened_at(&format!("http://{}/#key={key}", proxy.addr())).await;
    browser
        .wait(LOAD_TIMEOUT, "the empty feed, live", |p| {
            p.live.as_deref() == Some("Live") && p.items.is_empty()
        })
        .await;
    browser
        .script("window.feedTestMarker = 'same page'; return null")
        .await;
    // One event over the stream, so the page knows where it is.
    let first = post(
        &app,
        &key,
        json!({ "channelName": "ops", "title": "Before the cut",
        "notify": false }),
    )
    .await;
    browser
        .wait(LOAD_TIMEOUT, "the first event, live", |p| {
            p.items.first().map(|i| i.id.as_str()) == first["id"].as_str()
        })
        .await;

    proxy.cut();
    browser
        .wait(LOAD_TIMEOUT, "the page to notice the drop", |p| {
            p.live.as_deref() == Some("Reconnecting…")
        })
        .await;
    let missed = post(
        &app,
        &key,
        json!({ "channelName": "ops", "title": "During the cut",
        "notify": false }),
    )
    .await;
    proxy.restore();

    let page = browser
        .wait(LOAD_TIMEOUT, "the event recorded during the cut", |p| {
            p.items.first().map(|i| i.id.as_str()) == missed["id"].as_str()
        })
        .await;
    assert_eq!(page.titles(), ["During the cut", "Before the cut"]);
    assert_eq!(
        page.marker.as_deref(),
        Some("same page"),
        "the page reloaded"
    );
    browser
        .wait(LOAD_TIMEOUT, "the stream live again", |p| {
            p.live.as_deref() == Some("Live")
        })
        .await;
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

impl Browser {
    /// Waits until the feed shows what `ready` looks for, and returns it.
    async fn wait(&self, timeout: Duration, what: &str, ready: impl Fn(&Page) -> bool) -> Page {
        self.wait_for(SNAPSHOT, timeout, what, ready).await
    }
}

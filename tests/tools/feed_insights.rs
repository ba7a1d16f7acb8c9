//! The feed page's insight tiles in a real headless Chromium: the project's
//! insights as tiles above the events (icon, title, value; numbers in the
//! reader's locale), in the API's order, changed live from the stream (an
//! increment through the API, a change written into the store as another
//! replica would, a new insight, a deletion) without reloading the page.
//! The browser is headless Chromium over WebDriver (browser.rs).

use std::time::Duration;

use common::store::{InsightNumber, Scope};
use serde::Deserialize;
use serde_json::{Value, json};
use tocsin_tests::{Reply, StoreKind, TestApp, TestConfig};

use crate::browser::{Browser, LOAD_TIMEOUT};

/// A change is on the page within this long (the feed's own promise for
/// events).
const LIVE_WITHIN: Duration = Duration::from_secs(2);

/// The tiles as the page shows them, and how this browser writes the
/// numbers the test sets (its locale's grouping and decimal marks).
const SNAPSHOT: &str = r#"
const text = (root, css) => { const e = root.querySelector(css); return e ? e.textContent : null; };
return {
  shown: !document.getElementById('insights').hidden,
  tiles: [...document.querySelectorAll('#insight-tiles > li.tile')].map((li) => ({
    title: text(li, '.tile-title'),
    icon: text(li, '.tile-icon'),
    value: text(li, '.tile-value'),
  })),
  events: document.querySelectorAll('#events > li.event').length,
  live: text(document, '#live'),
  local: { revenue: (1234567.5).toLocaleString(), trials: (42).toLocaleString(),
    more: (43).toLocaleString(), replica: (1043).toLocaleString() },
  marker: window.feedTestMarker === undefined ? null : window.feedTestMarker,
  tilesTop: document.getElementById('insights').getBoundingClientRect().top,
  eventsTop: document.getElementById('events').getBoundingClientRect().top,
};
"#;

#[derive(Debug, Deserialize)]
struct Page {
    shown: bool,
    tiles: Vec<Tile>,
    events: usize,
    live: Option<String>,
    local: Local,
    marker: Option<String>,
    #[serde(rename = "tilesTop")]
    tiles_top: f64,
    #[serde(rename = "eventsTop")]
    events_top: f64,
}

#[derive(Debug, Deserialize, PartialEq)]
struct Tile {
    title: Option<String>,
    icon: Option<String>,
    value: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Local {
    revenue: String,
    trials: String,
    more: String,
    replica: String,
}

impl Page {
    fn tile(&self, title: &str) -> Option<&Tile> {
        self.tiles
            .iter()
            .find(|t| t.title.as_deref() == Some(title))
    }

    fn value(&self, title: &str) -> Option<&str> {
        self.tile(title).and_then(|t| t.value.as_deref())
    }

    fn titles(&self) -> Vec<&str> {
        self.tiles
            .iter()
            .map(|t| t.title.as_deref().unwrap_or(""))
            .collect()
    }
}

impl Browser {
    async fn insights(&self, timeout: Duration, what: &str, ready: impl Fn(&Page) -> bool) -> Page {
        self.wait_for(SNAPSHOT, timeout, what, ready).await
    }
}

async fn call(app: &TestApp, key: &str, method: reqwest::Method, path: &str, body: Value) -> Value {
    let reply = app.call(method, path, key, Some(&body)).await;
    assert!(
        (200..300).contains(&reply.status),
        "{path} {body}: {}",
        reply.body
    );
    reply.body["data"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_shows_insights_as_tiles_and_updates_them_live() {
    let mut test = TestConfig::new(StoreKind::Sqlite);
    test.config.rate_limit_per_minute = 10_000.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    let (key, scope): (String, Scope) = app.new_key().await;
    let set = reqwest::Method::POST;
    for (title, value, icon) in [
        ("Revenue today", json!(1234567.5), Some("💰")),
        ("Active trials", json!(42), Some("🧪")),
        ("Build status", json!("passing"), Some("✅")),
        ("Maintenance", json!(false), None),
    ] {
        let mut body = json!({ "title": title, "value": value });
        if let Some(icon) = icon {
            body["icon"] = json!(icon);
        }
        call(&app, &key, set.clone(), "/v1/insights", body).await;
    }
    let event = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "deploys", "title": "Deployed v2.4.1", "icon": "🚀",
                "notify": false }),
        )
        .await,
    )
    .await;
    assert_eq!(event.status, 201, "{}", event.body);

    let browser = Browser::opened_at(&app.url(&format!("/#key={key}"))).await;
    let page = browser
        .insights(LOAD_TIMEOUT, "the tiles and the feed", |p| {
            p.tiles.len() == 4 && p.events == 1 && p.live.as_deref() == Some("Live")
        })
        .await;
    assert!(page.shown);
    // In the API's order (creation), above the events.
    assert_eq!(
        page.titles(),
        [
            "Revenue today",
            "Active trials",
            "Build status",
            "Maintenance"
        ]
    );
    assert!(
        page.tiles_top < page.events_top,
        "the tiles are above the feed"
    );
    assert_eq!(
        page.tile("Revenue today"),
        Some(&Tile {
            title: Some("Revenue today".into()),
            icon: Some("💰".into()),
            value: Some(page.local.revenue.clone()),
        }),
        "the number in the reader's locale"
    );
    assert_eq!(
        page.value("Active trials"),
        Some(page.local.trials.as_str())
    );
    assert_eq!(page.value("Build status"), Some("passing"));
    assert_eq!(page.value("Maintenance"), Some("No"));
    assert_eq!(
        page.tile("Maintenance").and_then(|t| t.icon.clone()),
        None,
        "no icon, no icon element"
    );

    // Live: an increment through the API, on the page without a reload.
    browser
        .script("window.feedTestMarker = 'same page'; return null")
        .await;
    let bumped = call(
        &app,
        &key,
        reqwest::Method::PATCH,
        "/v1/insights",
        json!({ "title": "Active trials", "value": { "$inc": 1 } }),
    )
    .await;
    assert_eq!(bumped["value"], json!(43));
    let page = browser
        .insights(LIVE_WITHIN, "the incremented tile", |p| {
            p.value("Active trials") == Some(p.local.more.as_str())
        })
        .await;
    assert_eq!(
        page.marker.as_deref(),
        Some("same page"),
        "the page reloaded"
    );

    // Written straight into the store, as another replica would.
    app.store
        .increment_insight(
            &scope,
            "Active trials",
            InsightNumber::Integer(1000),
            None,
            common::time::now(),
        )
        .await
        .expect("stored")
        .expect("accepted");
    browser
        .insights(LIVE_WITHIN, "the other replica's increment", |p| {
            p.value("Active trials") == Some(p.local.replica.as_str())
        })
        .await;

    // A new insight joins at the end; a value set again replaces its tile's.
    call(
        &app,
        &key,
        set.clone(),
        "/v1/insights",
        json!({ "title": "Queue depth", "value": 7, "icon": "📬" }),
    )
    .await;
    call(
        &app,
        &key,
        set.clone(),
        "/v1/insights",
        json!({ "title": "Build status", "value": "failing", "icon": "🔴" }),
    )
    .await;
    let page = browser
        .insights(LIVE_WITHIN, "the new tile and the changed one", |p| {
            p.tiles.len() == 5 && p.value("Build status") == Some("failing")
        })
        .await;
    assert_eq!(page.titles().last(), Some(&"Queue depth"));
    assert_eq!(
        page.tile("Build status").and_then(|t| t.icon.as_deref()),
        Some("🔴")
    );

    browser.screenshot("insights-tiles.png").await;
    browser
        .assert_fits_a_phone("insights-tiles-phone.png")
        .await;

    // A deletion takes its tile away.
    let deleted = app.delete_as("/v1/insights/Maintenance", &key).await;
    assert_eq!(deleted.status(), 200);
    let page = browser
        .insights(LIVE_WITHIN, "the deleted tile gone", |p| {
            p.tile("Maintenance").is_none()
        })
        .await;
    assert_eq!(
        page.titles(),
        [
            "Revenue today",
            "Active trials",
            "Build status",
            "Queue depth"
        ]
    );
    assert_eq!(
        page.marker.as_deref(),
        Some("same page"),
        "the page reloaded"
    );
    browser.close().await;
}

/// A project without insights shows no tiles at all, and the first one
/// set appears live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tiles_appear_with_the_first_insight() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = app.new_key().await;
    let browser = Browser::opened_at(&app.url(&format!("/#key={key}"))).await;
    browser
        .insights(LOAD_TIMEOUT, "the feed, live, without tiles", |p| {
            p.live.as_deref() == Some("Live") && !p.shown && p.tiles.is_empty()
        })
        .await;
    call(
        &app,
        &key,
        reqwest::Method::PATCH,
        "/v1/insights",
        json!({ "title": "Signups", "value": { "$inc": 1 } }),
    )
    .await;
    let page = browser
        .insights(LIVE_WITHIN, "the first tile", |p| {
            p.shown && p.tiles.len() == 1
        })
        .await;
    assert_eq!(page.value("Signups"), Some("1"));
    browser.close().await;
}

//! The feed page as an installable web app that takes alerts, in a real
//! headless Chromium (browser.rs): Chromium finds the manifest, its icons
//! and the service worker fit to install; "Notify me in this browser"
//! subscribes through the real service worker registration and registers
//! the subscription as a Web Push device through the API, an event then
//! reaches the loopback push service (tests/push_service.rs) signed and
//! encrypted, and the service worker shows it as a notification; "Stop
//! notifications" removes the device; a key without `devices:write` is
//! told so; the button is not offered without a VAPID key, nor on an
//! iPhone outside a Home Screen app. What a click on an alert opens (the
//! event's link, or the feed) is the worker's own handler run against a
//! stood-in Clients API ([`a_click_opens_the_events_link_or_else_the_feed`]
//! says why). (The device's alert settings on the page, and the worker's
//! tags and digests: feed_rules.rs.)
//!
//! The one stand-in: headless Chromium cannot reach a browser vendor's push
//! service from here (and must not: tests send traffic only to loopback),
//! so `PushManager.prototype.subscribe` is replaced, through WebDriver,
//! just before the click, by one that returns a subscription of the
//! loopback push service (its keys, so it can decrypt what it receives)
//! and records the options it was called with. The page's code around it
//! (permission, worker registration, the POST, the stop) is the real one,
//! and the push the service received is then delivered to the real worker
//! with the DevTools protocol's `ServiceWorker.deliverPushMessage`.

use std::time::Duration;

use common::store::KeyScope;
use serde::Deserialize;
use serde_json::{Value, json};
use tocsin_tests::{
    Embedded, Reply, StoreKind, TestApp, TestConfig, eventually, push_service::PushService,
    test_notifier_config,
};

use crate::browser::{Browser, LOAD_TIMEOUT};

/// An alert's way from the event to the push service and on to the worker.
pub(crate) const DELIVERY: Duration = Duration::from_secs(20);

/// The alerts section as the page shows it.
const SNAPSHOT: &str = r#"
const shown = (id) => { const e = document.getElementById(id); return !!e && !e.hidden; };
return {
  feed: shown('feed'),
  section: shown('notify'),
  status: document.getElementById('notify-status').textContent,
  on: shown('notify-on'),
  off: shown('notify-off'),
  device: localStorage.getItem('tocsin.device'),
  test: window.pushTest === undefined ? null : window.pushTest,
};
"#;

#[derive(Debug, Deserialize)]
struct Alerts {
    feed: bool,
    section: bool,
    status: String,
    on: bool,
    off: bool,
    device: Option<String>,
    test: Option<PushTest>,
}

/// What the stand-in `subscribe` saw.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PushTest {
    /// `applicationServerKey`, base64url, of each call.
    keys: Vec<String>,
    user_visible_only: Vec<bool>,
    unsubscribed: u32,
}

/// Installed in the page before a click: `subscribe` answers with the
/// subscription passed as the script's argument (the push service's),
/// `getSubscription` with it once subscribed.
const STAND_IN: &str = r#"
const subscription = arguments[0];
const test = { keys: [], userVisibleOnly: [], unsubscribed: 0 };
window.pushTest = test;
let current = null;
const made = {
  endpoint: subscription.endpoint,
  expirationTime: null,
  toJSON: () => subscription,
  unsubscribe: async () => { test.unsubscribed += 1; current = null; return true; },
};
PushManager.prototype.subscribe = async function (options) {
  const key = new Uint8Array(options.applicationServerKey);
  test.keys.push(btoa(String.fromCharCode(...key)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''));
  test.userVisibleOnly.push(options.userVisibleOnly === true);
  current = made;
  return made;
};
PushManager.prototype.getSubscription = async function () { return current; };
"#;

impl Browser {
    async fn alerts(&self, what: &str, ready: impl Fn(&Alerts) -> bool) -> Alerts {
        self.wait_for(SNAPSHOT, LOAD_TIMEOUT, what, ready).await
    }

    /// The id Chromium gave the service worker registration of `origin`,
    /// read from its own list (chrome://serviceworker-internals) in a tab
    /// of its own.
    pub(crate) async fn registration_id(&self, origin: &str) -> String {
        let feed = self.client.window().await.expect("the feed's window");
        let tab = self.client.new_window(true).await.expect("a new tab");
        self.client
            .switch_to_window(tab.handle)
            .await
            .expect("to the tab");
        self.client
            .goto("chrome://serviceworker-internals/")
            .await
            .expect("the list of service workers");
        let script = format!(
            "const text = document.body.innerText;\
             const at = text.indexOf('Scope: {origin}/');\
             const id = at < 0 ? null : /Registration ID: (\\d+)/.exec(text.slice(at));\
             return id && id[1];"
        );
        let id: String = self
            .wait_for(
                &script,
                LOAD_TIMEOUT,
                "the registration listed",
                |id: &Option<String>| id.is_some(),
            )
            .await
            .expect("an id");
        self.client.close_window().await.expect("the tab closed");
        self.client
            .switch_to_window(feed)
            .await
            .expect("back to the feed");
        id
    }
}

/// Ingest in embedded mode with a VAPID key, the push service's origin
/// allowed, and the push service expecting the key ingest serves.
pub(crate) async fn app_with_webpush(service: &PushService) -> (TestApp, String) {
    let (private, _) = notifier::push::webpush::vapid::VapidKey::generate();
    let mut notifier = test_notifier_config();
    notifier.vapid_private_key = Some(common::config::Secret::new(private));
    notifier.vapid_subject = Some("mailto:ops@example.com".into());
    notifier.webpush_allowed_endpoints = service.origin();
    let app = TestApp::spawn_with_options(
        TestConfig::new(StoreKind::Sqlite),
        Embedded {
            provider: None,
            notifier,
        },
    )
    .await;
    let key = Reply::of(app.get("/v1/webpush/key").await).await;
    assert_eq!(key.status, 200, "{}", key.body);
    let public_key = key.body["data"]["publicKey"]
        .as_str()
        .expect("a key")
        .to_owned();
    service.expect_key(&public_key);
    (app, public_key)
}

pub(crate) async fn devices(app: &TestApp, key: &str) -> Vec<Value> {
    let reply = Reply::of(app.get_as("/v1/devices", key).await).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body["data"]["devices"]
        .as_array()
        .expect("devices")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_me_registers_this_browser_and_its_worker_shows_the_alert() {
    let service = PushService::start().await;
    let (app, public_key) = app_with_webpush(&service).await;
    let (key, scope) = app.new_key().await;
    let reader = app
        .create_key_with_scopes(&scope.org, &scope.project, &[KeyScope::EventsRead])
        .await;
    let subscription = service.subscribe();
    let endpoint = subscription["endpoint"]
        .as_str()
        .expect("an endpoint")
        .to_owned();

    // A key that can read the feed but not register a device.
    let browser = Browser::opened_at(&app.url(&format!("/#key={reader}"))).await;
    let alerts = browser
        .alerts("the offer of alerts", |a| a.feed && a.on)
        .await;
    assert!(alerts.section && !alerts.off, "{alerts:?}");
    browser.assert_fits_a_phone("feed-alerts-phone.png").await;
    browser.grant("notifications").await;
    browser
        .client
        .execute(STAND_IN, vec![subscription.clone()])
        .await
        .expect("the stand-in installed");
    browser.click("#notify-on").await;
    let refused = browser
        .alerts("the refusal", |a| a.status.contains("devices:write"))
        .await;
    assert!(refused.on && refused.device.is_none(), "{refused:?}");
    let test = refused.test.as_ref().expect("the stand-in ran");
    // Subscribed, refused, and given up: no subscription left that no
    // device holds.
    assert_eq!(
        test.keys,
        [public_key.as_str()],
        "subscribed with the served key"
    );
    assert_eq!(test.user_visible_only, [true]);
    assert_eq!(test.unsubscribed, 1, "{refused:?}");
    assert!(devices(&app, &key).await.is_empty());

    // The same page with a key that may register devices.
    browser
        .client
        .goto(&app.url(&format!("/#key={key}")))
        .await
        .expect("the key changed");
    browser.click("#notify-on").await;
    let on = browser
        .alerts("alerts on", |a| a.off && a.device.is_some())
        .await;
    assert_eq!(on.status, "Alerts are on in this browser.");
    assert!(!on.on, "{on:?}");
    let listed = devices(&app, &key).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let device = &listed[0];
    assert_eq!(device["kind"], "webpush");
    assert_eq!(device["endpoint"], endpoint.as_str(), "{device}");
    assert_eq!(device["active"], true, "{device}");
    assert_eq!(device["name"], "Chrome on Linux", "{device}");
    // A new device comes with a burst limit, so a noisy source cannot
    // flood the browser; the other rules are the defaults.
    assert_eq!(
        device["burst"],
        json!({ "max": 5, "perMinutes": 10 }),
        "{device}"
    );
    assert_eq!(device["minPriority"], "low", "{device}");
    assert_eq!(device["quietHours"], Value::Null, "{device}");
    assert_eq!(device["channels"], Value::Null, "{device}");
    let remembered: Value =
        serde_json::from_str(on.device.as_deref().expect("remembered")).expect("JSON");
    assert_eq!(remembered["id"], device["id"]);
    assert_eq!(remembered["endpoint"], endpoint.as_str());

    // A real event reaches the push service, signed and encrypted for the
    // subscription the page registered: its markdown as plain text, its link.
    let link = "https://shop.example.com/orders/42";
    let posted = Reply::of(
        app.post_event(
            &key,
            &json!({ "channelName": "payments", "title": "Payment failed", "icon": "💸",
                "description": "**Card** declined", "parser": "markdown", "url": link,
                "notify": true }),
        )
        .await,
    )
    .await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    let event_id = posted.body["data"]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let received = eventually(
        DELIVERY,
        "the push at the push service",
        async || match service.received(&endpoint).as_slice() {
            [one] => Ok(one.payload.clone()),
            other => Err(format!("{other:?}; faults {:?}", service.faults())),
        },
    )
    .await;
    assert_eq!(received["eventId"], event_id.as_str());
    assert_eq!(received["url"], link);
    assert!(service.faults().is_empty(), "{:?}", service.faults());

    // What the push service decrypted, delivered to the page's worker.
    let origin = app.url("");
    let origin = origin.trim_end_matches('/');
    let registration = browser.registration_id(origin).await;
    browser.cdp("ServiceWorker.enable", json!({})).await;
    let push = json!({ "origin": origin, "registrationId": registration,
        "data": received.to_string() });
    // Delivered again until it shows: the command answers before the worker
    // has the push, and one sent while the domain was still being enabled
    // is dropped. The tag (the event id) keeps repeats to one notification.
    let notifications: Vec<Value> = eventually(DELIVERY, "the notification shown", async || {
        browser
            .cdp("ServiceWorker.deliverPushMessage", push.clone())
            .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let shown = browser
            .script(
                "return navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((ns) =>\
                   ns.map((n) => ({ title: n.title, body: n.body, tag: n.tag, icon: n.icon, data: n.data })));",
            )
            .await;
        let shown: Vec<Value> = serde_json::from_value(shown).map_err(|e| e.to_string())?;
        if shown.is_empty() {
            Err("none yet".to_owned())
        } else {
            Ok(shown)
        }
    })
    .await;
    assert_eq!(notifications.len(), 1, "{notifications:?}");
    let shown = &notifications[0];
    assert_eq!(shown["title"], "💸 Payment failed", "{shown}");
    assert_eq!(shown["body"], "Card declined\n#payments", "{shown}");
    assert_eq!(shown["tag"], event_id.as_str(), "{shown}");
    assert_eq!(
        shown["data"],
        json!({ "eventId": event_id, "summaryId": null, "channel": "payments", "url": link }),
        "what a click opens"
    );
    let icon = shown["icon"].as_str().expect("an icon");
    let icon = icon.strip_prefix(origin).expect("this server's");
    assert!(icon.starts_with("/feed/icon-192."), "{icon}");
    assert_eq!(app.get(icon).await.status(), 200, "{icon}");

    // Stop: the browser unsubscribes and the device is removed.
    browser.click("#notify-off").await;
    let off = browser
        .alerts("alerts off", |a| a.on && a.device.is_none())
        .await;
    assert_eq!(off.status, "Alerts are off in this browser.", "{off:?}");
    assert_eq!(off.test.expect("the stand-in").unsubscribed, 2);
    assert!(devices(&app, &key).await.is_empty());

    // An iPhone's Safari outside a Home Screen app has no Web Push: the page
    // says how to get it instead of offering a button that cannot work.
    browser
        .cdp(
            "Emulation.setUserAgentOverride",
            json!({ "userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) \
                AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
                "platform": "iPhone" }),
        )
        .await;
    browser.client.refresh().await.expect("reloaded");
    let iphone = browser
        .alerts("the Home Screen explained", |a| a.feed && a.section)
        .await;
    assert!(iphone.status.contains("Add to Home Screen"), "{iphone:?}");
    assert!(!iphone.on && !iphone.off, "{iphone:?}");
    browser.close().await;
    app.stop().await;
}

/// Chromium's own verdict on the web app, the icons it decodes, and no
/// offer of alerts from a server without a VAPID key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_installs_as_a_web_app_and_offers_no_alerts_without_a_vapid_key() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let (key, _) = app.new_key().await;
    let browser = Browser::opened_at(&app.url(&format!("/#key={key}"))).await;
    let origin = app.url("");
    let origin = origin.trim_end_matches('/');

    // The page registers its worker, at the root, so its scope covers `/`.
    let worker: Value = browser
        .wait_for(
            "return navigator.serviceWorker.getRegistration('/').then((r) =>\
               r && r.active ? { scope: r.scope, script: r.active.scriptURL } : null);",
            LOAD_TIMEOUT,
            "the service worker active",
            |w: &Value| !w.is_null(),
        )
        .await;
    assert_eq!(worker["scope"], format!("{origin}/"));
    assert_eq!(worker["script"], format!("{origin}/sw.js"));
    let alerts = browser.alerts("the feed", |a| a.feed).await;
    assert!(!alerts.section && !alerts.on, "{alerts:?}");

    let manifest = browser.cdp("Page.getAppManifest", json!({})).await;
    assert_eq!(manifest["errors"], json!([]), "{manifest}");
    assert_eq!(manifest["url"], format!("{origin}/manifest.webmanifest"));
    let parsed = &manifest["manifest"];
    assert_eq!(parsed["startUrl"], format!("{origin}/"), "{parsed}");
    assert_eq!(parsed["scope"], format!("{origin}/"), "{parsed}");
    assert_eq!(parsed["display"], "kStandalone", "{parsed}");
    let installable = browser.cdp("Page.getInstallabilityErrors", json!({})).await;
    assert_eq!(
        installable["installabilityErrors"],
        json!([]),
        "Chromium would not install the feed"
    );

    // Each icon, decoded by the browser, is the size the manifest says.
    let data: Value =
        serde_json::from_str(manifest["data"].as_str().expect("the text")).expect("JSON");
    let mut icons: Vec<(String, String)> = data["icons"]
        .as_array()
        .expect("icons")
        .iter()
        .map(|i| {
            let text = |k: &str| i[k].as_str().expect(k).to_owned();
            (text("src"), text("sizes"))
        })
        .collect();
    let touch = browser
        .script("return document.querySelector('link[rel=apple-touch-icon]').getAttribute('href')")
        .await;
    icons.push((
        touch.as_str().expect("an href").to_owned(),
        "180x180".into(),
    ));
    for (src, sizes) in icons {
        let decoded = browser
            .client
            .execute_async(
                "const [src, done] = arguments;\
                 fetch(src).then((r) => r.blob()).then(createImageBitmap)\
                   .then((b) => done(b.width + 'x' + b.height), (e) => done(String(e)));",
                vec![json!(src)],
            )
            .await
            .expect("the icon fetched");
        assert_eq!(decoded, json!(sizes), "{src}");
    }
    browser.close().await;
    app.stop().await;
}

/// Runs sw.js's own `push` and `notificationclick` handlers in a page of
/// the feed's origin (where `self` is the window), with the Clients API
/// and the registration stood in by ones that record what they are asked
/// (`open`, `focus`, `navigate`, `post`, `show`), and answers, for each case
/// (`{event, data, windows}`: the event's type, the push's payload or the
/// clicked notification's data, the URLs of the windows open), what was
/// asked.
const WORKER_CASES: &str = r#"
const [cases, done] = arguments;
const calls = [];
let windows = [];
const client = (url) => ({
  url,
  focus: async () => { calls.push(['focus', url]); },
  navigate: async (to) => { calls.push(['navigate', to]); return client(to); },
  postMessage: (message) => { calls.push(['post', message]); },
});
window.clients = {
  matchAll: async () => windows,
  openWindow: async (url) => { calls.push(['open', url]); return null; },
};
window.registration = {
  getNotifications: async () => [],
  showNotification: async (title, options) => { calls.push(['show', options.data]); },
};
const run = async () => {
  await new Promise((loaded, failed) => {
    const script = document.createElement('script');
    script.src = '/sw.js';
    script.onload = loaded;
    script.onerror = () => failed(new Error('sw.js did not load'));
    (document.head || document.documentElement).appendChild(script);
  });
  const results = [];
  for (const c of cases) {
    calls.length = 0;
    windows = c.windows.map(client);
    const event = new Event(c.event);
    let pending = null;
    event.waitUntil = (promise) => { pending = promise; };
    if (c.event === 'push') event.data = { json: () => c.data, text: () => JSON.stringify(c.data) };
    else event.notification = { data: c.data, close: () => calls.push(['close']) };
    self.dispatchEvent(event);
    await pending;
    results.push(calls.slice());
  }
  return results;
};
run().then(done, (e) => done(String(e)));
"#;

/// What a click on an alert opens: the event's `url` when it is http(s)
/// (checked by the worker too: a `javascript:` or `data:` URL is ignored),
/// else the feed at the event, or at a summary's channel; an open window is
/// focused rather than another opened (the feed, told which event to show
/// or sent to a link into it; a page of this origin at that very URL). And
/// the worker keeps in a notification's data only an http(s) `url`.
///
/// Headless Chromium shows the worker's notifications but cannot click one
/// (no WebDriver or DevTools command does), and a click made up inside the
/// worker is not a user's, so Chromium would refuse it the window it opens
/// or focuses. So the worker's script runs in a page of its origin, with
/// the Clients API stood in; the handlers, and the choice of URL, are the
/// ones the worker runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_opens_the_events_link_or_else_the_feed() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    // The worker's script as a document: this origin, and no page script.
    let browser = Browser::opened_at(&app.url("/sw.js")).await;
    let origin = app.url("");
    let origin = origin.trim_end_matches('/');
    let feed = format!("{origin}/");
    let click = |data: Value, windows: Vec<String>| json!({ "event": "notificationclick", "data": data, "windows": windows });
    let push = |url: &str| {
        json!({ "event": "push", "windows": [],
            "data": { "title": "Deploy 42", "eventId": "e1", "channel": "deploys", "url": url } })
    };
    let external = "https://ci.example.com/runs/42?tab=log";
    let cases = vec![
        // The event's link, whatever is open.
        click(
            json!({ "eventId": "e1", "channel": "deploys", "url": external }),
            vec![feed.clone()],
        ),
        click(
            json!({ "eventId": "e1", "url": "http://intranet.example/runs/42" }),
            vec![],
        ),
        // Not http(s): the feed at the event, as without a link.
        click(
            json!({ "eventId": "e1", "url": "javascript:alert(1)" }),
            vec![],
        ),
        click(
            json!({ "eventId": "e1", "url": "data:text/html,<script>alert(1)</script>" }),
            vec![feed.clone()],
        ),
        // A link into the feed: the open feed goes there.
        click(
            json!({ "eventId": "e1", "url": format!("{origin}/#channel=deploys") }),
            vec![format!("{origin}/#event=older")],
        ),
        // A page of this origin already open at the link: focused.
        click(
            json!({ "eventId": "e1", "url": format!("{origin}/dashboard") }),
            vec![feed.clone(), format!("{origin}/dashboard")],
        ),
        // No link: the feed, opened at the event or the summary's channel.
        click(json!({ "eventId": "e1", "channel": "deploys" }), vec![]),
        click(
            json!({ "eventId": null, "summaryId": "s1", "channel": "disks" }),
            vec![],
        ),
        push(external),
        push("javascript:alert(1)"),
    ];
    let results = browser
        .client
        .execute_async(WORKER_CASES, vec![json!(cases)])
        .await
        .expect("the cases run");
    let shown = |url: Option<&str>| {
        let mut data = json!({ "eventId": "e1", "summaryId": null, "channel": "deploys" });
        if let Some(url) = url {
            data["url"] = json!(url);
        }
        json!([["show", data]])
    };
    assert_eq!(
        results,
        json!([
            [["close"], ["open", external]],
            [["close"], ["open", "http://intranet.example/runs/42"]],
            [["close"], ["open", format!("{origin}/#event=e1")]],
            [["close"], ["focus", feed], ["post", { "type": "tocsin:event", "eventId": "e1" }]],
            [
                ["close"],
                ["navigate", format!("{origin}/#channel=deploys")],
                ["focus", format!("{origin}/#channel=deploys")]
            ],
            [["close"], ["focus", format!("{origin}/dashboard")]],
            [["close"], ["open", format!("{origin}/#event=e1")]],
            [["close"], ["open", format!("{origin}/#channel=disks")]],
            shown(Some(external)),
            shown(None),
        ])
    );
    browser.close().await;
    app.stop().await;
}

//! This browser's alert rules on the feed page, and what its service worker
//! makes of the pushes they shape, in a real headless Chromium against the
//! real ingest with its embedded notifier (browser.rs, feed_alerts.rs):
//! once subscribed, "Alert settings" shows the device's rules as stored
//! (a fresh subscription has the burst limit 5 per 10 minutes), changes
//! them with `PATCH /v1/devices/{id}`, says next to the form what the API
//! refused and where, shows them again after a reload, reads them with a
//! key that may change but not list devices, and tells a key that may do
//! neither so. The worker shows two alerts with the same `alertKey` as one
//! notification (the later one, alerting anew), keeps a repeat of one
//! quiet, and shows the digest of alerts held past a burst limit under its
//! own tag with its channel, which the feed opens at.
//!
//! The stand-in is feed_alerts.rs's, installed for every document of the
//! tab (`Page.addScriptToEvaluateOnNewDocument`) so it outlives a reload,
//! and keeping "subscribed" in the page's storage as a browser keeps its
//! subscription: the loopback push service's subscription, since headless
//! Chromium cannot reach a vendor's push service from here.

use std::time::Duration;

use common::store::KeyScope;
use fantoccini::Locator;
use serde::Deserialize;
use serde_json::{Value, json};
use tocsin_tests::{Reply, TestApp, eventually, push_service::PushService};

use crate::{
    browser::{Browser, LOAD_TIMEOUT},
    feed_alerts::{DELIVERY, app_with_webpush, devices},
};

/// A burst window is a minute at least; then the relay's next look.
const DIGEST_WAIT: Duration = Duration::from_secs(100);

/// `subscribe` and `getSubscription` answering with the push service's
/// subscription (the script's `%SUBSCRIPTION%`), subscribed until
/// unsubscribed, across reloads.
const STAND_IN: &str = r#"
(() => {
  const subscription = %SUBSCRIPTION%;
  const KEPT = 'pushTest.subscribed';
  const made = {
    endpoint: subscription.endpoint,
    expirationTime: null,
    toJSON: () => subscription,
    unsubscribe: async () => { localStorage.removeItem(KEPT); return true; },
  };
  PushManager.prototype.subscribe = async function () { localStorage.setItem(KEPT, '1'); return made; };
  PushManager.prototype.getSubscription = async function () { return localStorage.getItem(KEPT) ? made : null; };
})();
"#;

/// The alerts line and the settings form as the page shows them.
const SNAPSHOT: &str = r#"
const $ = (id) => document.getElementById(id);
return {
  status: $('notify-status').textContent,
  on: !$('notify-on').hidden,
  off: !$('notify-off').hidden,
  shown: !$('rules').hidden,
  open: $('rules').open,
  saved: $('rules-status').textContent,
  errors: [...document.querySelectorAll('#rules-errors li')].map((li) => li.textContent),
  busy: $('rules-form').querySelector('button[type=submit]').disabled,
  all: $('rules-all').checked,
  channels: [...document.querySelectorAll('#rules-channels input')]
    .map((b) => ({ name: b.value, checked: b.checked, disabled: b.disabled })),
  priority: $('rules-priority').value,
  quiet: $('rules-quiet').checked,
  quietFieldsOff: $('rules-quiet-set').disabled,
  start: $('rules-start').value,
  end: $('rules-end').value,
  zone: $('rules-zone').value,
  allow: $('rules-allow').value,
  burst: $('rules-burst').checked,
  max: $('rules-max').value,
  per: $('rules-per').value,
  invalid: [...document.querySelectorAll('#rules-form [aria-invalid=true]')].map((e) => e.id),
};
"#;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Settings {
    status: String,
    on: bool,
    off: bool,
    shown: bool,
    open: bool,
    /// The form's own status line ("Saved.").
    saved: String,
    errors: Vec<String>,
    /// The save button is disabled (loading, saving, or nothing loaded).
    busy: bool,
    all: bool,
    channels: Vec<ChannelBox>,
    priority: String,
    quiet: bool,
    quiet_fields_off: bool,
    start: String,
    end: String,
    zone: String,
    allow: String,
    burst: bool,
    max: String,
    per: String,
    invalid: Vec<String>,
}

#[derive(Debug, Deserialize, PartialEq, Eq)]
struct ChannelBox {
    name: String,
    checked: bool,
    disabled: bool,
}

impl Settings {
    /// Read from the server and shown: nothing pending, no fault.
    fn loaded(&self) -> bool {
        self.open && self.saved.is_empty() && !self.busy && !self.zone.is_empty()
    }

    fn channel(&self, name: &str) -> &ChannelBox {
        self.channels
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no box for #{name}: {self:?}"))
    }
}

impl Browser {
    async fn settings(&self, what: &str, ready: impl Fn(&Settings) -> bool) -> Settings {
        self.wait_for(SNAPSHOT, LOAD_TIMEOUT, what, ready).await
    }

    /// A browser whose push subscriptions are the push service's, in the
    /// time zone `zone`, showing the feed with `key`.
    async fn subscribable(app: &TestApp, subscription: &Value, zone: &str, key: &str) -> Self {
        let browser = Self::start().await;
        browser
            .cdp(
                "Emulation.setTimezoneOverride",
                json!({ "timezoneId": zone }),
            )
            .await;
        let stand_in = STAND_IN.replace("%SUBSCRIPTION%", &subscription.to_string());
        browser
            .cdp(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": stand_in }),
            )
            .await;
        browser
            .client
            .goto(&app.url(&format!("/#key={key}")))
            .await
            .expect("the feed opens");
        browser
    }

    /// "Notify me in this browser", and the device it registered.
    async fn subscribe(&self, app: &TestApp, key: &str) -> Value {
        self.settings("the offer of alerts", |s| s.on).await;
        self.grant("notifications").await;
        self.click("#notify-on").await;
        self.settings("alerts on", |s| s.off && s.shown).await;
        let listed = devices(app, key).await;
        assert_eq!(listed.len(), 1, "{listed:?}");
        listed[0].clone()
    }

    /// Unfolds "Alert settings" and waits for what the server has.
    async fn open_settings(&self) -> Settings {
        self.click("#rules summary").await;
        self.settings("the settings read from the server", Settings::loaded)
            .await
    }

    /// Sets a time field. WebDriver types into `<input type=time>` by the
    /// locale's own segments (hours, minutes, AM/PM), so the value is set as
    /// the field reports it, with the events a person's edit fires.
    async fn set_time(&self, id: &str, value: &str) {
        self.client
            .execute(
                "const [id, value] = arguments; const field = document.getElementById(id);\
                 field.value = value;\
                 field.dispatchEvent(new Event('input', { bubbles: true }));\
                 field.dispatchEvent(new Event('change', { bubbles: true }));",
                vec![json!(id), json!(value)],
            )
            .await
            .expect("the time set");
    }

    async fn select(&self, css: &str, value: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} ({e})"))
            .select_by_value(value)
            .await
            .unwrap_or_else(|e| panic!("{value} not chosen in {css} ({e})"));
    }

    async fn save(&self) {
        self.click("#rules-form button[type=submit]").await;
    }

    /// Opens the feed again with `key` and reloads it.
    async fn reload_with(&self, app: &TestApp, key: &str) {
        self.client
            .goto(&app.url(&format!("/#key={key}")))
            .await
            .expect("the key changed");
        self.client.refresh().await.expect("reloaded");
    }
}

fn rules_of(device: &Value) -> Value {
    ["channels", "tags", "minPriority", "quietHours", "burst"]
        .iter()
        .map(|f| (f.to_string(), device[f].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_settings_change_this_browsers_device_and_are_shown_after_a_reload() {
    let service = PushService::start().await;
    let (app, _) = app_with_webpush(&service).await;
    let (key, scope) = app.new_key().await;
    // The project's channels are the ones that have events.
    for channel in ["payments", "deploys"] {
        app.record_event(
            &key,
            &json!({ "channelName": channel, "title": "Seen", "notify": false }),
        )
        .await;
    }
    let subscription = service.subscribe();
    let browser = Browser::subscribable(&app, &subscription, "America/New_York", &key).await;
    let device = browser.subscribe(&app, &key).await;
    let id = device["id"].as_str().expect("an id").to_owned();
    assert_eq!(
        rules_of(&device),
        json!({ "channels": null, "tags": null, "minPriority": "low", "quietHours": null,
            "burst": { "max": 5, "perMinutes": 10 } }),
        "a fresh subscription's rules"
    );

    // Folded until asked for; then what the server has, with quiet hours
    // offered in the browser's own zone.
    let page = browser.settings("the settings offered", |s| s.shown).await;
    assert!(!page.open, "{page:?}");
    let page = browser.open_settings().await;
    assert!(page.all && !page.quiet && page.quiet_fields_off, "{page:?}");
    for name in ["payments", "deploys"] {
        let shown = page.channel(name);
        assert!(!shown.checked && shown.disabled, "{page:?}");
    }
    assert_eq!(page.priority, "low");
    assert_eq!((page.start.as_str(), page.end.as_str()), ("22:00", "07:00"));
    assert_eq!(page.zone, "America/New_York", "the browser's zone");
    assert_eq!(page.allow, "high");
    assert!(page.burst, "{page:?}");
    assert_eq!((page.max.as_str(), page.per.as_str()), ("5", "10"));
    browser.assert_fits_a_phone("feed-rules-phone.png").await;

    // Only #payments, normal and up, quiet from 22:00 with normal still
    // alerting; but quiet "to" the same minute, which the API refuses
    // next to the field.
    browser.click("#rules-some").await;
    browser.click("#rules-channels input[value=payments]").await;
    browser.select("#rules-priority", "normal").await;
    browser.click("#rules-quiet").await;
    browser.set_time("rules-start", "22:00").await;
    browser.set_time("rules-end", "22:00").await;
    browser.select("#rules-allow", "normal").await;
    browser.save().await;
    let refused = browser
        .settings("the refusal", |s| !s.errors.is_empty() && !s.busy)
        .await;
    assert_eq!(refused.saved, "Not saved.");
    assert_eq!(refused.errors.len(), 1, "{refused:?}");
    assert!(
        refused.errors[0].starts_with("Quiet hours to: ") && refused.errors[0].contains("differ"),
        "{refused:?}"
    );
    assert_eq!(refused.invalid, ["rules-end"]);
    let unchanged = devices(&app, &key).await;
    assert_eq!(
        unchanged[0]["updatedAt"], device["updatedAt"],
        "{unchanged:?}"
    );

    browser.set_time("rules-end", "07:00").await;
    browser.save().await;
    let saved = browser
        .settings("saved", |s| s.saved == "Saved." && !s.busy)
        .await;
    assert!(
        saved.errors.is_empty() && saved.invalid.is_empty(),
        "{saved:?}"
    );
    browser.screenshot("feed-rules.png").await;
    let stored = json!({
        "channels": ["payments"],
        "tags": null,
        "minPriority": "normal",
        "quietHours": { "start": "22:00", "end": "07:00", "timeZone": "America/New_York",
            "allowPriority": "normal" },
        "burst": { "max": 5, "perMinutes": 10 },
    });
    let listed = devices(&app, &key).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(rules_of(&listed[0]), stored);

    // A reload reads them back from the server.
    browser.client.refresh().await.expect("reloaded");
    let page = browser
        .settings("the settings offered again", |s| s.shown && s.off)
        .await;
    assert_eq!(page.status, "Alerts are on in this browser.");
    let shown_after_reload = |page: &Settings| {
        assert!(
            !page.all && page.quiet && !page.quiet_fields_off,
            "{page:?}"
        );
        assert_eq!(
            page.channel("payments"),
            &ChannelBox {
                name: "payments".into(),
                checked: true,
                disabled: false
            }
        );
        assert!(!page.channel("deploys").checked, "{page:?}");
        assert_eq!(page.priority, "normal");
        assert_eq!((page.start.as_str(), page.end.as_str()), ("22:00", "07:00"));
        assert_eq!(page.zone, "America/New_York");
        assert_eq!(page.allow, "normal");
        assert!(page.burst, "{page:?}");
        assert_eq!((page.max.as_str(), page.per.as_str()), ("5", "10"));
    };
    shown_after_reload(&browser.open_settings().await);

    // A key made for the feed (events:read, devices:write) cannot list
    // devices; the page reads this one's rules all the same, and reading
    // changes nothing.
    let before = devices(&app, &key).await;
    let writer = app
        .create_key_with_scopes(
            &scope.org,
            &scope.project,
            &[KeyScope::EventsRead, KeyScope::DevicesWrite],
        )
        .await;
    let listing = Reply::of(app.get_as("/v1/devices", &writer).await).await;
    assert_eq!(listing.status, 403, "{}", listing.body);
    browser.reload_with(&app, &writer).await;
    shown_after_reload(&browser.open_settings().await);
    assert_eq!(
        devices(&app, &key).await[0]["updatedAt"],
        before[0]["updatedAt"]
    );

    // A key that may not change devices is told so, and nothing is saved.
    let reader = app
        .create_key_with_scopes(&scope.org, &scope.project, &[KeyScope::EventsRead])
        .await;
    browser.reload_with(&app, &reader).await;
    browser.click("#rules summary").await;
    let refused = browser
        .settings("the scope explained", |s| !s.errors.is_empty())
        .await;
    assert!(refused.errors[0].contains("devices:write"), "{refused:?}");
    assert!(
        refused.busy,
        "saving offered without the rules: {refused:?}"
    );

    // The device removed elsewhere (the dashboard): the page forgets it
    // and offers to turn alerts on again.
    let deleted = app
        .delete_as(&format!("/v1/devices/{id}"), &key)
        .await
        .status();
    assert_eq!(deleted, 200);
    browser.reload_with(&app, &key).await;
    browser.click("#rules summary").await;
    let gone = browser
        .settings("the device gone", |s| s.on && !s.shown)
        .await;
    assert!(gone.status.contains("no longer registered"), "{gone:?}");
    browser.close().await;
    app.stop().await;
}

/// What the worker shows, from the page.
const NOTIFICATIONS: &str = "return navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((ns) =>\
   ns.map((n) => ({ title: n.title, body: n.body, tag: n.tag, renotify: n.renotify, data: n.data })));";

#[derive(Debug, Clone, Deserialize)]
struct Shown {
    title: String,
    body: String,
    tag: String,
    renotify: bool,
    data: Value,
}

/// The push `payload` given to the page's worker through the DevTools
/// protocol, as the browser would deliver it from the push service.
async fn deliver(browser: &Browser, registration: &Value, payload: &Value) {
    let mut push = registration.clone();
    push["data"] = json!(payload.to_string());
    browser.cdp("ServiceWorker.deliverPushMessage", push).await;
}

/// Delivers `payload` again until the page shows what `ready` looks for:
/// the command answers before the worker has the push, and a push is
/// dropped while the DevTools domain is still being enabled; one given
/// after a minute's wait was once seen dropped too (the idle worker
/// stopped, most likely).
async fn deliver_until(
    browser: &Browser,
    registration: &Value,
    payload: &Value,
    what: &str,
    ready: impl Fn(&[Shown]) -> bool,
) -> Vec<Shown> {
    eventually(DELIVERY, &format!("{what} shown"), async || {
        deliver(browser, registration, payload).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let shown: Vec<Shown> = serde_json::from_value(browser.script(NOTIFICATIONS).await)
            .map_err(|e| e.to_string())?;
        if ready(&shown) {
            Ok(shown)
        } else {
            Err(format!("{shown:?}"))
        }
    })
    .await
}

async fn shown(browser: &Browser, what: &str, ready: impl Fn(&[Shown]) -> bool) -> Vec<Shown> {
    browser
        .wait_for(NOTIFICATIONS, LOAD_TIMEOUT, what, |n: &Vec<Shown>| ready(n))
        .await
}

/// The pushes the push service received so far, as it decrypted them.
fn received(service: &PushService, endpoint: &str, n: usize) -> Result<Vec<Value>, String> {
    let payloads: Vec<Value> = service
        .received(endpoint)
        .into_iter()
        .map(|r| r.payload)
        .collect();
    if payloads.len() >= n {
        Ok(payloads)
    } else {
        Err(format!("{payloads:?}; faults {:?}", service.faults()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_shows_alerts_with_one_tag_as_one_notification_and_a_digest_opens_its_channel() {
    let service = PushService::start().await;
    let (app, _) = app_with_webpush(&service).await;
    let (key, _) = app.new_key().await;
    let subscription = service.subscribe();
    let endpoint = subscription["endpoint"]
        .as_str()
        .expect("an endpoint")
        .to_owned();
    let browser = Browser::subscribable(&app, &subscription, "UTC", &key).await;
    let device = browser.subscribe(&app, &key).await;
    // Two alerts a minute reach the browser; the rest wait for the digest.
    let id = device["id"].as_str().expect("an id");
    let limited = app
        .call(
            reqwest::Method::PATCH,
            &format!("/v1/devices/{id}"),
            &key,
            Some(&json!({ "burst": { "max": 2, "perMinutes": 1 } })),
        )
        .await;
    assert_eq!(limited.status, 200, "{}", limited.body);

    // Two events of one alertKey (the second replaces the first on the
    // device), then one past the burst limit.
    let disk = |title: &str| json!({ "channelName": "disks", "title": title, "alertKey": "disk-full", "notify": true });
    let first = app.record_event(&key, &disk("Disk 91% full")).await;
    let second = app.record_event(&key, &disk("Disk 97% full")).await;
    let payloads = eventually(DELIVERY, "both pushes at the push service", async || {
        received(&service, &endpoint, 2)
    })
    .await;
    let payload_of = |id: &str| {
        payloads
            .iter()
            .find(|p| p["eventId"] == id)
            .unwrap_or_else(|| panic!("no push of {id}: {payloads:?}"))
            .clone()
    };
    let (first, second) = (payload_of(&first), payload_of(&second));
    let tag = first["tag"].as_str().expect("a tag").to_owned();
    assert_eq!(second["tag"], tag.as_str(), "one tag for one alertKey");
    assert_ne!(tag, first["eventId"].as_str().expect("an id"));
    let held = app
        .record_event(
            &key,
            &json!({ "channelName": "disks", "title": "Disk 99% full", "notify": true }),
        )
        .await;

    let origin = app.url("");
    let origin = origin.trim_end_matches('/');
    let registration = json!({ "origin": origin,
        "registrationId": browser.registration_id(origin).await });
    browser.cdp("ServiceWorker.enable", json!({})).await;
    let one = deliver_until(&browser, &registration, &first, "the first alert", |n| {
        !n.is_empty()
    })
    .await;
    assert_eq!(one.len(), 1, "{one:?}");
    assert_eq!(one[0].title, "Disk 91% full");
    assert_eq!(one[0].tag, tag);
    assert!(!one[0].renotify, "{one:?}");

    // The second, under the same tag: one notification, the later alert,
    // alerting anew. (Delivered once, to a worker just at work: a repeat
    // would replace it quietly.)
    deliver(&browser, &registration, &second).await;
    let replaced = shown(&browser, "the second alert in its place", |n| {
        n.len() == 1 && n[0].title == "Disk 97% full"
    })
    .await;
    let now = &replaced[0];
    assert_eq!(now.tag, tag);
    assert_eq!(now.body, "#disks");
    assert!(now.renotify, "{replaced:?}");
    assert_eq!(
        now.data,
        json!({ "eventId": second["eventId"], "summaryId": null, "channel": "disks" })
    );
    // The same push again (a retry whose first try arrived): still one
    // notification, replaced without alerting again.
    deliver(&browser, &registration, &second).await;
    shown(&browser, "the repeat shown quietly", |n| {
        n.len() == 1 && n[0].title == "Disk 97% full" && !n[0].renotify
    })
    .await;

    // The alert past the limit comes as the digest when the minute's
    // window ends, under its own tag.
    let digest = eventually(DIGEST_WAIT, "the digest at the push service", async || {
        received(&service, &endpoint, 3)?
            .into_iter()
            .find(|p| !p["summaryId"].is_null())
            .ok_or_else(|| "no digest yet".to_owned())
    })
    .await;
    assert!(
        service
            .received(&endpoint)
            .iter()
            .all(|r| r.payload["eventId"] != held.as_str()),
        "the held alert was pushed"
    );
    let summary = digest["summaryId"].as_str().expect("an id").to_owned();
    assert_eq!(digest["eventId"], Value::Null, "{digest}");
    // (Headless Chromium closes a notification by itself some 25 seconds
    // after it shows: the alert's is gone by now, a minute on.)
    let all = deliver_until(&browser, &registration, &digest, "the digest", |n| {
        n.iter().any(|n| n.tag == summary)
    })
    .await;
    let shown_digest = all.iter().find(|n| n.tag == summary).expect("the digest");
    assert_eq!(shown_digest.title, "1 more in #disks");
    assert_eq!(shown_digest.body, "Latest: Disk 99% full\n#disks");
    assert!(!shown_digest.renotify, "{all:?}");
    assert_eq!(
        shown_digest.data,
        json!({ "eventId": null, "summaryId": summary, "channel": "disks" })
    );
    assert_eq!(service.faults(), Vec::<String>::new());

    // A tap on the digest opens the feed at its channel (`/#channel=`) when
    // no feed is open: only #disks's events, whatever else there is.
    app.record_event(
        &key,
        &json!({ "channelName": "payments", "title": "Paid", "notify": false }),
    )
    .await;
    browser
        .client
        .goto("about:blank")
        .await
        .expect("away from the feed");
    browser
        .client
        .goto(&app.url("/#channel=disks"))
        .await
        .expect("the feed at the channel");
    let disks = |f: &Feed| f.pressed.as_deref() == Some("disks") && f.channels == ["disks"; 3];
    let feed = browser
        .wait_for(FEED, LOAD_TIMEOUT, "the feed of #disks", disks)
        .await;
    assert!(feed.url.ends_with('/'), "the fragment stays: {feed:?}");
    // An open feed is told by the worker instead (sw.js posts this).
    browser.click("#channels button[data-channel='']").await;
    browser
        .wait_for(FEED, LOAD_TIMEOUT, "every channel", |f: &Feed| {
            f.pressed.as_deref() == Some("") && f.channels.len() == 4
        })
        .await;
    browser
        .script(
            "navigator.serviceWorker.dispatchEvent(new MessageEvent('message',\
               { data: { type: 'tocsin:channel', channel: 'disks' } })); return null;",
        )
        .await;
    browser
        .wait_for(FEED, LOAD_TIMEOUT, "the feed of #disks again", disks)
        .await;
    browser.close().await;
    app.stop().await;
}

/// The feed's channel filter and the channels of the events it lists.
const FEED: &str = r#"
const pressed = document.querySelector('#channels button[aria-pressed=true]');
return {
  pressed: pressed ? pressed.dataset.channel : null,
  channels: [...document.querySelectorAll('#events .meta .channel')].map((c) => c.textContent.slice(1)),
  url: location.href,
};
"#;

#[derive(Debug, Deserialize)]
struct Feed {
    pressed: Option<String>,
    channels: Vec<String>,
    url: String,
}

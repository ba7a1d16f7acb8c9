//! The FCM HTTP v1 message for one alert: a notification (the title with
//! its icon, the body as plain text), the data an app reads (channel, event
//! id, icon, priority, the `url` a tap should open), the Android options the
//! event's priority picks ([`android`]) and, for an https link, the web
//! options that open it ([`webpush`]), cut to fit FCM's 4096-byte limit.

use serde_json::{Value, json};

use crate::push::{Alert, Priority, fit_body_and_url};

/// FCM refuses messages whose payload is larger; the whole request body is
/// held to it, which leaves the payload some room.
const MAX_BYTES: usize = 4096;
/// How long FCM keeps trying an offline device, as for APNs and Web Push.
const TTL: &str = "86400s";

/// The request body of `messages:send` for `token`.
pub(super) fn body(token: &str, alert: &Alert) -> Vec<u8> {
    let title = alert.display_title();
    let event_id = alert.event_id.to_string();
    fit_body_and_url(
        alert.body.clone(),
        alert.url.as_deref(),
        MAX_BYTES,
        |body, url| {
            let mut data = json!({
                "channel": alert.channel,
                "thread": alert.channel,
                "priority": alert.priority.as_str(),
            });
            data[if alert.summary {
                "summaryId"
            } else {
                "eventId"
            }] = json!(event_id);
            if let Some(icon) = &alert.icon {
                data["icon"] = json!(icon);
            }
            if let Some(alert_key) = &alert.alert_key {
                data["alertKey"] = json!(alert_key);
            }
            if let Some(url) = url {
                data["url"] = json!(url);
            }
            let mut notification = json!({ "title": title });
            if let Some(body) = body {
                notification["body"] = json!(body);
            }
            let mut message = json!({
                "token": token,
                "notification": notification,
                "data": data,
                "android": android(alert.priority, &alert.collapse_id),
            });
            if let Some(webpush) = url.and_then(webpush) {
                message["webpush"] = webpush;
            }
            json!({ "message": message }).to_string().into_bytes()
        },
    )
}

/// `webpush.fcm_options.link`: the page the FCM SDK for the web opens when
/// its notification is clicked. FCM requires https there (its v1 reference:
/// "For all URL values, HTTPS is required") and refuses the message
/// otherwise, so an http link goes only in `data.url`. Android has no such
/// field: its `click_action` names an intent filter's action, not a URL, so
/// an Android app reads `data.url` itself.
fn webpush(url: &str) -> Option<Value> {
    let https = url::Url::parse(url).is_ok_and(|u| u.scheme() == "https");
    https.then(|| json!({ "fcm_options": { "link": url } }))
}

/// FCM has two Android delivery priorities, so `low` and `normal` both go
/// `normal` (delivered when the phone next wakes from Doze; `high` wakes
/// it), and `low` differs by playing no sound and by a low notification
/// priority. Android 8+ takes sound and importance from the app's
/// notification channel, so an app that wants the three to differ there
/// creates a channel per priority (`data.priority` says which). The tag and
/// the collapse key are the collapse id (`crate::push::collapse_id`): a
/// push repeated after a crash replaces the first, and an alert with a key
/// replaces the project's earlier ones with that key. Android has no
/// thread in FCM's notification; `data.thread` names the channel for an
/// app that groups its notifications.
fn android(priority: Priority, collapse_id: &str) -> Value {
    let (delivery, shown, sound) = match priority {
        Priority::Low => ("normal", "PRIORITY_LOW", false),
        Priority::Normal => ("normal", "PRIORITY_DEFAULT", true),
        Priority::High => ("high", "PRIORITY_HIGH", true),
    };
    let mut notification = json!({
        "tag": collapse_id,
        "notification_priority": shown,
        "default_sound": sound,
    });
    if sound {
        notification["sound"] = json!("default");
    }
    json!({
        "priority": delivery,
        "ttl": TTL,
        "collapse_key": collapse_id,
        "notification": notification,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(priority: Priority, body: Option<String>) -> Alert {
        crate::push::sample_alert(body, priority)
    }

    fn json(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("JSON")
    }

    #[test]
    fn the_message_carries_token_notification_and_data() {
        let message = json(&body(
            "tok",
            &alert(Priority::Normal, Some("Declined".into())),
        ));
        let m = &message["message"];
        assert_eq!(m["token"], "tok");
        assert_eq!(m["notification"]["title"], "💸 Payment failed");
        assert_eq!(m["notification"]["body"], "Declined");
        assert_eq!(m["data"]["channel"], "payments");
        assert_eq!(m["data"]["eventId"], uuid::Uuid::nil().to_string());
        assert_eq!(m["data"]["icon"], "💸");
        assert_eq!(m["android"]["ttl"], "86400s");
        assert_eq!(m["android"]["collapse_key"], uuid::Uuid::nil().to_string());
        // FCM data values must all be strings.
        for value in m["data"].as_object().expect("data").values() {
            assert!(value.is_string(), "{value}");
        }
    }

    #[test]
    fn an_alert_key_is_the_collapse_key_and_the_tag() {
        let keyed = Alert {
            alert_key: Some("deploy-42".into()),
            collapse_id: "kAbc".into(),
            ..alert(Priority::Normal, None)
        };
        let m = json(&body("tok", &keyed))["message"].clone();
        assert_eq!(m["android"]["collapse_key"], "kAbc");
        assert_eq!(m["android"]["notification"]["tag"], "kAbc");
        assert_eq!(m["data"]["alertKey"], "deploy-42");
        assert_eq!(m["data"]["thread"], "payments");
    }

    #[test]
    fn each_priority_has_its_android_priority_and_sound() {
        for (priority, delivery, shown, sound) in [
            (Priority::Low, "normal", "PRIORITY_LOW", None),
            (
                Priority::Normal,
                "normal",
                "PRIORITY_DEFAULT",
                Some("default"),
            ),
            (Priority::High, "high", "PRIORITY_HIGH", Some("default")),
        ] {
            let message = json(&body("tok", &alert(priority, None)));
            let android = &message["message"]["android"];
            assert_eq!(android["priority"], delivery, "{priority:?}");
            let n = &android["notification"];
            assert_eq!(n["notification_priority"], shown, "{priority:?}");
            assert_eq!(n["sound"].as_str(), sound, "{priority:?}");
            assert_eq!(n["default_sound"], sound.is_some(), "{priority:?}");
            assert_eq!(message["message"]["data"]["priority"], priority.as_str());
        }
    }

    #[test]
    fn an_https_url_is_the_web_link_and_in_the_data_and_markdown_is_text() {
        let m = json(&body("tok", &crate::push::markdown_alert()))["message"].clone();
        let url = "https://ci.example.com/runs/42?tab=log";
        assert_eq!(m["webpush"], json!({ "fcm_options": { "link": url } }));
        assert_eq!(m["data"]["url"], url);
        assert_eq!(m["notification"]["body"], crate::push::MARKDOWN_AS_TEXT);
        assert!(
            m["android"]["notification"].get("click_action").is_none(),
            "an intent action, not a URL: {m}"
        );
    }

    #[test]
    fn an_http_url_is_only_in_the_data_and_no_url_is_nowhere() {
        let http = Alert {
            url: Some("http://intranet.example/orders/42".into()),
            ..alert(Priority::Normal, None)
        };
        let m = json(&body("tok", &http))["message"].clone();
        assert!(m.get("webpush").is_none(), "FCM refuses an http link: {m}");
        assert_eq!(m["data"]["url"], "http://intranet.example/orders/42");
        let none = Alert {
            url: None,
            ..alert(Priority::Normal, None)
        };
        let m = json(&body("tok", &none))["message"].clone();
        assert!(
            m.get("webpush").is_none() && m["data"].get("url").is_none(),
            "{m}"
        );
    }

    #[test]
    fn a_long_body_is_cut_to_fit_the_limit() {
        let bytes = body("tok", &alert(Priority::High, Some("é".repeat(5000))));
        assert!(bytes.len() <= MAX_BYTES, "{}", bytes.len());
        let message = json(&bytes);
        let cut = message["message"]["notification"]["body"]
            .as_str()
            .expect("body kept");
        assert!(cut.ends_with('…') && cut.len() > 3000, "{}", cut.len());
    }
}

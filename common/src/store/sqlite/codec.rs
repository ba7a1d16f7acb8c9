//! Records to SQL parameters and rows back: timestamps (RFC 3339 text, or
//! milliseconds where the value is compared), UUIDs and JSON as text, and
//! each table's column list beside the function that reads it, so the two
//! cannot drift apart.

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::Row;
use uuid::Uuid;

use crate::rules::AlertRules;
use crate::store::{
    ApiKey, ApnsEnvironment, Delivery, DeliveryState, Device, DeviceKind, Event, KeyScope,
    NotificationState, Parser, Priority, PushTarget, Scope, WebPushSubscription,
};

/// States as one JSON array parameter, matched with
/// `notification_state IN (SELECT value FROM json_each(?))`: one fixed,
/// cacheable statement whatever the number of states.
pub(super) fn state_list(states: &[NotificationState]) -> String {
    let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    serde_json::to_string(&names).expect("a list of names serialises")
}

pub(super) fn ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

pub(super) fn parse_ts(s: &str) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

pub(super) fn ms(t: &DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(super) fn from_ms(ms: i64) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| {
        rusqlite::Error::ToSqlConversionFailure(format!("timestamp {ms} out of range").into())
    })
}

pub(super) fn parse_uuid(s: &str) -> rusqlite::Result<Uuid> {
    Uuid::parse_str(s).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

pub(super) fn parse_json<T: serde::de::DeserializeOwned>(s: &str) -> rusqlite::Result<T> {
    serde_json::from_str(s).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

pub(super) fn to_json<T: serde::Serialize>(v: &T) -> rusqlite::Result<String> {
    serde_json::to_string(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

pub(super) const KEY_COLUMNS: &str = "id, name, org, project, hash, prefix, rate_limit, \
     created_at, revoked_at, scopes, previous_hash, previous_expires_at, last_used_at";

/// An optional RFC 3339 column.
pub(super) fn opt_ts(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<DateTime<Utc>>> {
    r.get::<_, Option<String>>(i)?
        .map(|s| parse_ts(&s))
        .transpose()
}

/// A key's scopes as stored: a JSON array of names.
pub(super) fn scope_names(scopes: &[KeyScope]) -> rusqlite::Result<String> {
    to_json(&KeyScope::names(scopes))
}

pub(super) fn key_from_row(r: &Row<'_>) -> rusqlite::Result<ApiKey> {
    Ok(ApiKey {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        name: r.get(1)?,
        scope: Scope::new(r.get::<_, String>(2)?, r.get::<_, String>(3)?),
        hash: r.get(4)?,
        prefix: r.get(5)?,
        rate_limit: r.get(6)?,
        created_at: parse_ts(&r.get::<_, String>(7)?)?,
        revoked_at: opt_ts(r, 8)?,
        previous_hash: r.get(10)?,
        previous_expires_at: opt_ts(r, 11)?,
        last_used_at: opt_ts(r, 12)?,
        scopes: match r.get::<_, Option<String>>(9)? {
            None => KeyScope::ALL.to_vec(),
            Some(names) => KeyScope::from_names(
                parse_json::<Vec<String>>(&names)?
                    .iter()
                    .map(String::as_str),
            ),
        },
    })
}

pub(super) const EVENT_COLUMNS: &str = "id, org, project, channel_name, title, description, icon, \
     tags, metadata, user_id, notify, source, created_at, notification_state, request_id, \
     notification_due_ms, priority, alert_key, parser, url";

pub(super) fn event_from_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        scope: Scope::new(r.get::<_, String>(1)?, r.get::<_, String>(2)?),
        channel_name: r.get(3)?,
        title: r.get(4)?,
        description: r.get(5)?,
        icon: r.get(6)?,
        tags: parse_json(&r.get::<_, String>(7)?)?,
        metadata: parse_json(&r.get::<_, String>(8)?)?,
        user_id: r.get(9)?,
        notify: r.get(10)?,
        source: r.get(11)?,
        created_at: parse_ts(&r.get::<_, String>(12)?)?,
        notification: parse_enum(&r.get::<_, String>(13)?, NotificationState::parse)?,
        request_id: r.get(14)?,
        notification_due_at: r.get::<_, Option<i64>>(15)?.map(from_ms).transpose()?,
        priority: parse_enum(&r.get::<_, String>(16)?, Priority::parse)?,
        alert_key: r.get(17)?,
        parser: Parser::from_stored(Some(&r.get::<_, String>(18)?))
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?,
        url: r.get(19)?,
    })
}

pub(super) fn parse_enum<T>(s: &str, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    parse(s).ok_or_else(|| {
        rusqlite::Error::ToSqlConversionFailure(format!("unknown state {s:?}").into())
    })
}

/// `token` holds what identifies the device in its scope (an APNs or FCM
/// token, or a Web Push endpoint), so one unique index serves every kind;
/// `environment` is APNs' only (empty for the others), `p256dh` and `auth`
/// Web Push's only.
pub(super) const DEVICE_COLUMNS: &str = "id, org, project, token, environment, name, channels, \
     active, deactivated_reason, created_at, updated_at, kind, p256dh, auth, rules";

/// The columns of [`DEVICE_COLUMNS`] that depend on the kind: `environment`,
/// `kind`, `p256dh`, `auth`.
pub(super) fn target_columns(
    target: &PushTarget,
) -> (&'static str, &'static str, Option<&str>, Option<&str>) {
    let kind = target.kind().as_str();
    match target {
        PushTarget::Apns { environment, .. } => (environment.as_str(), kind, None, None),
        PushTarget::WebPush(s) => ("", kind, Some(&s.p256dh), Some(&s.auth)),
        PushTarget::Fcm { .. } => ("", kind, None, None),
    }
}

pub(super) fn device_from_row(r: &Row<'_>) -> rusqlite::Result<Device> {
    let token: String = r.get(3)?;
    let target = match parse_enum(&r.get::<_, String>(11)?, DeviceKind::parse)? {
        DeviceKind::Apns => PushTarget::Apns {
            token,
            environment: parse_enum(&r.get::<_, String>(4)?, ApnsEnvironment::parse)?,
        },
        DeviceKind::Webpush => PushTarget::WebPush(WebPushSubscription {
            endpoint: token,
            p256dh: r.get::<_, Option<String>>(12)?.unwrap_or_default(),
            auth: r.get::<_, Option<String>>(13)?.unwrap_or_default(),
        }),
        DeviceKind::Fcm => PushTarget::Fcm { token },
    };
    Ok(Device {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        scope: Scope::new(r.get::<_, String>(1)?, r.get::<_, String>(2)?),
        target,
        name: r.get(5)?,
        rules: AlertRules {
            channels: r
                .get::<_, Option<String>>(6)?
                .map(|c| parse_json(&c))
                .transpose()?,
            // Stored before rules were: every alert.
            ..r.get::<_, Option<String>>(14)?
                .map(|rules| parse_json(&rules))
                .transpose()?
                .unwrap_or_else(AlertRules::every_alert)
        },
        active: r.get(7)?,
        deactivated_reason: r.get(8)?,
        created_at: parse_ts(&r.get::<_, String>(9)?)?,
        updated_at: parse_ts(&r.get::<_, String>(10)?)?,
    })
}

pub(super) const DELIVERY_COLUMNS: &str = "event_id, device_id, state, attempts, error, apns_id, \
     updated_at, lease_until_ms, provider, reason, summary_id";

/// A delivery's state from its `state` and `reason` columns.
pub(super) fn delivery_state(state: &str, reason: Option<&str>) -> rusqlite::Result<DeliveryState> {
    DeliveryState::parse(state, reason).ok_or_else(|| {
        rusqlite::Error::ToSqlConversionFailure(
            format!("unknown delivery state {state:?} ({reason:?})").into(),
        )
    })
}

pub(super) fn delivery_from_row(r: &Row<'_>) -> rusqlite::Result<Delivery> {
    Ok(Delivery {
        event_id: parse_uuid(&r.get::<_, String>(0)?)?,
        device_id: parse_uuid(&r.get::<_, String>(1)?)?,
        state: delivery_state(
            &r.get::<_, String>(2)?,
            r.get::<_, Option<String>>(9)?.as_deref(),
        )?,
        attempts: r.get(3)?,
        error: r.get(4)?,
        apns_id: r.get(5)?,
        updated_at: parse_ts(&r.get::<_, String>(6)?)?,
        lease_until: match r.get::<_, i64>(7)? {
            0 => None,
            ms => Some(from_ms(ms)?),
        },
        provider: r.get(8)?,
        summary_id: r
            .get::<_, Option<String>>(10)?
            .map(|id| parse_uuid(&id))
            .transpose()?,
    })
}

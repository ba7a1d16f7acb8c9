//! Records to BSON documents and back: the only place that knows field names
//! and BSON types. JSON values (event metadata, identity properties) are
//! converted by hand so that no client input can make a write fail, and keys
//! BSON cannot hold are escaped.

use chrono::{DateTime, Utc};
use mongodb::bson::{self, Bson, Document, doc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::rules::AlertRules;
use crate::store::{
    ApiKey, ApnsEnvironment, Delivery, DeliveryState, Device, DeviceKind, Event, Identity,
    KeyScope, NotificationState, Parser, Priority, PushTarget, Scope, StoreError, StoreResult,
    WebPushSubscription,
};

/// A stored document that does not read back as its record.
pub(super) fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(anyhow::anyhow!("unreadable {what} document: {e}"))
}

/// The filter every scoped query starts from.
pub(super) fn scope_filter(scope: &Scope) -> Document {
    doc! { "org": &scope.org, "project": &scope.project }
}

pub(super) fn date(t: &DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(*t)
}

pub(super) fn opt_date(d: &Document, key: &str) -> Option<DateTime<Utc>> {
    d.get_datetime(key).ok().map(|t| t.to_chrono())
}

pub(super) fn opt_str(d: &Document, key: &str) -> Option<String> {
    d.get_str(key).ok().map(str::to_owned)
}

pub(super) fn state_names(states: &[NotificationState]) -> Vec<&'static str> {
    states.iter().map(|s| s.as_str()).collect()
}

/// JSON → BSON without the serializer's failure modes: integers that do not
/// fit i64 become doubles instead of an error, so no client input can make a
/// write fail.
fn to_bson(v: &Value) -> Bson {
    match v {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Bson::Int64(i),
            None => Bson::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Bson::String(s.clone()),
        Value::Array(a) => Bson::Array(a.iter().map(to_bson).collect()),
        Value::Object(o) => Bson::Document(to_document(o)),
    }
}

pub(super) fn to_document(map: &Map<String, Value>) -> Document {
    map.iter()
        .map(|(k, v)| (encode_key(k), to_bson(v)))
        .collect()
}

/// Escapes the characters BSON cannot hold in a key. Keys are C strings, so
/// a client's key containing NUL (valid JSON, and fine in SQLite) would
/// make the driver refuse the whole write; escaped, it round-trips, and
/// both stores give the same answer. U+FFFF (a noncharacter) is the escape:
/// NUL becomes U+FFFF '0' and U+FFFF itself U+FFFF '1', so every key maps
/// to one stored key and back. Keys without either are stored as they are.
const KEY_ESCAPE: char = '\u{FFFF}';

fn encode_key(key: &str) -> String {
    if !key.contains(['\0', KEY_ESCAPE]) {
        return key.to_owned();
    }
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        match c {
            '\0' => out.extend([KEY_ESCAPE, '0']),
            KEY_ESCAPE => out.extend([KEY_ESCAPE, '1']),
            c => out.push(c),
        }
    }
    out
}

fn decode_key(key: &str) -> String {
    if !key.contains(KEY_ESCAPE) {
        return key.to_owned();
    }
    let mut out = String::with_capacity(key.len());
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match (c, c == KEY_ESCAPE) {
            (_, true) => match chars.next() {
                Some('0') => out.push('\0'),
                // '1', or a lone escape written before escaping existed.
                Some('1') | None => out.push(KEY_ESCAPE),
                Some(other) => out.extend([KEY_ESCAPE, other]),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

fn to_json(b: &Bson) -> Value {
    match b {
        Bson::Null | Bson::Undefined => Value::Null,
        Bson::Boolean(v) => Value::Bool(*v),
        Bson::Int32(i) => Value::from(*i),
        Bson::Int64(i) => Value::from(*i),
        Bson::Double(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Bson::String(s) => Value::String(s.clone()),
        Bson::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Bson::Document(d) => Value::Object(from_document(d)),
        other => other.clone().into_relaxed_extjson(),
    }
}

pub(super) fn from_document(d: &Document) -> Map<String, Value> {
    d.iter().map(|(k, v)| (decode_key(k), to_json(v))).collect()
}

pub(super) fn key_to_doc(k: &ApiKey) -> Document {
    doc! {
        "_id": k.id.to_string(),
        "name": k.name.clone(),
        "org": &k.scope.org,
        "project": &k.scope.project,
        "hash": &k.hash,
        "prefix": &k.prefix,
        "rateLimit": k.rate_limit.map(i64::from),
        "createdAt": date(&k.created_at),
        "revokedAt": k.revoked_at.as_ref().map(date),
        "scopes": KeyScope::names(&k.scopes),
        "previousHash": k.previous_hash.clone(),
        "previousExpiresAt": k.previous_expires_at.as_ref().map(date),
        "lastUsedAt": k.last_used_at.as_ref().map(date),
    }
}

pub(super) fn key_from_doc(d: &Document) -> StoreResult<ApiKey> {
    let parse = || -> anyhow::Result<ApiKey> {
        Ok(ApiKey {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            name: opt_str(d, "name"),
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            hash: d.get_str("hash")?.to_owned(),
            prefix: d.get_str("prefix")?.to_owned(),
            rate_limit: d.get_i64("rateLimit").ok().map(u32::try_from).transpose()?,
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            revoked_at: opt_date(d, "revokedAt"),
            previous_hash: opt_str(d, "previousHash"),
            previous_expires_at: opt_date(d, "previousExpiresAt"),
            last_used_at: opt_date(d, "lastUsedAt"),
            // Missing on keys stored before scopes existed: they had full
            // access, so they keep every scope.
            scopes: match strings(d, "scopes")? {
                None => KeyScope::ALL.to_vec(),
                Some(names) => KeyScope::from_names(names.iter().map(String::as_str)),
            },
        })
    };
    parse().map_err(|e| corrupt("api key", e))
}

pub(super) fn event_to_doc(e: &Event) -> Document {
    doc! {
        "_id": e.id.to_string(),
        "org": &e.scope.org,
        "project": &e.scope.project,
        "channelName": &e.channel_name,
        "title": &e.title,
        "description": e.description.clone(),
        "icon": e.icon.clone(),
        "tags": e.tags.clone(),
        "metadata": to_document(&e.metadata),
        "userId": e.user_id.clone(),
        "notify": e.notify,
        "source": e.source.clone(),
        "createdAt": date(&e.created_at),
        "notification": e.notification.as_str(),
        "requestId": e.request_id.clone(),
        "notificationDueAt": e.notification_due_at.as_ref().map(date),
        "priority": e.priority.as_str(),
        "alertKey": e.alert_key.clone(),
        "parser": e.parser.as_str(),
        "url": e.url.clone(),
    }
}

pub(super) fn event_from_doc(d: &Document) -> StoreResult<Event> {
    let parse = || -> anyhow::Result<Event> {
        Ok(Event {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            channel_name: d.get_str("channelName")?.to_owned(),
            title: d.get_str("title")?.to_owned(),
            description: opt_str(d, "description"),
            icon: opt_str(d, "icon"),
            tags: d
                .get_array("tags")?
                .iter()
                .map(|t| t.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| anyhow::anyhow!("a tag is not a string"))?,
            metadata: from_document(d.get_document("metadata")?),
            user_id: opt_str(d, "userId"),
            notify: d.get_bool("notify")?,
            source: opt_str(d, "source"),
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            notification: NotificationState::parse(d.get_str("notification")?)
                .ok_or_else(|| anyhow::anyhow!("unknown notification state"))?,
            request_id: opt_str(d, "requestId"),
            notification_due_at: opt_date(d, "notificationDueAt"),
            priority: Priority::from_stored(d.get_str("priority").ok())?,
            alert_key: opt_str(d, "alertKey"),
            parser: Parser::from_stored(d.get_str("parser").ok())?,
            url: opt_str(d, "url"),
        })
    };
    parse().map_err(|e| corrupt("event", e))
}

/// `token` holds what identifies the device in its scope (an APNs or FCM
/// token, or a Web Push endpoint), under the one unique index; documents
/// stored before device kinds have no `kind` and are APNs'.
pub(super) fn device_to_doc(d: &Device) -> Document {
    let mut doc = doc! {
        "_id": d.id.to_string(),
        "org": &d.scope.org,
        "project": &d.scope.project,
        "kind": d.kind().as_str(),
        "token": d.target.address(),
        "name": d.name.clone(),
        "channels": d.rules.channels.clone(),
        "rules": rules_to_doc(&d.rules),
        "active": d.active,
        "deactivatedReason": d.deactivated_reason.clone(),
        "createdAt": date(&d.created_at),
        "updatedAt": date(&d.updated_at),
    };
    match &d.target {
        PushTarget::Apns { environment, .. } => {
            doc.insert("environment", environment.as_str());
        }
        PushTarget::WebPush(s) => {
            doc.insert("p256dh", &s.p256dh);
            doc.insert("auth", &s.auth);
        }
        PushTarget::Fcm { .. } => {}
    }
    doc
}

/// A device's rules but its channels (kept in their own field, which
/// predates the rules).
fn rules_to_doc(rules: &AlertRules) -> Document {
    bson::to_document(rules).expect("rules always serialise")
}

fn strings(d: &Document, key: &str) -> anyhow::Result<Option<Vec<String>>> {
    match d.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| anyhow::anyhow!("{key} holds a non-string")),
        Some(_) => anyhow::bail!("{key} is not an array"),
    }
}

pub(super) fn device_from_doc(d: &Document) -> StoreResult<Device> {
    let parse = || -> anyhow::Result<Device> {
        let token = d.get_str("token")?.to_owned();
        let kind = match opt_str(d, "kind") {
            None => DeviceKind::Apns,
            Some(kind) => {
                DeviceKind::parse(&kind).ok_or_else(|| anyhow::anyhow!("unknown kind"))?
            }
        };
        let target = match kind {
            DeviceKind::Apns => PushTarget::Apns {
                token,
                environment: ApnsEnvironment::parse(d.get_str("environment")?)
                    .ok_or_else(|| anyhow::anyhow!("unknown environment"))?,
            },
            DeviceKind::Webpush => PushTarget::WebPush(WebPushSubscription {
                endpoint: token,
                p256dh: d.get_str("p256dh")?.to_owned(),
                auth: d.get_str("auth")?.to_owned(),
            }),
            DeviceKind::Fcm => PushTarget::Fcm { token },
        };
        Ok(Device {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            target,
            name: opt_str(d, "name"),
            rules: AlertRules {
                channels: strings(d, "channels")?,
                ..match d.get_document("rules") {
                    Ok(rules) => bson::from_document(rules.clone())?,
                    // Stored before rules were: every alert.
                    Err(_) => AlertRules::every_alert(),
                }
            },
            active: d.get_bool("active")?,
            deactivated_reason: opt_str(d, "deactivatedReason"),
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            updated_at: d.get_datetime("updatedAt")?.to_chrono(),
        })
    };
    parse().map_err(|e| corrupt("device", e))
}

pub(super) fn delivery_from_doc(d: &Document) -> StoreResult<Delivery> {
    let parse = || -> anyhow::Result<Delivery> {
        Ok(Delivery {
            event_id: Uuid::parse_str(d.get_str("eventId")?)?,
            device_id: Uuid::parse_str(d.get_str("deviceId")?)?,
            state: DeliveryState::parse(d.get_str("state")?, d.get_str("reason").ok())
                .ok_or_else(|| anyhow::anyhow!("unknown delivery state"))?,
            attempts: u32::try_from(d.get_i64("attempts")?)?,
            error: opt_str(d, "error"),
            apns_id: opt_str(d, "apnsId"),
            provider: opt_str(d, "provider"),
            summary_id: opt_str(d, "summaryId")
                .map(|id| Uuid::parse_str(&id))
                .transpose()?,
            updated_at: d.get_datetime("updatedAt")?.to_chrono(),
            lease_until: d.get_datetime("leaseUntil").ok().map(|t| t.to_chrono()),
        })
    };
    parse().map_err(|e| corrupt("delivery", e))
}

/// A user's document as stored: the user, and what the identities module
/// keeps beside it (`identities.rs` says what each is for).
#[derive(Debug, Clone)]
pub(super) struct UserDoc {
    pub(super) identity: Identity,
    /// What identify's optimistic-concurrency check compares (event
    /// counts never change it).
    pub(super) version: i64,
    /// Set once the user was merged into this one: it only forwards.
    pub(super) merged_into: Option<String>,
    /// For each user merged into this one, how many of its events this
    /// one's count holds.
    pub(super) folded: Vec<(String, u64)>,
    /// Whether it was ever seen (an alias's own document is not, until an
    /// event is recorded under it): only then do its seen times count.
    pub(super) seen: bool,
}

/// An integer field, whichever width it was stored with; 0 when absent.
fn int(d: &Document, key: &str) -> i64 {
    match d.get(key) {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Double(f)) => *f as i64,
        _ => 0,
    }
}

pub(super) fn user_from_doc(d: &Document) -> StoreResult<UserDoc> {
    let parse = || -> anyhow::Result<UserDoc> {
        let created_at = d.get_datetime("createdAt")?.to_chrono();
        let updated_at = d.get_datetime("updatedAt")?.to_chrono();
        let identity = Identity {
            user_id: d.get_str("userId")?.to_owned(),
            properties: d
                .get_document("properties")
                .map(from_document)
                .unwrap_or_default(),
            aliases: d
                .get_array("aliases")
                .map(|a| {
                    a.iter()
                        .filter_map(|a| a.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            created_at,
            updated_at,
            // Identified before counters were: seen when identified.
            first_seen_at: opt_date(d, "firstSeenAt").unwrap_or(created_at),
            last_seen_at: opt_date(d, "lastSeenAt").unwrap_or(updated_at),
            event_count: u64::try_from(int(d, "eventCount")).unwrap_or(0),
        };
        let folded = d
            .get_array("folded")
            .map(|a| {
                a.iter()
                    .filter_map(|f| {
                        let f = f.as_document()?;
                        let n = u64::try_from(int(f, "eventCount")).unwrap_or(0);
                        Some((f.get_str("userId").ok()?.to_owned(), n))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(UserDoc {
            identity,
            version: int(d, "version"),
            merged_into: opt_str(d, "mergedInto"),
            folded,
            seen: d.contains_key("lastSeenAt"),
        })
    };
    parse().map_err(|e| corrupt("identity", e))
}

/// The whole document of a new user of `scope`.
pub(super) fn user_to_doc(scope: &Scope, user: &UserDoc) -> Document {
    let i = &user.identity;
    let mut document = scope_filter(scope);
    document.insert("userId", &i.user_id);
    document.extend(user_fields(user));
    document.insert("createdAt", date(&i.created_at));
    document.insert(
        "eventCount",
        i64::try_from(i.event_count).unwrap_or(i64::MAX),
    );
    document.insert("firstSeenAt", date(&i.first_seen_at));
    document.insert("lastSeenAt", date(&i.last_seen_at));
    document
}

/// The fields of a user that identify writes (the counters are written
/// apart, with `$inc` and conditional sets, so that no event's count is
/// overwritten).
pub(super) fn user_fields(user: &UserDoc) -> Document {
    let folded: Vec<Document> = user
        .folded
        .iter()
        .map(|(id, n)| doc! { "userId": id, "eventCount": i64::try_from(*n).unwrap_or(i64::MAX) })
        .collect();
    doc! {
        "properties": to_document(&user.identity.properties),
        "aliases": user.identity.aliases.clone(),
        "updatedAt": date(&user.identity.updated_at),
        "version": user.version,
        "folded": folded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_bson_cannot_hold_round_trip_through_the_escape() {
        for key in [
            "plain",
            "a\0b",
            "\0",
            "\u{FFFF}",
            "\u{FFFF}0",
            "x\u{FFFF}1\0\u{FFFF}",
            "$ref",
            "a.b",
            "",
        ] {
            let stored = encode_key(key);
            assert!(!stored.contains('\0'), "{key:?} -> {stored:?}");
            assert_eq!(decode_key(&stored), key, "{key:?} -> {stored:?}");
        }
        assert_eq!(encode_key("plain"), "plain");
    }

    fn key(scopes: Vec<KeyScope>) -> ApiKey {
        ApiKey {
            id: Uuid::now_v7(),
            name: None,
            scope: Scope::new("acme", "web"),
            hash: "h".into(),
            prefix: "tocsin_abcdef".into(),
            rate_limit: None,
            scopes,
            created_at: bson::DateTime::now().to_chrono(),
            revoked_at: None,
            previous_hash: None,
            previous_expires_at: None,
            last_used_at: None,
        }
    }

    #[test]
    fn a_key_document_without_scopes_has_every_scope() {
        let mut old = key_to_doc(&key(vec![KeyScope::DevicesWrite]));
        old.remove("scopes");
        let read = key_from_doc(&old).expect("reads");
        assert_eq!(read.scopes, KeyScope::ALL.to_vec());
    }

    #[test]
    fn key_scopes_round_trip_and_unknown_names_grant_nothing() {
        let k = key(vec![KeyScope::EventsRead, KeyScope::DevicesWrite]);
        let mut d = key_to_doc(&k);
        assert_eq!(key_from_doc(&d).expect("reads"), k);
        d.insert("scopes", vec!["devices:write", "billing:admin"]);
        let read = key_from_doc(&d).expect("reads");
        assert_eq!(read.scopes, vec![KeyScope::DevicesWrite]);
        d.insert("scopes", Vec::<String>::new());
        assert!(key_from_doc(&d).expect("reads").scopes.is_empty());
    }
}

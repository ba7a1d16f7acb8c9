//! Field types whose published schema says more than poem-openapi's
//! built-ins can: an emoji icon (or its shortcode), a backfilled event's
//! time, a string that may be null, and an event's metadata as the store
//! holds it.

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet},
    sync::LazyLock,
};

use chrono::{DateTime, SubsecRound as _, Utc};
use poem_openapi::{
    registry::{MetaSchema, MetaSchemaRef},
    types::{ParseError, ParseFromJSON, ParseResult, ToJSON, Type},
};
use serde_json::Value;
use unicode_segmentation::UnicodeSegmentation as _;

/// Whether `s` is exactly one emoji: one extended grapheme cluster that the
/// Unicode emoji list knows, including skin tones, ZWJ sequences, flags and
/// keycaps (`🚀`, `👍🏽`, `🏳️‍🌈`, `🇫🇷`), and nothing else.
pub fn is_single_emoji(s: &str) -> bool {
    let mut graphemes = s.graphemes(true);
    graphemes.next().is_some() && graphemes.next().is_none() && emojis::get(s).is_some()
}

/// Every string [`is_single_emoji`] accepts: each emoji of the list, in every
/// skin tone, fully qualified or with any of its `U+FE0F` variation selectors
/// left out, and the prefixes of those, with or without a selector added, as
/// far as the list knows that spelling.
fn accepted_emojis() -> BTreeSet<String> {
    let mut accepted = BTreeSet::new();
    for emoji in emojis::iter() {
        let tones = emoji.skin_tones().into_iter().flatten();
        for variant in std::iter::once(emoji).chain(tones) {
            let full = variant.as_str();
            let selectors = full.matches('\u{FE0F}').count();
            for dropped in 0u32..(1 << selectors) {
                let mut index = 0;
                let spelling: String = full
                    .chars()
                    .filter(|&c| {
                        if c != '\u{FE0F}' {
                            return true;
                        }
                        index += 1;
                        dropped & (1 << (index - 1)) == 0
                    })
                    .collect();
                // The list also knows a few prefixes of keycaps (`1` +
                // `U+FE0F`) and emoji with a selector added (`👍` + `U+FE0F`).
                let prefixes = spelling
                    .char_indices()
                    .map(|(i, c)| &spelling[..i + c.len_utf8()]);
                for prefix in prefixes {
                    let selected = format!("{prefix}\u{FE0F}");
                    accepted.extend(
                        [prefix.to_owned(), selected]
                            .into_iter()
                            .filter(|s| is_single_emoji(s)),
                    );
                }
            }
        }
    }
    accepted
}

/// A character trie of strings, to write their alternation compactly.
#[derive(Default)]
struct Trie {
    end: bool,
    next: BTreeMap<char, Trie>,
}

impl Trie {
    fn insert(&mut self, s: &str) {
        let node = s
            .chars()
            .fold(self, |node, c| node.next.entry(c).or_default());
        node.end = true;
    }

    /// The regular expression matching exactly the strings below this node.
    fn write(&self, out: &mut String) {
        let group = self.next.len() > 1 || (self.end && !self.next.is_empty());
        if group {
            out.push_str("(?:");
        }
        for (i, (c, child)) in self.next.iter().enumerate() {
            if i > 0 {
                out.push('|');
            }
            // Syntax characters only: in Unicode mode (which JSON Schema asks
            // for) escaping anything else is an error.
            if "^$\\.*+?()[]{}|/".contains(*c) {
                out.push('\\');
            }
            out.push(*c);
            child.write(out);
        }
        if group {
            out.push(')');
            if self.end {
                out.push('?');
            }
        }
    }
}

/// Whether `s` is an icon: one emoji, or the shortcode of one (the
/// `emoji` format of the published schemas).
pub fn is_icon(s: &str) -> bool {
    is_single_emoji(s) || emoji_of_shortcode(s).is_some()
}

/// The emoji a shortcode names (`:moneybag:` is 💰), as GitHub's gemoji
/// list (the `emojis` crate's) spells them; `None` for anything else.
pub fn emoji_of_shortcode(s: &str) -> Option<&'static str> {
    let name = s.strip_prefix(':')?.strip_suffix(':')?;
    emojis::get_by_shortcode(name).map(emojis::Emoji::as_str)
}

/// The `pattern` published for an icon: the alternation of every accepted
/// emoji and every known shortcode between colons, so a client or a fuzzer
/// that knows nothing of `format: emoji` still sees the exact rule. Built
/// from the same list as [`is_single_emoji`] and [`emoji_of_shortcode`].
pub static EMOJI_PATTERN: LazyLock<String> = LazyLock::new(|| {
    let mut emoji = Trie::default();
    for accepted in accepted_emojis() {
        emoji.insert(&accepted);
    }
    let mut shortcodes = Trie::default();
    for name in emojis::iter().flat_map(emojis::Emoji::shortcodes) {
        shortcodes.insert(name);
    }
    let mut pattern = String::from("^(?:");
    emoji.write(&mut pattern);
    pattern.push_str("|:");
    shortcodes.write(&mut pattern);
    pattern.push_str(":)$");
    pattern
});

/// An event's icon: a single emoji, or a shortcode of one (`:moneybag:`)
/// that is stored and shown as the emoji (JSON Schema `format: emoji`, and
/// the equivalent [`EMOJI_PATTERN`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icon(pub String);

impl Type for Icon {
    const IS_REQUIRED: bool = true;
    type RawValueType = String;
    type RawElementValueType = String;

    fn name() -> Cow<'static, str> {
        "string_emoji".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            format: Some("emoji"),
            pattern: Some(EMOJI_PATTERN.clone()),
            description: Some(
                "Exactly one emoji, such as 🚀, 👍🏽, 🏳️‍🌈 or 🇫🇷, or its GitHub \
                 shortcode (`:moneybag:`, `:rotating_light:`), stored as the emoji.",
            ),
            example: Some(Value::String("🚀".into())),
            ..MetaSchema::new("string")
        }))
    }

    fn as_raw_value(&self) -> Option<&String> {
        Some(&self.0)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a String> + 'a> {
        Box::new(std::iter::once(&self.0))
    }
}

impl ParseFromJSON for Icon {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value {
            Some(Value::String(s)) if is_single_emoji(&s) => Ok(Self(s)),
            Some(Value::String(s)) if s.starts_with(':') && s.ends_with(':') && s.len() > 1 => {
                emoji_of_shortcode(&s)
                    .map(|emoji| Self(emoji.to_owned()))
                    .ok_or_else(|| ParseError::custom(format!("unknown emoji shortcode {s}")))
            }
            Some(Value::String(_)) => Err(ParseError::custom(
                "must be exactly one emoji, or a shortcode such as :rocket:",
            )),
            other => Err(ParseError::expected_type(other.unwrap_or_default())),
        }
    }
}

impl ToJSON for Icon {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.0.clone()))
    }
}

/// When a backfilled event happened: an RFC 3339 time, or Unix seconds (a
/// number, fractions allowed), kept to the millisecond as every store
/// keeps times. Whether it is in the past is the handler's check (it
/// depends on the clock and on retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTime(pub DateTime<Utc>);

/// Unix seconds beyond this are past the year 9999, which RFC 3339 cannot
/// write.
const LAST_UNIX_SECOND: f64 = 253_402_300_799.0;

impl Type for EventTime {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> Cow<'static, str> {
        "event_time".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        let time = MetaSchema {
            format: Some("date-time"),
            example: Some(Value::String("2026-11-20T09:30:00Z".into())),
            ..MetaSchema::new("string")
        };
        let seconds = MetaSchema {
            minimum: Some(0.0),
            maximum: Some(LAST_UNIX_SECOND),
            example: Some(Value::from(1_763_631_000)),
            ..MetaSchema::new("number")
        };
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            any_of: vec![
                MetaSchemaRef::Inline(Box::new(time)),
                MetaSchemaRef::Inline(Box::new(seconds)),
            ],
            description: Some(
                "An RFC 3339 time (2026-11-20T09:30:00Z) or Unix seconds (1763631000), \
                 in the past.",
            ),
            ..MetaSchema::ANY
        }))
    }

    fn as_raw_value(&self) -> Option<&Self> {
        Some(self)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self> + 'a> {
        Box::new(std::iter::once(self))
    }
}

impl ParseFromJSON for EventTime {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        let time = match value {
            Some(Value::String(s)) => DateTime::parse_from_rfc3339(&s)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| ParseError::custom("must be an RFC 3339 time"))?,
            Some(Value::Number(n)) => n
                .as_f64()
                .filter(|s| (0.0..=LAST_UNIX_SECOND).contains(s))
                .and_then(|s| DateTime::from_timestamp_millis((s * 1000.0).floor() as i64))
                .ok_or_else(|| ParseError::custom("must be Unix seconds from 0"))?,
            other => return Err(ParseError::expected_type(other.unwrap_or_default())),
        };
        Ok(Self(time.trunc_subsecs(3)))
    }
}

impl ToJSON for EventTime {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(
            self.0.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ))
    }
}

/// A value that is always present but may be `null`; published as
/// `type: [T, "null"]` and required. Wrap it in `Option` for an input field
/// that may also be left out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Nullable<T>(pub Option<T>);

impl<T: Type> Type for Nullable<T> {
    const IS_REQUIRED: bool = true;
    type RawValueType = T::RawValueType;
    type RawElementValueType = T::RawElementValueType;

    fn name() -> Cow<'static, str> {
        format!("nullable_{}", T::name()).into()
    }

    fn schema_ref() -> MetaSchemaRef {
        match T::schema_ref() {
            MetaSchemaRef::Inline(schema) => MetaSchemaRef::Inline(Box::new(MetaSchema {
                nullable: true,
                ..*schema
            })),
            reference => MetaSchemaRef::Inline(Box::new(MetaSchema {
                any_of: vec![
                    reference,
                    MetaSchemaRef::Inline(Box::new(MetaSchema::new("null"))),
                ],
                ..MetaSchema::ANY
            })),
        }
    }

    fn register(registry: &mut poem_openapi::registry::Registry) {
        T::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        self.0.as_ref().and_then(T::as_raw_value)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        match &self.0 {
            Some(inner) => inner.raw_element_iter(),
            None => Box::new(std::iter::empty()),
        }
    }

    fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl<T: ParseFromJSON> ParseFromJSON for Nullable<T> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value {
            None | Some(Value::Null) => Ok(Self(None)),
            some => T::parse_from_json(some)
                .map(|v| Self(Some(v)))
                .map_err(ParseError::propagate),
        }
    }
}

/// As `ToJSON` writes it: the value, or null.
impl<T: serde::Serialize> serde::Serialize for Nullable<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<T: ToJSON> ToJSON for Nullable<T> {
    fn to_json(&self) -> Option<Value> {
        Some(
            self.0
                .as_ref()
                .and_then(ToJSON::to_json)
                .unwrap_or(Value::Null),
        )
    }
}

/// A field of a change (`PATCH`): left out (keep what is there), `null`
/// (clear it), or a value (set it). Published as [`Nullable`] is, but not
/// required. (`Option<Nullable<T>>` cannot tell the first two apart:
/// poem-openapi reads an explicit `null` as a field left out.)
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Change<T> {
    #[default]
    Keep,
    Clear,
    Set(T),
}

impl<T> Change<T> {
    /// `None` to keep, `Some(None)` to clear, `Some(Some(v))` to set.
    pub fn into_patch(self) -> Option<Option<T>> {
        match self {
            Self::Keep => None,
            Self::Clear => Some(None),
            Self::Set(v) => Some(Some(v)),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Change<U> {
        match self {
            Self::Keep => Change::Keep,
            Self::Clear => Change::Clear,
            Self::Set(v) => Change::Set(f(v)),
        }
    }
}

impl<T: Type> Type for Change<T> {
    const IS_REQUIRED: bool = false;
    type RawValueType = T::RawValueType;
    type RawElementValueType = T::RawElementValueType;

    fn name() -> Cow<'static, str> {
        format!("change_{}", T::name()).into()
    }

    fn schema_ref() -> MetaSchemaRef {
        Nullable::<T>::schema_ref()
    }

    fn register(registry: &mut poem_openapi::registry::Registry) {
        T::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        match self {
            Self::Set(v) => v.as_raw_value(),
            _ => None,
        }
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        match self {
            Self::Set(v) => v.raw_element_iter(),
            _ => Box::new(std::iter::empty()),
        }
    }

    fn is_none(&self) -> bool {
        matches!(self, Self::Keep)
    }
}

impl<T: ParseFromJSON> ParseFromJSON for Change<T> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value {
            None => Ok(Self::Keep),
            Some(Value::Null) => Ok(Self::Clear),
            some => T::parse_from_json(some)
                .map(Self::Set)
                .map_err(ParseError::propagate),
        }
    }
}

impl<T: ToJSON> ToJSON for Change<T> {
    fn to_json(&self) -> Option<Value> {
        match self {
            Self::Keep => None,
            Self::Clear => Some(Value::Null),
            Self::Set(v) => v.to_json(),
        }
    }
}

/// An event's metadata as answers show it: the store's JSON object itself,
/// published as poem-openapi publishes a `BTreeMap<String, Value>` (an
/// object of any values). Converting the store's map into a `BTreeMap` for
/// each answer cost a sort and a node allocation per event for nothing:
/// the keys are already in order, since the API takes metadata as a
/// `BTreeMap` and the store keeps the order it was given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata(pub serde_json::Map<String, Value>);

impl Type for Metadata {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Value;

    fn name() -> Cow<'static, str> {
        <BTreeMap<String, Value> as Type>::name()
    }

    fn schema_ref() -> MetaSchemaRef {
        <BTreeMap<String, Value> as Type>::schema_ref()
    }

    fn register(registry: &mut poem_openapi::registry::Registry) {
        <BTreeMap<String, Value> as Type>::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        Some(self)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        Box::new(self.0.values())
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl ParseFromJSON for Metadata {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::Object(map) => Ok(Self(map)),
            other => Err(ParseError::expected_type(other)),
        }
    }
}

impl ToJSON for Metadata {
    fn to_json(&self) -> Option<Value> {
        Some(Value::Object(self.0.clone()))
    }
}

impl serde::Serialize for Metadata {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_emoji_of_every_shape_is_accepted() {
        for icon in ["🚀", "👍🏽", "🏳️‍🌈", "🇫🇷", "❤️", "1️⃣", "👨‍👩‍👧"]
        {
            assert!(is_single_emoji(icon), "{icon} should be one emoji");
        }
    }

    #[test]
    fn the_pattern_spells_out_exactly_the_accepted_emoji() {
        // Compiled by the same engine that validates requests.
        let pattern = jsonschema::validator_for(&serde_json::json!({ "pattern": *EMOJI_PATTERN }))
            .expect("the pattern compiles");
        let is_match = |s: &str| pattern.is_valid(&Value::String(s.into()));
        let accepted = accepted_emojis();
        // Qualified, unqualified, toned, ZWJ, flag and keycap spellings.
        for icon in [
            "🚀",
            "👍🏽",
            "🏳️‍🌈",
            "🏳‍🌈",
            "🇫🇷",
            "❤️",
            "❤",
            "1️⃣",
            "*️⃣",
            "👩🏿‍❤‍👩🏻",
        ] {
            assert!(accepted.contains(icon), "{icon} is in the list");
            assert!(is_match(icon), "{icon} matches");
        }
        for icon in accepted {
            assert!(is_match(&icon), "{icon} matches");
        }
        for shortcode in [
            ":rocket:",
            ":moneybag:",
            ":rotating_light:",
            ":+1:",
            ":t-rex:",
        ] {
            assert!(is_match(shortcode), "{shortcode} matches");
        }
        for icon in [
            "",
            "a",
            "ab",
            "🚀🚀",
            ":no_such_emoji:",
            ":rocket",
            "rocket:",
            "::",
            "🚀 ",
            "🇫",
            "🚀a",
            "*",
            "1",
            ":ROCKET:",
            ": rocket:",
        ] {
            assert!(!is_match(icon), "{icon:?} does not match");
        }
    }

    #[test]
    fn the_pattern_and_the_check_agree_on_every_code_point() {
        let pattern = jsonschema::validator_for(&serde_json::json!({ "pattern": *EMOJI_PATTERN }))
            .expect("the pattern compiles");
        for c in '\0'..='\u{1FFFF}' {
            for s in [
                c.to_string(),
                format!("{c}\u{FE0F}"),
                format!("{c}\u{FE0F}\u{20E3}"),
            ] {
                assert_eq!(
                    pattern.is_valid(&Value::String(s.clone())),
                    is_icon(&s),
                    "{s:?}"
                );
            }
        }
    }

    /// Every shortcode of the list matches the pattern and parses to its
    /// emoji; one the list does not know is refused.
    #[test]
    fn shortcodes_are_stored_as_their_emoji() {
        let pattern = jsonschema::validator_for(&serde_json::json!({ "pattern": *EMOJI_PATTERN }))
            .expect("the pattern compiles");
        for emoji in emojis::iter() {
            for name in emoji.shortcodes() {
                let code = format!(":{name}:");
                assert!(pattern.is_valid(&Value::String(code.clone())), "{code}");
                let icon = Icon::parse_from_json(Some(Value::String(code.clone())))
                    .unwrap_or_else(|_| panic!("{code} parses"));
                assert_eq!(icon.0, emoji.as_str(), "{code}");
                assert!(is_single_emoji(&icon.0), "{code} is stored as one emoji");
            }
        }
        assert_eq!(emoji_of_shortcode(":moneybag:"), Some("💰"));
        assert_eq!(emoji_of_shortcode(":rotating_light:"), Some("🚨"));
        let unknown = Icon::parse_from_json(Some(Value::String(":no_such_emoji:".into())))
            .expect_err("unknown shortcode");
        assert!(
            unknown.message().contains(":no_such_emoji:"),
            "{}",
            unknown.message()
        );
    }

    #[test]
    fn text_several_emoji_and_shortcodes_are_rejected() {
        for icon in ["", "a", "ab", "🚀🚀", ":rocket:", "🚀 ", " 🚀", "🇫", "🚀a"] {
            assert!(!is_single_emoji(icon), "{icon:?} should be rejected");
        }
    }
}

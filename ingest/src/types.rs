//! Field types whose published schema says more than poem-openapi's
//! built-ins can: an emoji icon, and a string that may be null.

use std::borrow::Cow;

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

/// An event's icon: a single emoji (JSON Schema `format: emoji`).
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
            description: Some("Exactly one emoji, such as 🚀, 👍🏽, 🏳️‍🌈 or 🇫🇷."),
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
            Some(Value::String(_)) => Err(ParseError::custom("must be exactly one emoji")),
            other => Err(ParseError::expected_type(other.unwrap_or_default())),
        }
    }
}

impl ToJSON for Icon {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.0.clone()))
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
    fn text_several_emoji_and_shortcodes_are_rejected() {
        for icon in ["", "a", "ab", "🚀🚀", ":rocket:", "🚀 ", " 🚀", "🇫", "🚀a"] {
            assert!(!is_single_emoji(icon), "{icon:?} should be rejected");
        }
    }
}

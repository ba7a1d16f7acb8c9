//! The words a client sees for each schema violation.
//!
//! Every message is a sentence a person can act on: it says what is expected,
//! taken from the published schema where it can be (a field's `description`,
//! its lengths, its example, an enum's values), and never echoes the
//! validator's own text — no regular expression, and no client value, which
//! may be long or secret (a device token).

use jsonschema::{
    JsonType, ValidationError,
    error::{TypeKind, ValidationErrorKind},
};
use serde_json::Value;

use super::unknown;
use crate::error::FieldError;

/// Patterns in words. A pattern cannot be read back into a rule a person
/// follows, so each one the API publishes is glossed here; one without a
/// gloss still gets its field's description.
pub(crate) const PATTERN_WORDS: &[(&str, &str)] = &[
    ("^[0-9a-fA-F]+$", "digits 0-9 and letters a-f only"),
    (
        "^-?[0-9]{1,15}\\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
        "a nextCursor this API gave out, passed unchanged",
    ),
    (
        "^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
        "an event id (a UUIDv7 in lower case, as the stream's id lines give it)",
    ),
    (
        "^[^:]+:",
        "a property's key, a colon, then the value to match, such as plan:pro",
    ),
    (
        "^-?[0-9]{1,18}\\.(?:[0-9a-f]{2}){1,1020}$",
        "a nextCursor this API gave out, passed unchanged",
    ),
    // An insight's title: "." and ".." cannot be named in a URL (clients
    // resolve them as path segments, encoded or not), so none of its
    // characters alone may be all of it.
    ("[^.]", "something other than dots alone"),
];

/// Turns one schema violation into the faults a client sees. `root` is the
/// document the validator was built from, where the violated schema is found.
pub(super) fn describe(error: &ValidationError<'_>, root: &Value) -> Vec<FieldError> {
    let path: Vec<String> = error
        .instance_path()
        .segments()
        .map(|s| s.to_string())
        .collect();
    let at = |extra: &str| {
        let mut p = path.clone();
        p.push(extra.to_owned());
        p
    };
    let one = |message: String| vec![FieldError::new(path.clone(), message)];
    // The schema object that holds the violated keyword.
    let schema = error
        .schema_path()
        .as_str()
        .rsplit_once('/')
        .and_then(|(parent, _keyword)| root.pointer(parent))
        .unwrap_or(&Value::Null);
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            vec![FieldError::new(at(name), "is required")]
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|name| FieldError::new(at(name), unknown::message(name, schema, error.instance())))
            .collect(),
        ValidationErrorKind::Type { kind } => one(format!("must be {}", type_names(kind))),
        // A field with a form (a pattern or a format) says the whole rule at
        // once, whichever part was broken; the duplicates are dropped later.
        ValidationErrorKind::Pattern { .. } | ValidationErrorKind::Format { .. } => {
            one(expected_form(schema))
        }
        ValidationErrorKind::MinLength { .. } | ValidationErrorKind::MaxLength { .. }
            if has_form(schema) =>
        {
            one(expected_form(schema))
        }
        ValidationErrorKind::MinLength { limit: 1 } => one("must not be empty".into()),
        ValidationErrorKind::MinLength { limit } => {
            one(format!("must be at least {limit} characters long"))
        }
        ValidationErrorKind::MaxLength { limit } => {
            one(format!("must be at most {limit} characters long"))
        }
        ValidationErrorKind::MaxItems { limit } => one(format!("must have at most {limit} items")),
        ValidationErrorKind::MinItems { limit } => one(format!("must have at least {limit} items")),
        ValidationErrorKind::MaxProperties { limit } => {
            one(format!("must have at most {limit} properties"))
        }
        ValidationErrorKind::UniqueItems => one("must not contain duplicates".into()),
        ValidationErrorKind::Enum { options } => {
            one(format!("must be one of: {}", listed(options)))
        }
        ValidationErrorKind::Minimum { limit } => {
            one(format!("must be at least {}", number(limit)))
        }
        ValidationErrorKind::Maximum { limit } => one(format!("must be at most {}", number(limit))),
        // A value of one of several forms (an RFC 3339 time or Unix
        // seconds) that has none: the field's description says them all.
        ValidationErrorKind::AnyOf { .. }
            if !has_null_branch(schema) && has_description(schema) =>
        {
            one(format!(
                "must be {}",
                phrase(schema["description"].as_str().unwrap_or_default())
            ))
        }
        // A value that may also be null (`anyOf: [schema, null]`, how a
        // nullable object or enum is published) and is not: its faults are
        // those of the schema, at their own paths.
        ValidationErrorKind::AnyOf { context } if !error.instance().is_null() => {
            let of_value: Vec<FieldError> = context
                .iter()
                .filter(|branch| !is_null_branch(branch))
                .flatten()
                .flat_map(|e| describe(e, root))
                .collect();
            if of_value.is_empty() {
                one(error.masked_with("the value").to_string())
            } else {
                of_value
            }
        }
        // A value of one of several types (`oneOf` of typed branches, how
        // an insight's value is published): the faults of the branch of
        // its own type (a string too long), or, when it is of none of
        // them, the types it may be.
        ValidationErrorKind::OneOfNotValid { context } => {
            let of_its_type: Vec<FieldError> = context
                .iter()
                .filter(|branch| type_fault(branch).is_none())
                .flatten()
                .flat_map(|e| describe(e, root))
                .collect();
            let types: Vec<String> = context.iter().filter_map(|b| type_fault(b)).collect();
            if !of_its_type.is_empty() {
                of_its_type
            } else if !types.is_empty() && types.len() == context.len() {
                one(format!("must be {}", either(&types)))
            } else {
                one(error.masked_with("the value").to_string())
            }
        }
        // Whatever else the schemas may grow: the validator's text with the
        // value masked, so nothing the client sent is echoed.
        _ => one(error.masked_with("the value").to_string()),
    }
}

/// Whether a branch of an `anyOf` failed only for not being null: the
/// `null` alternative of a nullable value.
fn is_null_branch(errors: &[ValidationError<'_>]) -> bool {
    matches!(errors, [e] if matches!(
        e.kind(),
        ValidationErrorKind::Type { kind: TypeKind::Single(JsonType::Null) }
    ))
}

/// A schema's number as a person writes it: poem-openapi publishes every
/// limit as a float, and `9007199254740991.0` is the integer it stands for.
fn number(limit: &Value) -> String {
    match limit.as_f64() {
        // Every integer up to 2^53 is exact as a float.
        Some(f) if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => {
            format!("{}", f as i64)
        }
        _ => limit.to_string(),
    }
}

/// The type a branch of a `oneOf` asks for, when the value failed it only
/// for being of another type.
fn type_fault(errors: &[ValidationError<'_>]) -> Option<String> {
    match errors {
        [e] => match e.kind() {
            ValidationErrorKind::Type { kind } => Some(type_names(kind)),
            _ => None,
        },
        _ => None,
    }
}

/// `a, b or c`.
fn either(choices: &[String]) -> String {
    match choices {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Whether an `anyOf` schema allows null: how a nullable value is
/// published.
fn has_null_branch(schema: &Value) -> bool {
    schema["anyOf"]
        .as_array()
        .is_some_and(|branches| branches.iter().any(|b| b["type"] == "null"))
}

fn has_description(schema: &Value) -> bool {
    schema.get("description").and_then(Value::as_str).is_some()
}

fn has_form(schema: &Value) -> bool {
    schema.get("pattern").is_some() || schema.get("format").is_some()
}

/// "must be <the field's description> (<its rules>)", for a field whose
/// value has a form: `must be the APNs device token, in hex (digits 0-9 and
/// letters a-f only, 32 to 200 characters)`.
fn expected_form(schema: &Value) -> String {
    let text = |key: &str| schema.get(key).and_then(Value::as_str);
    let what = match (text("description"), text("format")) {
        (Some(description), _) => phrase(description),
        (None, Some(format)) => format!("a valid {format}"),
        (None, None) => "in the expected form".to_owned(),
    };
    let mut rules = Vec::new();
    if let Some(words) = text("pattern").and_then(|p| {
        PATTERN_WORDS
            .iter()
            .find(|(pattern, _)| *pattern == p)
            .map(|(_, words)| *words)
    }) {
        rules.push(words.to_owned());
    }
    let limit = |key: &str| schema.get(key).and_then(Value::as_u64);
    match (limit("minLength"), limit("maxLength")) {
        (Some(min), Some(max)) => rules.push(format!("{min} to {max} characters")),
        (Some(min), None) => rules.push(format!("at least {min} characters")),
        (None, Some(max)) => rules.push(format!("at most {max} characters")),
        (None, None) => {}
    }
    if let Some(example) = schema
        .pointer("/examples/0")
        .or_else(|| schema.get("example"))
        .and_then(Value::as_str)
    {
        rules.push(format!("such as {example}"));
    }
    if rules.is_empty() {
        format!("must be {what}")
    } else {
        format!("must be {what} ({})", rules.join(", "))
    }
}

/// A description's first sentence as a phrase that can follow "must be":
/// `The APNs device token, in hex.` → `the APNs device token, in hex`.
fn phrase(description: &str) -> String {
    // Doc comments reach the document with their line breaks.
    let description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = description
        .split(". ")
        .next()
        .unwrap_or(&description)
        .trim()
        .trim_end_matches('.');
    let mut chars = first.chars();
    match (chars.next(), chars.next()) {
        // Lower the capital that starts a sentence, not an acronym's (`APNs`).
        (Some(c), Some(next)) if c.is_uppercase() && !next.is_uppercase() => c
            .to_lowercase()
            .chain(first[c.len_utf8()..].chars())
            .collect(),
        _ => first.to_owned(),
    }
}

/// An enum's values, each quoted: `` `production`, `sandbox` ``.
fn listed(options: &Value) -> String {
    let quoted = |v: &Value| match v {
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    };
    match options {
        Value::Array(values) => values.iter().map(quoted).collect::<Vec<_>>().join(", "),
        other => quoted(other),
    }
}

fn type_names(kind: &TypeKind) -> String {
    let article = |t: String| match t.as_str() {
        "null" => "null".to_owned(),
        "array" | "object" | "integer" => format!("an {t}"),
        _ => format!("a {t}"),
    };
    match kind {
        TypeKind::Single(t) => article(t.to_string()),
        TypeKind::Multiple(set) => set
            .iter()
            .map(|t| article(t.to_string()))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_becomes_a_phrase() {
        assert_eq!(
            phrase("The APNs device token, in hex."),
            "the APNs device token, in hex"
        );
        assert_eq!(phrase("APNs token. More."), "APNs token");
        assert_eq!(phrase("A single emoji."), "a single emoji");
    }

    #[test]
    fn a_limit_reads_as_the_number_it_stands_for() {
        assert_eq!(
            number(&serde_json::json!(9007199254740991.0)),
            "9007199254740991"
        );
        assert_eq!(number(&serde_json::json!(-1.0)), "-1");
        assert_eq!(number(&serde_json::json!(0.5)), "0.5");
        assert_eq!(number(&serde_json::json!(1e300)), "1e+300");
    }

    #[test]
    fn a_form_is_described_by_its_schema_and_never_by_its_pattern() {
        let token = serde_json::json!({
            "type": "string", "description": "The APNs device token, in hex.",
            "minLength": 32, "maxLength": 200, "pattern": "^[0-9a-fA-F]+$",
        });
        assert_eq!(
            expected_form(&token),
            "must be the APNs device token, in hex \
             (digits 0-9 and letters a-f only, 32 to 200 characters)"
        );
        let unglossed = serde_json::json!({ "pattern": "^x+$" });
        assert_eq!(expected_form(&unglossed), "must be in the expected form");
        let icon = serde_json::json!({
            "format": "emoji", "pattern": "^(?:🚀)$", "description": "A single emoji.",
            "examples": ["🚀"],
        });
        assert_eq!(expected_form(&icon), "must be a single emoji (such as 🚀)");
    }
}

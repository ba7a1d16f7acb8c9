//! What to say about a field a request body does not have: the field that
//! was meant, when the name is another spelling of a known one (`userID`,
//! `channel_name`), a typo (`titel`), or LogSnag's name for it (`channel`,
//! `event`) — clients moving from LogSnag send its bodies as they were.

use serde_json::Value;

/// What an unknown name most likely means.
enum Hint {
    /// This field of ours, when the body's schema has it.
    Field(&'static str),
    /// A note for a name that has no counterpart; `when` names a field the
    /// schema must have for the note to apply (`None`: every body).
    Note {
        text: &'static str,
        when: Option<&'static str>,
    },
}

/// LogSnag's `POST /v1/log` and `/v1/identify` fields, and a few other
/// common names, whose counterpart here is not the closest spelling (or
/// which have none). `description`, `icon`, `notify` and `tags` are the same
/// names here.
const ALIASES: &[(&str, Hint)] = &[
    ("channel", Hint::Field("channelName")),
    ("event", Hint::Field("title")),
    ("user_id", Hint::Field("userId")),
    ("notification", Hint::Field("notify")),
    ("push", Hint::Field("notify")),
    (
        "project",
        Hint::Note {
            text: "the API key selects the project; remove `project`",
            when: None,
        },
    ),
    (
        "timestamp",
        Hint::Note {
            text: "an event is dated when it is recorded (`createdAt`); remove `timestamp`",
            when: Some("channelName"),
        },
    ),
    (
        "parser",
        Hint::Note {
            text: "the description is stored as sent; remove `parser`",
            when: Some("description"),
        },
    ),
];

/// Longest unknown name quoted whole in a message; the path has it all.
const MAX_SHOWN: usize = 40;

/// The message for the unknown field `name` of `body`, an object of the
/// (closed) object schema `schema`.
pub(super) fn message(name: &str, schema: &Value, body: &Value) -> String {
    let known: Vec<&str> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let head = format!("unknown field `{}`", shown(name));
    match meant(name, &known) {
        Some(Meant::Field(field)) if body.get(field).is_some() => {
            format!("{head}; remove it, `{field}` is already given")
        }
        Some(Meant::Field(field)) => format!("{head}; did you mean `{field}`?"),
        Some(Meant::Note(note)) => format!("{head}; {note}"),
        None if known.is_empty() => head,
        None => {
            let fields: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
            format!("{head}; the fields are {}", fields.join(", "))
        }
    }
}

enum Meant<'a> {
    Field(&'a str),
    Note(&'static str),
}

/// The known field (or the note) `name` most likely stands for, if any.
fn meant<'a>(name: &str, known: &[&'a str]) -> Option<Meant<'a>> {
    let squashed = squash(name);
    // Another spelling of a known name: case, `_` and `-` aside.
    if let Some(field) = known.iter().find(|k| squash(k) == squashed) {
        return Some(Meant::Field(field));
    }
    for (alias, hint) in ALIASES {
        if *alias != name {
            continue;
        }
        match hint {
            Hint::Field(target) => {
                if let Some(field) = known.iter().find(|k| *k == target) {
                    return Some(Meant::Field(field));
                }
            }
            Hint::Note { text, when } => {
                if when.is_none_or(|w| known.contains(&w)) {
                    return Some(Meant::Note(text));
                }
            }
        }
    }
    closest(&squashed, known).map(Meant::Field)
}

/// The known name `name` most likely misspells: another spelling of it
/// (case, `_`, `-`), a typo or two away, or a prefix of it.
pub(crate) fn closest_name<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let squashed = squash(name);
    known
        .iter()
        .find(|k| squash(k) == squashed)
        .copied()
        .or_else(|| closest(&squashed, known))
}

/// The known name within a typo or two of `squashed`, or that it starts
/// (`env` → `environment`); the nearest wins, then the first in the schema.
fn closest<'a>(squashed: &str, known: &[&'a str]) -> Option<&'a str> {
    let chars = squashed.chars().count();
    let allowed = if chars <= 4 { 1 } else { 2 };
    known
        .iter()
        .filter_map(|k| {
            let candidate = squash(k);
            let distance = strsim::damerau_levenshtein(squashed, &candidate);
            let prefix = chars >= 3 && candidate.starts_with(squashed);
            (distance <= allowed || prefix).then_some((distance, *k))
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

/// A name with case, `_` and `-` taken out: `user_id`, `userID` → `userid`.
fn squash(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// `name`, cut to [`MAX_SHOWN`] characters.
fn shown(name: &str) -> String {
    match name.char_indices().nth(MAX_SHOWN) {
        Some((cut, _)) => format!("{}…", &name[..cut]),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &[&str] = &[
        "channelName",
        "title",
        "description",
        "icon",
        "tags",
        "metadata",
        "userId",
        "notify",
        "source",
    ];

    fn field(name: &str) -> Option<&'static str> {
        match meant(name, EVENT) {
            Some(Meant::Field(f)) => Some(f),
            _ => None,
        }
    }

    #[test]
    fn spellings_typos_and_logsnag_names_find_their_field() {
        for (name, expected) in [
            ("channel_name", "channelName"),
            ("USERID", "userId"),
            ("titel", "title"),
            ("descripton", "description"),
            ("tag", "tags"),
            ("meta", "metadata"),
            ("channel", "channelName"),
            ("event", "title"),
            ("user_id", "userId"),
            ("notification", "notify"),
        ] {
            assert_eq!(field(name), Some(expected), "{name}");
        }
        for name in ["colour", "x", "name", "priority"] {
            assert_eq!(field(name), None, "{name}");
        }
    }

    #[test]
    fn notes_apply_only_where_they_make_sense() {
        assert!(matches!(meant("project", &["token"]), Some(Meant::Note(_))));
        assert!(matches!(meant("timestamp", EVENT), Some(Meant::Note(_))));
        assert!(meant("timestamp", &["user_id", "properties", "aliases"]).is_none());
    }

    #[test]
    fn a_long_name_is_cut_in_the_message() {
        let name = "x".repeat(1000);
        let message = message(&name, &serde_json::json!({}), &Value::Null);
        assert_eq!(
            message,
            format!("unknown field `{}…`", "x".repeat(MAX_SHOWN))
        );
    }
}

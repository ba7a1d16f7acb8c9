//! The shipped defaults files as the configuration reference. Each service's
//! `config.default.toml` (and `common/backend.default.toml`) is both what the
//! code loads first and what operators read: every setting appears there,
//! with its default (or commented out, when it has none) under a comment
//! saying what it does. [`service_reference_gaps`] finds where a file falls
//! short of that, so a test can keep the files and the structs from drifting.

use std::collections::BTreeSet;

use serde_aux::serde_introspection::serde_introspect;

use super::{Backend, ServiceSettings, backend};

/// One setting as a defaults file writes it: `key = value`, or
/// `# key = value` for a setting shipped unset.
struct Entry<'a> {
    key: &'a str,
    /// Whether the lines above its block (itself and the settings written
    /// right above it) start with a comment.
    described: bool,
}

/// The setting a line writes, set or commented out, if it writes one.
fn setting(line: &str) -> Option<&str> {
    let line = line.strip_prefix("# ").unwrap_or(line);
    let (key, _) = line.split_once(" = ")?;
    let valid = key.starts_with(|c: char| c.is_ascii_lowercase())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    valid.then_some(key)
}

/// Every setting a defaults file writes, in order.
fn entries(defaults: &str) -> Vec<Entry<'_>> {
    let lines: Vec<&str> = defaults.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(key) = setting(line) else { continue };
        // Settings described together (`relay_interval_ms` and
        // `relay_grace_ms`) share the comment above the first of them.
        let above = lines[..i].iter().rev().find(|l| setting(l).is_none());
        found.push(Entry {
            key,
            described: above.is_some_and(|l| l.starts_with('#')),
        });
    }
    found
}

/// Where `defaults` falls short as the reference of `fields`: a field it
/// does not write, a setting written without a comment above it, or a
/// setting that is not in `known` (a stale or misspelt entry).
fn gaps(defaults: &str, fields: &[&str], known: &BTreeSet<&str>) -> Vec<String> {
    let entries = entries(defaults);
    let written: BTreeSet<&str> = entries.iter().map(|e| e.key).collect();
    let mut gaps: Vec<String> = fields
        .iter()
        .filter(|field| !written.contains(*field))
        .map(|field| format!("`{field}` is not in the file"))
        .collect();
    for entry in &entries {
        if !known.contains(entry.key) {
            gaps.push(format!("`{}` is in the file but is no setting", entry.key));
        }
        if !entry.described {
            gaps.push(format!("`{}` has no comment above it", entry.key));
        }
    }
    gaps
}

/// Where a service's defaults file falls short as the reference of `T`'s
/// own settings (the shared store and broker ones may be overridden there,
/// but are written in `common/backend.default.toml`). Empty when every
/// setting is written and described.
pub fn service_reference_gaps<T: ServiceSettings>(defaults: &str) -> Vec<String> {
    gaps(defaults, serde_introspect::<T>(), &super::known_keys::<T>())
}

/// Where `common/backend.default.toml` falls short as the reference of the
/// shared store and broker settings.
pub fn backend_reference_gaps() -> Vec<String> {
    let fields = serde_introspect::<Backend>();
    gaps(backend::DEFAULTS, fields, &fields.iter().copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_defaults_file_writes_and_describes_every_shared_setting() {
        let gaps = backend_reference_gaps();
        assert!(gaps.is_empty(), "common/backend.default.toml: {gaps:#?}");
    }

    #[test]
    fn a_missing_an_undescribed_and_a_stale_setting_are_each_reported() {
        let file = "# The port.\nport = 1\n\nname = \"x\"\n\n# Gone.\n# old = 2\n";
        let known: BTreeSet<&str> = ["port", "name", "host"].into();
        let gaps = gaps(file, &["port", "name", "host"], &known);
        assert_eq!(
            gaps,
            [
                "`host` is not in the file",
                "`name` has no comment above it",
                "`old` is in the file but is no setting",
            ],
        );
    }

    #[test]
    fn settings_written_together_share_the_comment_above_them() {
        let file = "# Both relay settings.\nrelay_interval_ms = 1\n# relay_grace_ms = 2\n";
        let names = ["relay_interval_ms", "relay_grace_ms"];
        assert!(gaps(file, &names, &names.into()).is_empty());
    }
}

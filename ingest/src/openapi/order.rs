//! The order of the published document: tags, paths, and the operations of
//! a path, as a reader should meet them. The docs page lists them in the
//! document's order.

use poem_openapi::Tags as _;
use serde_json::{Map, Value};

use crate::api::ApiTags;

/// The order readers meet the API in: recording events first, then health,
/// and the operators' admin API last.
/// poem-openapi sorts tags by name.
const TAG_ORDER: [ApiTags; 6] = [
    ApiTags::Events,
    ApiTags::Identities,
    ApiTags::Insights,
    ApiTags::Devices,
    ApiTags::Health,
    ApiTags::Admin,
];

/// Within a path: create, read, then delete.
const METHOD_ORDER: [&str; 5] = ["post", "get", "put", "patch", "delete"];

/// Puts the tags, the paths and each path's operations in [`TAG_ORDER`] and
/// [`METHOD_ORDER`]: the docs page lists them as the document does (the maps
/// keep their order: serde_json's `preserve_order`).
pub fn for_readers(doc: &mut Value) {
    let rank = |tag: &str| {
        TAG_ORDER
            .iter()
            .position(|t| t.name() == tag)
            .unwrap_or(TAG_ORDER.len())
    };
    if let Some(tags) = doc.get_mut("tags").and_then(Value::as_array_mut) {
        tags.sort_by_key(|t| rank(t["name"].as_str().unwrap_or_default()));
    }
    let method_rank = |method: &str| {
        METHOD_ORDER
            .iter()
            .position(|m| *m == method)
            .unwrap_or(METHOD_ORDER.len())
    };
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for item in paths.values_mut().filter_map(Value::as_object_mut) {
            sort_map(item, |(a, _)| method_rank(a));
        }
        // A path goes where its first operation's tag goes; ties keep the
        // generated (alphabetical) order, the sort being stable.
        sort_map(paths, |(_, item)| {
            item.as_object()
                .and_then(|ops| ops.values().next())
                .and_then(|op| op.pointer("/tags/0"))
                .and_then(Value::as_str)
                .map_or(TAG_ORDER.len(), rank)
        });
    }
}

/// Sorts `map` by `key`, stably (ties keep their order).
fn sort_map(map: &mut Map<String, Value>, key: impl Fn((&String, &Value)) -> usize) {
    let mut entries: Vec<_> = std::mem::take(map).into_iter().collect();
    entries.sort_by_key(|(k, v)| key((k, v)));
    map.extend(entries);
}

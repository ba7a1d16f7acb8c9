//! The component schemas one schema reaches through `$ref`, so that each
//! validator is compiled from just those. Compiled from the whole
//! `components.schemas` instead, every validator kept its own copy of
//! every schema of the API: about 20 MiB of the server's memory, for
//! schemas none of its requests can reach.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Where the document's component schemas are referenced from.
const PREFIX: &str = "#/components/schemas/";

/// `name` and every component schema it reaches, each with its schema.
pub fn reachable(components: &Map<String, Value>, name: &str) -> Map<String, Value> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![name.to_owned()];
    while let Some(next) = todo.pop() {
        if !seen.insert(next.clone()) {
            continue;
        }
        if let Some(schema) = components.get(&next) {
            refs_in(schema, &mut todo);
        }
    }
    seen.into_iter()
        .filter_map(|n| components.get(&n).map(|s| (n, s.clone())))
        .collect()
}

/// Pushes the component names `value` references, at any depth.
fn refs_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(target)) => {
                        if let Some(name) = target.strip_prefix(PREFIX) {
                            out.push(name.to_owned());
                        }
                    }
                    _ => refs_in(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs_in(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_schema_reaches_what_it_references_and_nothing_else() {
        let components = json!({
            "A": { "properties": { "b": { "$ref": "#/components/schemas/B" } } },
            "B": { "items": { "oneOf": [{ "$ref": "#/components/schemas/C" }] } },
            "C": { "properties": { "a": { "$ref": "#/components/schemas/A" } } },
            "D": { "type": "string" },
        });
        let components = components.as_object().expect("an object");
        let names: Vec<_> = reachable(components, "A").keys().cloned().collect();
        assert_eq!(names, ["A", "B", "C"]);
        let names: Vec<_> = reachable(components, "D").keys().cloned().collect();
        assert_eq!(names, ["D"]);
    }
}

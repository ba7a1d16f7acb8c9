//! The `@tocsin/client` code sample of each operation (`x-codeSamples`,
//! which the docs page shows before its generic snippets): the client call
//! that does what the operation does, with the request body's example.

use serde_json::{Map, Value, json};

/// The client method that wraps each operation, by operation id, and its
/// argument when that is neither the request body nor the path's id. An
/// operation the client does not wrap is shown with `tocsin.request`.
const METHODS: [(&str, &str, Option<&str>); 11] = [
    ("createEvent", "events.create", None),
    ("getEvent", "events.get", None),
    (
        "listEvents",
        "events.list",
        Some(r#"{ channel: "payments", q: "failed", limit: 20 }"#),
    ),
    ("listChannels", "channels.list", None),
    ("eventStats", "stats.events", Some(r#"{ bucket: "hour" }"#)),
    (
        "streamEvents",
        "events.stream",
        Some(r#"{ channel: "payments" }"#),
    ),
    ("identify", "identify", None),
    ("getUser", "users.get", Some(r#""user_7""#)),
    ("registerDevice", "devices.register", None),
    ("listDevices", "devices.list", None),
    ("deleteDevice", "devices.delete", None),
];

/// Operations whose client call is an async iterable, not a promise.
const STREAMS: [&str; 1] = ["streamEvents"];

/// The id the samples pass for a path's `{id}`.
const EXAMPLE_ID: &str = "0197a3c2-5f1e-7b8a-9c0d-1e2f3a4b5c6d";

const SETUP: &str = r#"import { Tocsin } from "@tocsin/client";

const tocsin = new Tocsin(process.env.TOCSIN_API_KEY!, { baseUrl: "http://127.0.0.1:8080" });
"#;

/// Adds an `x-codeSamples` entry to every operation. Runs once the request
/// bodies carry their examples (`examples` of the body's schema).
pub fn add(doc: &mut Value) {
    let schemas = doc
        .pointer("/components/schemas")
        .cloned()
        .unwrap_or_default();
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            let Some(op) = op.as_object_mut() else {
                continue;
            };
            let source = sample(method, path, op, &schemas);
            op.insert(
                "x-codeSamples".into(),
                json!([{ "lang": "TypeScript", "label": "@tocsin/client", "source": source }]),
            );
        }
    }
}

fn sample(method: &str, path: &str, op: &Map<String, Value>, schemas: &Value) -> String {
    let body = op
        .get("requestBody")
        .and_then(|b| b.pointer("/content/application~1json/schema/$ref"))
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| schemas.get(name))
        .and_then(|schema| schema.pointer("/examples/0"))
        .map(|example| js_literal(example, 0));
    let operation_id = op.get("operationId").and_then(Value::as_str);
    let call = match METHODS.iter().find(|(id, _, _)| Some(*id) == operation_id) {
        Some((_, method, argument)) => {
            let argument = argument
                .map(str::to_owned)
                .or(body)
                .or_else(|| path.contains('{').then(|| format!("{EXAMPLE_ID:?}")));
            format!("{method}({})", argument.unwrap_or_default())
        }
        None => {
            let mut spec = format!(
                "{{ method: {:?}, path: {:?}",
                method.to_uppercase(),
                path.replace("{id}", EXAMPLE_ID)
            );
            if let Some(body) = body {
                spec.push_str(&format!(", body: {body}"));
            }
            format!("request({spec} }})")
        }
    };
    if operation_id.is_some_and(|id| STREAMS.contains(&id)) {
        return format!(
            "{SETUP}\nfor await (const event of tocsin.{call}) {{\n  console.log(event.title);\n}}\n"
        );
    }
    format!("{SETUP}\nconst {{ data }} = await tocsin.{call};\n")
}

/// `value` as a JavaScript literal, as a person would write it: keys
/// unquoted where they can be, arrays of plain values on one line.
fn js_literal(value: &Value, indent: usize) -> String {
    let pad = "  ".repeat(indent + 1);
    match value {
        Value::Object(map) if !map.is_empty() => {
            let fields: Vec<String> = map
                .iter()
                .map(|(key, value)| {
                    let plain = key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !key.starts_with(|c: char| c.is_ascii_digit());
                    let key = if plain {
                        key.clone()
                    } else {
                        json!(key).to_string()
                    };
                    format!("{pad}{key}: {},\n", js_literal(value, indent + 1))
                })
                .collect();
            format!("{{\n{}{}}}", fields.concat(), "  ".repeat(indent))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(|v| js_literal(v, indent)).collect();
            format!("[{}]", items.join(", "))
        }
        // Strings as JSON writes them are valid JavaScript strings.
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_reads_as_a_person_would_write_it() {
        let body = json!({ "channelName": "payments", "tags": ["eu", "card"],
            "metadata": { "order-id": 1042 }, "userId": null });
        assert_eq!(
            js_literal(&body, 0),
            "{\n  channelName: \"payments\",\n  tags: [\"eu\", \"card\"],\n  \
             metadata: {\n    \"order-id\": 1042,\n  },\n  userId: null,\n}"
        );
    }
}

//! The code samples of each operation (`x-codeSamples`, which the docs page
//! shows before its generic snippets), one per official client: the
//! `@tocsin/client` (TypeScript) and `tocsin` (Python) call that does what
//! the operation does, with the request body's example.

use serde_json::{Map, Value, json};

/// The client method that wraps each operation, by operation id, and its
/// argument when that is neither the request body nor the path's id (or
/// both, id first). An operation the client does not wrap is shown with
/// `tocsin.request`.
const METHODS: [(&str, &str, Option<&str>); 17] = [
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
    (
        "listUsers",
        "users.list",
        Some(r#"{ q: "ada", property: "plan:pro", limit: 20 }"#),
    ),
    (
        "setInsight",
        "insights.set",
        Some(r#""Revenue today", 1250, { icon: "💰" }"#),
    ),
    (
        "incrementInsight",
        "insights.increment",
        Some(r#""Active trials", 1, { icon: "🧪" }"#),
    ),
    ("listInsights", "insights.list", None),
    (
        "deleteInsight",
        "insights.delete",
        Some(r#""Revenue today""#),
    ),
    ("registerDevice", "devices.register", None),
    ("listDevices", "devices.list", None),
    ("updateDevice", "devices.update", None),
    ("deleteDevice", "devices.delete", None),
];

/// The Python client's method for each operation, by operation id, and its
/// arguments when they are neither the request body (as keyword arguments)
/// nor the path's id (or both, id first). An operation it does not wrap is
/// shown with `client.request`.
const PYTHON_METHODS: [(&str, &str, Option<&str>); 18] = [
    ("createEvent", "events.create", None),
    ("getEvent", "events.get", None),
    (
        "listEvents",
        "events.list",
        Some(r#"channel="payments", q="failed", limit=20"#),
    ),
    ("listChannels", "channels.list", None),
    ("eventStats", "stats.events", Some(r#"bucket="hour""#)),
    (
        "streamEvents",
        "events.stream",
        Some(r#"channel="payments""#),
    ),
    ("identify", "identify", None),
    ("getUser", "users.get", Some(r#""user_7""#)),
    (
        "listUsers",
        "users.list",
        Some(r#"q="ada", property="plan:pro", limit=20"#),
    ),
    (
        "setInsight",
        "insights.set",
        Some(r#"title="Revenue today", value=1250, icon="💰""#),
    ),
    (
        "incrementInsight",
        "insights.increment",
        Some(r#"title="Active trials", by=1, icon="🧪""#),
    ),
    ("listInsights", "insights.list", None),
    (
        "deleteInsight",
        "insights.delete",
        Some(r#""Revenue today""#),
    ),
    (
        "registerDevice",
        "devices.create",
        Some(concat!(
            r#"token="a1b2c3d4e5f60718a1b2c3d4e5f60718a1b2c3d4e5f60718a1b2c3d4e5f60718", "#,
            r#"environment="sandbox", name="On-call iPhone""#
        )),
    ),
    ("listDevices", "devices.list", None),
    ("updateDevice", "devices.update", None),
    ("deleteDevice", "devices.delete", None),
    ("getWebPushKey", "devices.webpush_key", None),
];

const PYTHON_SETUP: &str = r#"import os

from tocsin import Tocsin

client = Tocsin(os.environ["TOCSIN_API_KEY"], base_url="http://127.0.0.1:8080")
"#;

/// Operations whose client call is an async iterable, not a promise.
const STREAMS: [&str; 1] = ["streamEvents"];

/// The id the samples pass for a path's `{id}`.
const EXAMPLE_ID: &str = "0197a3c2-5f1e-7b8a-9c0d-1e2f3a4b5c6d";

/// The title the samples pass for a path's `{title}` (an insight's),
/// URL-encoded as it goes in the path.
const EXAMPLE_TITLE: &str = "Revenue%20today";

/// `path` with its parameters filled as the samples fill them.
fn example_path(path: &str) -> String {
    path.replace("{id}", EXAMPLE_ID)
        .replace("{title}", EXAMPLE_TITLE)
}

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
            let body = body_example(op, &schemas);
            let typescript = sample(method, path, op, body);
            let python = python_sample(method, path, op, body);
            op.insert(
                "x-codeSamples".into(),
                json!([
                    { "lang": "TypeScript", "label": "@tocsin/client", "source": typescript },
                    { "lang": "Python", "label": "tocsin (Python)", "source": python },
                ]),
            );
        }
    }
}

/// The first example of the operation's request body schema, if any.
fn body_example<'a>(op: &Map<String, Value>, schemas: &'a Value) -> Option<&'a Value> {
    op.get("requestBody")
        .and_then(|b| b.pointer("/content/application~1json/schema/$ref"))
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| schemas.get(name))
        .and_then(|schema| schema.pointer("/examples/0"))
}

fn sample(method: &str, path: &str, op: &Map<String, Value>, body: Option<&Value>) -> String {
    let body = body.map(|example| js_literal(example, 0));
    let operation_id = op.get("operationId").and_then(Value::as_str);
    let call = match METHODS.iter().find(|(id, _, _)| Some(*id) == operation_id) {
        Some((_, method, argument)) => {
            // A call on one resource that also sends a body takes both:
            // `devices.update(id, changes)`.
            let id = path.contains('{').then(|| format!("{EXAMPLE_ID:?}"));
            let argument = match (*argument, id, body) {
                (Some(argument), _, _) => argument.to_owned(),
                (None, Some(id), Some(body)) => format!("{id}, {body}"),
                (None, id, body) => id.or(body).unwrap_or_default(),
            };
            format!("{method}({argument})")
        }
        None => {
            let mut spec = format!(
                "{{ method: {:?}, path: {:?}",
                method.to_uppercase(),
                example_path(path)
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

fn python_sample(
    method: &str,
    path: &str,
    op: &Map<String, Value>,
    body: Option<&Value>,
) -> String {
    let operation_id = op.get("operationId").and_then(Value::as_str);
    let call = match PYTHON_METHODS
        .iter()
        .find(|(id, _, _)| Some(*id) == operation_id)
    {
        Some((_, method, arguments)) => {
            // The id and the keyword arguments, each on a line of its own
            // as `python_keywords` lays them out:
            // `devices.update(\n    "…",\n    min_priority="normal",\n)`.
            let id = path.contains('{').then(|| format!("{EXAMPLE_ID:?}"));
            let arguments = match (*arguments, id, body.map(python_keywords)) {
                (Some(arguments), _, _) => arguments.to_owned(),
                (None, Some(id), Some(keywords)) => format!("\n    {id},{keywords}"),
                (None, id, keywords) => id.or(keywords).unwrap_or_default(),
            };
            format!("{method}({arguments})")
        }
        None => {
            let mut arguments = format!("{:?}, {:?}", method.to_uppercase(), example_path(path));
            if let Some(body) = body {
                arguments.push_str(&format!(", body={}", python_literal(body, 0)));
            }
            format!("request({arguments})")
        }
    };
    if operation_id.is_some_and(|id| STREAMS.contains(&id)) {
        return format!(
            "{PYTHON_SETUP}\nwith client.{call} as stream:\n    for event in stream:\n        print(event.title)\n"
        );
    }
    format!("{PYTHON_SETUP}\nresult = client.{call}\nprint(result.data)\n")
}

/// A JSON object as Python keyword arguments, one a line: the API's
/// camelCase names in the client's snake_case (`channelName` becomes
/// `channel_name`), values as Python literals.
fn python_keywords(body: &Value) -> String {
    let Value::Object(map) = body else {
        return String::new();
    };
    let fields: Vec<String> = map
        .iter()
        .map(|(key, value)| format!("    {}={},\n", snake_case(key), python_literal(value, 1)))
        .collect();
    format!("\n{}", fields.concat())
}

/// `channelName` -> `channel_name`; `user_id` stays as it is.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `value` as a Python literal, laid out as `js_literal` lays out
/// JavaScript: dict keys quoted (they keep the API's names), `True`,
/// `False` and `None`.
fn python_literal(value: &Value, indent: usize) -> String {
    let pad = "    ".repeat(indent + 1);
    match value {
        Value::Object(map) if !map.is_empty() => {
            let fields: Vec<String> = map
                .iter()
                .map(|(key, value)| {
                    format!(
                        "{pad}{}: {},\n",
                        json!(key),
                        python_literal(value, indent + 1)
                    )
                })
                .collect();
            format!("{{\n{}{}}}", fields.concat(), "    ".repeat(indent))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(|v| python_literal(v, indent)).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        // Strings and numbers as JSON writes them are valid Python literals.
        other => other.to_string(),
    }
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

    #[test]
    fn a_call_on_an_id_with_a_body_passes_the_id_then_the_body() {
        let doc = json!({ "operationId": "updateDevice" });
        let op = doc.as_object().expect("an operation");
        let body = json!({ "tags": null, "minPriority": "high" });
        assert_eq!(
            sample("patch", "/v1/devices/{id}", op, Some(&body)),
            format!(
                "{SETUP}\nconst {{ data }} = await tocsin.devices.update({EXAMPLE_ID:?}, {{\n  \
                 tags: null,\n  minPriority: \"high\",\n}});\n"
            )
        );
        assert_eq!(
            python_sample("patch", "/v1/devices/{id}", op, Some(&body)),
            format!(
                "{PYTHON_SETUP}\nresult = client.devices.update(\n    {EXAMPLE_ID:?},\n    \
                 tags=None,\n    min_priority=\"high\",\n)\nprint(result.data)\n"
            )
        );
    }

    #[test]
    fn a_call_on_an_id_alone_passes_the_id() {
        let doc = json!({ "operationId": "deleteDevice" });
        let op = doc.as_object().expect("an operation");
        let typescript = sample("delete", "/v1/devices/{id}", op, None);
        let python = python_sample("delete", "/v1/devices/{id}", op, None);
        assert!(typescript.ends_with(&format!(" tocsin.devices.delete({EXAMPLE_ID:?});\n")));
        assert!(python.contains(&format!(" client.devices.delete({EXAMPLE_ID:?})\n")));
    }

    #[test]
    fn a_body_reads_as_python_keyword_arguments() {
        let body = json!({ "channelName": "payments", "tags": ["eu", "card"],
            "metadata": { "orderId": 1042, "paid": false }, "userId": null, "notify": true });
        assert_eq!(
            python_keywords(&body),
            "\n    channel_name=\"payments\",\n    tags=[\"eu\", \"card\"],\n    \
             metadata={\n        \"orderId\": 1042,\n        \"paid\": False,\n    },\n    \
             user_id=None,\n    notify=True,\n"
        );
    }
}

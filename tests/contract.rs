//! Reading `/openapi.json` as the contract: its operations, and whether a
//! real response is one the document describes.

use serde_json::Value;

use crate::{Reply, TestApp};

/// The document `app` publishes at `/openapi.json`.
pub async fn document(app: &TestApp) -> Value {
    let response = app.get("/openapi.json").await;
    assert_eq!(response.status(), 200, "GET /openapi.json");
    response.json().await.expect("the document is JSON")
}

/// Methods an operation can be declared with, lowercase as in the document.
pub const METHODS: [&str; 8] = [
    "get", "head", "post", "put", "patch", "delete", "options", "trace",
];

/// Every (method, path template) the document declares.
pub fn operations(doc: &Value) -> Vec<(String, String)> {
    let paths = doc["paths"].as_object().expect("the document has paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("a path item is an object")
                .keys()
                .filter(|m| METHODS.contains(&m.as_str()))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect()
}

/// The methods declared for `template`, lowercase.
pub fn declared_methods(doc: &Value, template: &str) -> Vec<String> {
    doc["paths"][template]
        .as_object()
        .map(|item| {
            item.keys()
                .filter(|m| METHODS.contains(&m.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// `template` with every `{parameter}` replaced by `value`.
pub fn concrete(template: &str, value: &str) -> String {
    template
        .split('/')
        .map(|segment| {
            if segment.starts_with('{') {
                value
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Asserts that the document lists `reply`'s status for the operation,
/// with the error envelope for an error, and that the reply carries every
/// header the document marks required for that response.
pub fn assert_documented(doc: &Value, method: &str, template: &str, reply: &Reply) {
    let status = reply.status.to_string();
    let documented = &doc["paths"][template][method]["responses"][&status];
    assert!(
        documented.is_object(),
        "{} {template} answered {status}, which the document does not list for it; body: {}",
        method.to_uppercase(),
        reply.body
    );
    if reply.status >= 400 {
        assert_eq!(
            documented["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorEnvelope",
            "{method} {template} {status} is documented with the error envelope"
        );
        reply.assert_error_envelope(reply.status);
    }
    let headers = documented["headers"].as_object().into_iter().flatten();
    for (name, header) in headers {
        if header["required"] == Value::Bool(true) {
            assert!(
                reply.header(name).is_some(),
                "{method} {template} {status} lacks the documented {name}"
            );
        }
    }
}

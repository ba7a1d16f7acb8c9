//! The error envelope every refusal carries (`ingest/src/error.rs`):
//! `{"success": false, "error": …, "details": [{"path": […], "message": …}],
//! "requestId": …}`.

use serde_json::Value;

/// One fault a refusal names.
#[derive(Debug)]
pub struct Fault {
    pub path: Vec<String>,
    pub message: String,
}

/// The faults of a 400's body; panics unless it is an envelope naming at
/// least one, each with a path and a message.
pub fn faults(body: &[u8]) -> Vec<Fault> {
    let envelope: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("a 400 whose body is not JSON ({e}): {body:?}"));
    assert_eq!(envelope["success"], false, "{envelope}");
    assert!(
        envelope["error"].as_str().is_some_and(|e| !e.is_empty()),
        "a refusal without its error: {envelope}"
    );
    assert!(
        envelope["requestId"].is_string(),
        "a refusal without its request id: {envelope}"
    );
    let details = envelope["details"]
        .as_array()
        .filter(|details| !details.is_empty())
        .unwrap_or_else(|| panic!("a 400 that names no fault: {envelope}"));
    details
        .iter()
        .map(|detail| {
            let path = detail["path"]
                .as_array()
                .and_then(|path| {
                    path.iter()
                        .map(|segment| segment.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                })
                .unwrap_or_else(|| panic!("a fault without a path of strings: {envelope}"));
            let message = detail["message"]
                .as_str()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| panic!("a fault without a message: {envelope}"))
                .to_owned();
            Fault { path, message }
        })
        .collect()
}

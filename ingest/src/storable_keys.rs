//! The object keys every store can hold: free-form request objects
//! (`metadata`, `properties`) must not have a key containing U+0000 (NUL)
//! at any depth. Their own keys are constrained in the published schemas
//! (`propertyNames`); keys nested deeper are checked by the validator
//! (`validation.rs`), as the nesting depth is: a recursive schema would say
//! it, but code generators turn it into circular types (the TypeScript
//! client's cannot compile), so the schema's description says it instead.
//!
//! BSON writes keys as NUL-terminated strings, so the MongoDB driver refuses
//! such a key, while SQLite would take it: rejecting it in the schema gives
//! both stores the same answer, a 400 naming the key. Keys starting with `$`
//! or containing `.` are stored literally by both (the MongoDB store never
//! builds update paths from client keys), so they stay allowed.

use serde_json::{Value, json};

/// The pattern every key must match (ECMA-262, as JSON Schema uses).
pub const KEY_PATTERN: &str = "^[^\\u0000]*$";

/// Whether every store can hold `key` (what [`KEY_PATTERN`] says).
pub fn is_storable(key: &str) -> bool {
    !key.contains('\0')
}

/// What a client is told about a key that does not match [`KEY_PATTERN`].
pub const KEY_MESSAGE: &str = "keys must not contain the NUL character (U+0000)";

/// Constrains the keys of every free-form object property of the closed
/// (request body) schemas of an OpenAPI document.
pub fn publish(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let request_bodies = schemas
        .values_mut()
        .filter(|s| s.get("additionalProperties") == Some(&Value::Bool(false)));
    for body in request_bodies {
        let Some(properties) = body.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for property in properties.values_mut().filter(|p| is_free_form_object(p)) {
            property["propertyNames"] = json!({ "pattern": KEY_PATTERN });
        }
    }
}

/// `type: object` whose values may be anything (a map of JSON values).
fn is_free_form_object(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("object"))
        && schema.get("properties").is_none()
        && match schema.get("additionalProperties") {
            None | Some(Value::Bool(true)) => true,
            Some(Value::Object(inner)) => inner.is_empty(),
            Some(_) => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_free_form_properties_of_request_bodies_are_constrained() {
        let mut doc = json!({ "components": { "schemas": {
            "In": { "additionalProperties": false, "properties": {
                "metadata": { "type": "object", "additionalProperties": {} },
                "title": { "type": "string" },
            }},
            "Out": { "properties": {
                "metadata": { "type": "object", "additionalProperties": {} },
            }},
        }}});
        publish(&mut doc);
        let schemas = &doc["components"]["schemas"];
        assert_eq!(
            schemas["In"]["properties"]["metadata"]["propertyNames"]["pattern"],
            KEY_PATTERN
        );
        assert_eq!(
            schemas["In"]["properties"]["title"],
            json!({ "type": "string" })
        );
        assert!(schemas["Out"]["properties"]["metadata"]["propertyNames"].is_null());
    }
}

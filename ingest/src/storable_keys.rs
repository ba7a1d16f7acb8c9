//! The object keys every store can hold, as a rule of the published
//! schemas: free-form request objects (`metadata`, `properties`) must not
//! have a key containing U+0000 (NUL) at any depth.
//!
//! BSON writes keys as NUL-terminated strings, so the MongoDB driver refuses
//! such a key, while SQLite would take it: rejecting it in the schema gives
//! both stores the same answer, a 400 naming the key. Keys starting with `$`
//! or containing `.` are stored literally by both (the MongoDB store never
//! builds update paths from client keys), so they stay allowed.

use serde_json::{Value, json};

/// The pattern every key must match (ECMA-262, as JSON Schema uses).
pub const KEY_PATTERN: &str = "^[^\\u0000]*$";

/// What a client is told about a key that does not match [`KEY_PATTERN`].
pub const KEY_MESSAGE: &str = "keys must not contain the NUL character (U+0000)";

/// The component schema of any JSON value whose object keys, at any depth,
/// match [`KEY_PATTERN`].
const STORABLE: &str = "StorableJson";

/// Constrains every free-form object property of the closed (request body)
/// schemas of an OpenAPI document, and registers the recursive schema they
/// refer to for their values.
pub fn publish(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let reference = json!({ "$ref": format!("#/components/schemas/{STORABLE}") });
    let request_bodies = schemas
        .values_mut()
        .filter(|s| s.get("additionalProperties") == Some(&Value::Bool(false)));
    for body in request_bodies {
        let Some(properties) = body.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for property in properties.values_mut().filter(|p| is_free_form_object(p)) {
            property["propertyNames"] = json!({ "pattern": KEY_PATTERN });
            property["additionalProperties"] = reference.clone();
        }
    }
    schemas.insert(
        STORABLE.into(),
        json!({
            "description": "Any JSON value; object keys, at any depth, must not \
                contain U+0000 (NUL), which not every store can hold.",
            "propertyNames": { "pattern": KEY_PATTERN },
            "additionalProperties": reference,
            "items": reference,
        }),
    );
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
        assert!(schemas[STORABLE]["items"]["$ref"].is_string());
    }
}

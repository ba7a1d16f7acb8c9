//! Strict request validation against the very schemas `/openapi.json`
//! publishes.
//!
//! poem-openapi's own JSON parsing coerces (`"title": 5` becomes `"5"`) and
//! stops at the first fault, so request bodies go through [`ValidatedJson`]
//! instead: the body is checked with a JSON Schema 2020-12 validator built
//! from the generated OpenAPI 3.1 document, every fault is collected with its
//! path, and only a valid body reaches the handler. The body is parsed once,
//! to a `Value`; a valid one costs the validator's fast path (`is_valid`,
//! no error paths built) and one walk that checks its depth and normalises
//! its numbers, and the typed struct is then taken from that `Value`; the
//! faults are only worked out and worded for a body that has some.
//! [`messages`] words each
//! fault for a person (what is expected, never the validator's regex), and
//! [`unknown`] names the field an unknown one most likely meant.

mod messages;
mod refs;
mod unknown;

pub(crate) use messages::PATTERN_WORDS;
pub(crate) use unknown::closest_name;

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use poem::{Request, RequestBody};
use poem_openapi::{
    ApiExtractor, ApiExtractorType, ExtractParamOptions,
    payload::{ParsePayload, Payload},
    registry::{MetaMediaType, MetaRequest, MetaSchemaRef, Registry},
    types::{ParseFromJSON, Type},
};
use serde_json::Value;

use crate::{error::ApiError, error::FieldError, types::is_icon};

/// Deepest nesting accepted inside `metadata` and `properties`. BSON allows
/// 100 levels in a whole document; this keeps every stored event well inside.
pub const MAX_DEPTH: usize = 16;

/// One compiled validator per request-body schema of the API.
pub struct SchemaValidators {
    by_schema: HashMap<String, jsonschema::Validator>,
    /// The schemas that are a `oneOf` of variants (see `variant_of`).
    unions: HashSet<String>,
    /// The document the validators were built from (its component schemas),
    /// where a fault's schema is looked up for the words of its message.
    root: Value,
}

impl SchemaValidators {
    /// Compiles a validator for every schema in `components.schemas` of an
    /// OpenAPI 3.1 document (whose schemas are JSON Schema 2020-12).
    pub fn from_openapi(doc: &Value) -> anyhow::Result<Self> {
        let components = doc
            .pointer("/components/schemas")
            .and_then(Value::as_object)
            .ok_or_else(|| anyhow::anyhow!("the OpenAPI document has no component schemas"))?;
        let mut by_schema = HashMap::new();
        let unions = components
            .iter()
            .filter(|(_, schema)| schema.get("oneOf").is_some())
            .map(|(name, _)| name.clone())
            .collect();
        let root = serde_json::json!({ "components": { "schemas": components } });
        for name in components.keys() {
            let schema = serde_json::json!({
                "$ref": format!("#/components/schemas/{name}"),
                "components": { "schemas": refs::reachable(components, name) },
            });
            let validator = jsonschema::draft202012::options()
                .should_validate_formats(true)
                .with_format("emoji", is_icon)
                .build(&schema)
                .map_err(|e| anyhow::anyhow!("schema {name} does not compile: {e}"))?;
            by_schema.insert(name.clone(), validator);
        }
        Ok(Self {
            by_schema,
            unions,
            root,
        })
    }

    /// Checks `value` against the named schema and, when it passes, readies
    /// it for the typed parse ([`integral_numbers`]); otherwise returns every
    /// fault, in document order. A `oneOf` of variants told apart by a tag
    /// (`kind`) is checked against the variant the value's tag names, so its
    /// faults read as that variant's do (a oneOf's own verdict, "matches
    /// none", helps no one).
    pub fn accept(&self, schema: &str, value: &mut Value) -> Result<(), Vec<FieldError>> {
        let variant = self.variant_of(schema, value)?;
        let schema = variant.as_deref().unwrap_or(schema);
        let Some(validator) = self.by_schema.get(schema) else {
            // A body type without a published schema is a programming error;
            // refusing it is safer than accepting it unchecked.
            return Err(vec![FieldError::new(vec![], "unsupported request body")]);
        };
        if validator.is_valid(value) && settle(value, 0) {
            return Ok(());
        }
        let faults = self.faults(validator, value);
        if faults.is_empty() {
            // Not expected (the fast path and the full one agree); the full
            // verdict is the one errors are reported from, so it decides.
            integral_numbers(value);
            return Ok(());
        }
        Err(faults)
    }

    /// Every fault of `value` against `validator`, worded.
    fn faults(&self, validator: &jsonschema::Validator, value: &Value) -> Vec<FieldError> {
        let mut faults: Vec<FieldError> = validator
            .iter_errors(value)
            .flat_map(|e| messages::describe(&e, &self.root))
            .collect();
        // A field with a form reports the same sentence for each part of
        // the form it breaks (pattern, length); once is enough.
        let mut seen = HashSet::new();
        faults.retain(|f| seen.insert((f.path.clone(), f.message.clone())));
        too_deep(value, &mut Vec::new(), 0, &mut faults);
        faults
    }
}

impl SchemaValidators {
    /// The values an enum schema allows, through `$ref` and `allOf`.
    fn tag_values(&self, schema: &Value) -> Vec<Value> {
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            return target
                .strip_prefix('#')
                .and_then(|p| self.root.pointer(p))
                .map(|s| self.tag_values(s))
                .unwrap_or_default();
        }
        let mut values: Vec<Value> = schema["enum"].as_array().cloned().unwrap_or_default();
        for part in schema["allOf"].as_array().into_iter().flatten() {
            values.extend(self.tag_values(part));
        }
        values
    }

    /// The variant of a tagged `oneOf` schema that `value` names: the one
    /// whose single-valued `kind` equals the value's, or, when the value has
    /// no `kind`, the one that does not require it (the default). `None`
    /// for a schema that is not such a union.
    fn variant_of(&self, schema: &str, value: &Value) -> Result<Option<String>, Vec<FieldError>> {
        const TAG: &str = "kind";
        if !self.unions.contains(schema) {
            return Ok(None);
        }
        let Some(variants) = self
            .root
            .pointer(&format!("/components/schemas/{schema}/oneOf"))
            .and_then(Value::as_array)
        else {
            return Ok(None);
        };
        let names: Vec<&str> = variants
            .iter()
            .filter_map(|v| v.get("$ref")?.as_str()?.rsplit('/').next())
            .collect();
        let tag = value.get(TAG);
        let mut tags = Vec::new();
        for name in &names {
            let variant = &self.root["components"]["schemas"][name];
            let allowed = self.tag_values(&variant["properties"][TAG]);
            let required = variant["required"]
                .as_array()
                .is_some_and(|r| r.iter().any(|p| p == TAG));
            let fits = match tag {
                None => !required,
                Some(tag) => allowed.contains(tag),
            };
            if fits {
                return Ok(Some((*name).to_owned()));
            }
            tags.extend(allowed.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        if !value.is_object() {
            // The first variant says what an object of it needs.
            return Ok(names.first().map(|n| (*n).to_owned()));
        }
        Err(vec![FieldError::new(
            vec![TAG.to_owned()],
            format!("must be one of: {}", tags.join(", ")),
        )])
    }
}

/// For a body the schema accepts: normalises its numbers as
/// [`integral_numbers`] does, in the same walk that checks its nesting;
/// false when it is nested deeper than [`MAX_DEPTH`] ([`too_deep`] then
/// says where).
fn settle(value: &mut Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match value {
        Value::Array(items) => items.iter_mut().all(|v| settle(v, depth + 1)),
        Value::Object(map) => map.values_mut().all(|v| settle(v, depth + 1)),
        number @ Value::Number(_) => {
            integral_numbers(number);
            true
        }
        _ => true,
    }
}

/// Reports values nested deeper than [`MAX_DEPTH`], which JSON Schema
/// cannot express.
fn too_deep(value: &Value, path: &mut Vec<String>, depth: usize, faults: &mut Vec<FieldError>) {
    if depth > MAX_DEPTH {
        faults.push(FieldError::new(
            path.clone(),
            format!("is nested more than {MAX_DEPTH} levels deep"),
        ));
        return;
    }
    let children: Box<dyn Iterator<Item = (String, &Value)>> = match value {
        Value::Object(map) => Box::new(map.iter().map(|(k, v)| (k.clone(), v))),
        Value::Array(items) => Box::new(items.iter().enumerate().map(|(i, v)| (i.to_string(), v))),
        _ => return,
    };
    for (segment, child) in children {
        path.push(segment);
        too_deep(child, path, depth + 1, faults);
        path.pop();
    }
}

/// A JSON request body that has passed strict validation. It documents
/// itself exactly like poem-openapi's `Json<T>`.
pub struct ValidatedJson<T>(pub T);

impl<T: Type> Payload for ValidatedJson<T> {
    const CONTENT_TYPE: &'static str = "application/json";

    fn check_content_type(content_type: &str) -> bool {
        content_type.parse::<mime::Mime>().is_ok_and(|m| {
            m.type_() == mime::APPLICATION
                && (m.subtype() == mime::JSON || m.suffix() == Some(mime::JSON))
        })
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

impl<T: ParseFromJSON> ParsePayload for ValidatedJson<T> {
    const IS_REQUIRED: bool = true;

    async fn from_request(request: &Request, body: &mut RequestBody) -> poem::Result<Self> {
        let bytes = body.take()?.into_bytes().await?;
        if bytes.is_empty() {
            return Err(ApiError::MalformedJson("the request body is empty".into()).into());
        }
        Ok(Self(parse_validated(request, &bytes)?))
    }
}

/// A body checked against `T`'s published schema, then made a `T` from the
/// one `Value` it was parsed to.
fn parse_validated<T: ParseFromJSON>(request: &Request, bytes: &[u8]) -> poem::Result<T> {
    let validators = request
        .data::<Arc<SchemaValidators>>()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("schema validators missing")))?;
    let mut value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::MalformedJson(format!("invalid JSON: {e}")))?;
    validators
        .accept(&T::name(), &mut value)
        .map_err(ApiError::Validation)?;
    T::parse_from_json(Some(value)).map_err(|e| {
        // The schema and the type disagree: a bug, not the client's fault.
        ApiError::Internal(anyhow::anyhow!(
            "validated body does not parse: {}",
            e.into_message()
        ))
        .into()
    })
}

/// JSON Schema counts `159.0` as an integer, and so the validator accepts
/// it where an integer is asked for; the typed parse does not. Every number
/// without a fraction becomes an integer before it.
fn integral_numbers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(map) => map.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

/// Like [`ValidatedJson`], for a body whose every field is optional: a
/// request may leave it out altogether, and gets `T::default()`.
pub struct MaybeJson<T>(pub T);

impl<'a, T: ParseFromJSON + Default> ApiExtractor<'a> for MaybeJson<T> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        <ValidatedJson<T> as ApiExtractor>::request_meta().map(|meta| MetaRequest {
            required: false,
            ..meta
        })
    }

    async fn from_request(
        request: &'a Request,
        body: &mut RequestBody,
        _param_opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let bytes = body.take()?.into_bytes().await?;
        if bytes.is_empty() {
            return Ok(Self(T::default()));
        }
        let content_type = request.content_type();
        if !content_type.is_some_and(<ValidatedJson<T> as Payload>::check_content_type) {
            return Err(ApiError::UnsupportedMediaType.into());
        }
        Ok(Self(parse_validated(request, &bytes)?))
    }
}

impl<'a, T: ParseFromJSON> ApiExtractor<'a> for ValidatedJson<T> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        <Self as Payload>::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        Some(MetaRequest {
            description: None,
            content: vec![MetaMediaType {
                content_type: <Self as Payload>::CONTENT_TYPE,
                schema: <Self as Payload>::schema_ref(),
            }],
            required: true,
        })
    }

    async fn from_request(
        request: &'a Request,
        body: &mut RequestBody,
        _param_opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let content_type = request.content_type();
        if !content_type.is_some_and(<Self as Payload>::check_content_type) {
            return Err(ApiError::UnsupportedMediaType.into());
        }
        <Self as ParsePayload>::from_request(request, body).await
    }
}

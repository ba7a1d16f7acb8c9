//! `POST /v1/insights` (set), `PATCH /v1/insights` (increment),
//! `GET /v1/insights` (list), `DELETE /v1/insights/{title}`: a project's
//! named live values (revenue today, active trials, build status), shown as
//! tiles above the feed. Each change also goes to the project's live
//! streams (`GET /v1/stream`, messages `insight` and `insight-deleted`).
//! The rules every store applies (how many, how large, how an increment
//! adds) are `common::store::insight`'s; this module owns the API's shapes
//! and words.

use std::{borrow::Cow, sync::Arc};

use chrono::{DateTime, Utc};
use common::store::{
    Insight, InsightNumber, InsightRefusal, InsightValue,
    insight::{MAX_INSIGHTS, MAX_MAGNITUDE},
};
use poem::web::Data;
use poem_openapi::{
    ApiResponse, Object, OpenApi,
    param::Path,
    payload::Json,
    registry::{MetaSchema, MetaSchemaRef},
    types::{Example, ParseError, ParseFromJSON, ParseResult, ToJSON, Type},
};
use serde_json::Value;

use super::{ApiTags, Success};
use crate::{
    auth::AuthContext,
    error::{ApiError, FieldError},
    request_id::RequestId,
    state::AppState,
    types::{Icon, Nullable},
    validation::ValidatedJson,
};

/// The longest string an insight holds.
pub const MAX_TEXT: usize = 200;

/// An insight's value: a string, a number or a boolean, published as a
/// `oneOf` of the three with each one's limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueJson(pub InsightValue);

impl Type for ValueJson {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> Cow<'static, str> {
        "insight_value".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        let magnitude = MAX_MAGNITUDE as f64;
        let branch = |schema: MetaSchema| MetaSchemaRef::Inline(Box::new(schema));
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            description: Some(
                "A string (1 to 200 characters), a number (at most 9007199254740991 \
                 either side of zero) or a boolean.",
            ),
            one_of: vec![
                branch(MetaSchema {
                    min_length: Some(1),
                    max_length: Some(MAX_TEXT),
                    ..MetaSchema::new("string")
                }),
                branch(MetaSchema {
                    minimum: Some(-magnitude),
                    maximum: Some(magnitude),
                    ..MetaSchema::new("number")
                }),
                branch(MetaSchema::new("boolean")),
            ],
            ..MetaSchema::ANY
        }))
    }

    fn as_raw_value(&self) -> Option<&Self> {
        Some(self)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self> + 'a> {
        Box::new(std::iter::once(self))
    }
}

/// A JSON number as an insight holds it: an integer if it is one.
fn number_of(n: &serde_json::Number) -> Option<InsightNumber> {
    match (n.as_i64(), n.as_f64()) {
        (Some(i), _) => Some(InsightNumber::Integer(i)),
        (None, Some(f)) if f.is_finite() => Some(InsightNumber::Float(f)),
        _ => None,
    }
}

impl ParseFromJSON for ValueJson {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        // The published schema has already checked lengths and magnitudes
        // (`ValidatedJson`); this only takes the value apart.
        Ok(Self(match value {
            Some(Value::String(text)) => InsightValue::Text(text),
            Some(Value::Bool(flag)) => InsightValue::Flag(flag),
            Some(Value::Number(n)) => InsightValue::Number(
                number_of(&n).ok_or_else(|| ParseError::custom("must be a finite number"))?,
            ),
            other => return Err(ParseError::expected_type(other.unwrap_or_default())),
        }))
    }
}

impl ToJSON for ValueJson {
    fn to_json(&self) -> Option<Value> {
        Some(match &self.0 {
            InsightValue::Text(text) => Value::from(text.as_str()),
            InsightValue::Number(InsightNumber::Integer(i)) => Value::from(*i),
            // Written with its fraction (`2000.0`): a float stays one.
            InsightValue::Number(InsightNumber::Float(f)) => Value::from(*f),
            InsightValue::Flag(flag) => Value::from(*flag),
        })
    }
}

/// An insight to set. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields, example)]
pub struct SetInsightIn {
    /// The insight's name, unique in its project.
    #[oai(validator(min_length = 1, max_length = 100, pattern = "[^.]"))]
    pub title: String,
    /// Its value from now on.
    pub value: ValueJson,
    /// The emoji its tile shows. Left out, the one it has stays.
    pub icon: Option<Icon>,
}

impl Example for SetInsightIn {
    fn example() -> Self {
        Self {
            title: "Revenue today".into(),
            value: ValueJson(InsightValue::Number(InsightNumber::Integer(1250))),
            icon: Some(Icon("💰".into())),
        }
    }
}

/// The number an increment adds, published with its limits: an integer
/// stays one (the validator has made every whole number of the body an
/// integer already), so a fraction is what makes a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Amount(pub InsightNumber);

impl Type for Amount {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> Cow<'static, str> {
        "insight_amount".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        let magnitude = MAX_MAGNITUDE as f64;
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            minimum: Some(-magnitude),
            maximum: Some(magnitude),
            ..MetaSchema::new("number")
        }))
    }

    fn as_raw_value(&self) -> Option<&Self> {
        Some(self)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self> + 'a> {
        Box::new(std::iter::once(self))
    }
}

impl ParseFromJSON for Amount {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value {
            Some(Value::Number(n)) => number_of(&n)
                .map(Self)
                .ok_or_else(|| ParseError::custom("must be a finite number")),
            other => Err(ParseError::expected_type(other.unwrap_or_default())),
        }
    }
}

impl ToJSON for Amount {
    fn to_json(&self) -> Option<Value> {
        ValueJson(InsightValue::Number(self.0)).to_json()
    }
}

/// How much to add: `{"$inc": 1}`. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields, example)]
pub struct Increment {
    /// The number to add (negative to subtract): at most 9007199254740991
    /// either side of zero.
    #[oai(rename = "$inc")]
    pub by: Amount,
}

impl Example for Increment {
    fn example() -> Self {
        Self {
            by: Amount(InsightNumber::Integer(1)),
        }
    }
}

/// An increment of an insight. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields, example)]
pub struct IncrementInsightIn {
    /// The insight's name, unique in its project.
    #[oai(validator(min_length = 1, max_length = 100, pattern = "[^.]"))]
    pub title: String,
    /// What to add to its number.
    pub value: Increment,
    /// The emoji its tile shows. Left out, the one it has stays.
    pub icon: Option<Icon>,
}

impl Example for IncrementInsightIn {
    fn example() -> Self {
        Self {
            title: "Active trials".into(),
            value: Increment::example(),
            icon: Some(Icon("🧪".into())),
        }
    }
}

/// An insight as stored.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct InsightOut {
    /// Its name, unique in its project.
    pub title: String,
    /// A string, a number (an integer stays one while only integers are
    /// added to it) or a boolean.
    pub value: ValueJson,
    /// The emoji its tile shows, or null.
    pub icon: Nullable<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was last set or incremented.
    pub updated_at: DateTime<Utc>,
}

impl From<Insight> for InsightOut {
    fn from(i: Insight) -> Self {
        Self {
            title: i.title,
            value: ValueJson(i.value),
            icon: Nullable(i.icon),
            created_at: i.created_at,
            updated_at: i.updated_at,
        }
    }
}

/// Every insight of the project.
#[derive(Debug, Clone, Object)]
pub struct InsightList {
    /// In the order they were created (then by title).
    pub insights: Vec<InsightOut>,
}

/// A deleted insight: what a deletion answers, and the data of a stream's
/// `insight-deleted` message.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct DeletedInsight {
    pub title: String,
    /// Always true.
    pub deleted: bool,
    pub deleted_at: DateTime<Utc>,
}

#[derive(ApiResponse)]
pub enum SetResponse {
    /// The insight was created with this value.
    #[oai(status = 201)]
    Created(Json<Success<InsightOut>>),
    /// The insight existed; it has this value now.
    #[oai(status = 200)]
    Updated(Json<Success<InsightOut>>),
}

#[derive(ApiResponse)]
pub enum IncrementResponse {
    /// The insight did not exist: it was created holding the increment.
    #[oai(status = 201)]
    Created(Json<Success<InsightOut>>),
    /// The insight was incremented; this is its value now.
    #[oai(status = 200)]
    Incremented(Json<Success<InsightOut>>),
}

#[derive(ApiResponse)]
pub enum ListResponse {
    /// The project's insights, in the order they were created.
    #[oai(status = 200)]
    Ok(Json<Success<InsightList>>),
}

#[derive(ApiResponse)]
pub enum DeleteResponse {
    /// The insight was removed.
    #[oai(status = 200)]
    Ok(Json<Success<DeletedInsight>>),
}

/// Why a write was refused, as the client is told.
fn refused(refusal: InsightRefusal) -> ApiError {
    match refusal {
        InsightRefusal::Full => ApiError::Conflict(format!(
            "the project has {MAX_INSIGHTS} insights, the most it may have: \
             delete one before adding another"
        )),
        InsightRefusal::NotANumber(kind) => ApiError::Validation(vec![FieldError::new(
            vec!["value".into()],
            format!("cannot increment this insight: its value is {kind}, not a number"),
        )]),
        InsightRefusal::OutOfRange => ApiError::Validation(vec![FieldError::new(
            vec!["value".into(), "$inc".into()],
            format!(
                "would take the insight's value beyond {MAX_MAGNITUDE} either side of zero, \
                 the largest an insight holds"
            ),
        )]),
    }
}

pub struct InsightsApi {
    pub state: Arc<AppState>,
}

impl InsightsApi {
    /// The written insight as answered (`created` or not), after telling this
    /// replica's live streams; a refusal as its error.
    fn written<R>(
        &self,
        written: Result<(Insight, bool), InsightRefusal>,
        request_id: RequestId,
        answer: impl FnOnce(Json<Success<InsightOut>>, bool) -> R,
    ) -> poem::Result<R> {
        let (insight, created) = written.map_err(refused)?;
        self.state.tail.nudge();
        Ok(answer(
            Json(Success::new(insight.into(), request_id)),
            created,
        ))
    }
}

#[OpenApi(tag = "ApiTags::Insights")]
impl InsightsApi {
    /// Set an insight
    ///
    /// Creates the insight, or replaces its value (and its icon, when one
    /// is given). A project has at most 100 insights: one more is a 409.
    /// Open streams get it as an `insight` message.
    #[oai(path = "/v1/insights", method = "post", operation_id = "setInsight")]
    async fn set(
        &self,
        body: ValidatedJson<SetInsightIn>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<SetResponse> {
        let input = body.0;
        let written = self
            .state
            .store
            .set_insight(
                &auth.scope,
                &input.title,
                &input.value.0,
                input.icon.as_ref().map(|i| i.0.as_str()),
                common::time::now(),
            )
            .await
            .map_err(ApiError::from)?;
        self.written(written, **request_id, |body, created| {
            if created {
                SetResponse::Created(body)
            } else {
                SetResponse::Updated(body)
            }
        })
    }

    /// Increment an insight
    ///
    /// Adds `value.$inc` to the insight's number in one atomic step: every
    /// increment counts once, however many clients and replicas send them
    /// at the same time. An insight that does not exist is created holding
    /// the increment. An integer stays one while only integers are added;
    /// a fraction makes it a float. A value that is not a number, or a sum
    /// beyond 9007199254740991 either side of zero, is a 400 (nothing
    /// changes). Open streams get it as an `insight` message.
    #[oai(
        path = "/v1/insights",
        method = "patch",
        operation_id = "incrementInsight"
    )]
    async fn increment(
        &self,
        body: ValidatedJson<IncrementInsightIn>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<IncrementResponse> {
        let input = body.0;
        let written = self
            .state
            .store
            .increment_insight(
                &auth.scope,
                &input.title,
                input.value.by.0,
                input.icon.as_ref().map(|i| i.0.as_str()),
                common::time::now(),
            )
            .await
            .map_err(ApiError::from)?;
        self.written(written, **request_id, |body, created| {
            if created {
                IncrementResponse::Created(body)
            } else {
                IncrementResponse::Incremented(body)
            }
        })
    }

    /// List insights
    ///
    /// Every insight of the project, in the order they were created (then
    /// by title).
    #[oai(path = "/v1/insights", method = "get", operation_id = "listInsights")]
    async fn list(
        &self,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ListResponse> {
        let insights = self
            .state
            .store
            .list_insights(&auth.scope)
            .await
            .map_err(ApiError::from)?;
        Ok(ListResponse::Ok(Json(Success::new(
            InsightList {
                insights: insights.into_iter().map(Into::into).collect(),
            },
            **request_id,
        ))))
    }

    /// Delete an insight
    ///
    /// Open streams get an `insight-deleted` message.
    #[oai(
        path = "/v1/insights/:title",
        method = "delete",
        operation_id = "deleteInsight"
    )]
    async fn delete(
        &self,
        /// The insight's title (URL-encoded).
        #[oai(validator(min_length = 1, max_length = 100))]
        title: Path<String>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<DeleteResponse> {
        let now = common::time::now();
        let deleted = self
            .state
            .store
            .delete_insight(&auth.scope, &title.0, now)
            .await
            .map_err(ApiError::from)?;
        if !deleted {
            return Err(ApiError::NotFound("no insight with this title".into()).into());
        }
        self.state.tail.nudge();
        Ok(DeleteResponse::Ok(Json(Success::new(
            DeletedInsight {
                title: title.0,
                deleted: true,
                deleted_at: now,
            },
            **request_id,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_limits_are_the_stores() {
        let MetaSchemaRef::Inline(schema) = ValueJson::schema_ref() else {
            panic!("an inline schema");
        };
        let number = schema
            .one_of
            .iter()
            .find_map(|b| match b {
                MetaSchemaRef::Inline(b) if b.ty == "number" => Some(b),
                _ => None,
            })
            .expect("a number branch");
        assert_eq!(number.maximum, Some(MAX_MAGNITUDE as f64));
        assert!(
            schema
                .description
                .is_some_and(|d| d.contains(&MAX_MAGNITUDE.to_string())),
            "{:?}",
            schema.description
        );
    }

    #[test]
    fn a_whole_increment_is_an_integer_and_a_fraction_a_float() {
        let parse = |v: Value| Amount::parse_from_json(Some(v)).ok().map(|a| a.0);
        assert_eq!(parse(serde_json::json!(3)), Some(InsightNumber::Integer(3)));
        assert_eq!(
            parse(serde_json::json!(0.25)),
            Some(InsightNumber::Float(0.25))
        );
        assert_eq!(parse(serde_json::json!("3")), None);
        assert_eq!(
            Amount(InsightNumber::Integer(1)).to_json(),
            Some(serde_json::json!(1))
        );
    }
}

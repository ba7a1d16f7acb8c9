//! `POST /v1/identify`: create or update one of the caller's users;
//! `GET /v1/users/{userId}`: look one up.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use common::store::Identity;
use poem::web::Data;
use poem_openapi::{ApiResponse, Object, OpenApi, param::Path, payload::Json, types::Example};
use serde_json::Value;

use super::{ApiTags, Success};
use crate::{
    auth::AuthContext, error::ApiError, request_id::RequestId, state::AppState,
    validation::ValidatedJson,
};

/// A user identity update. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields, example)]
pub struct IdentifyIn {
    /// The caller's own id for the user.
    #[oai(validator(min_length = 1, max_length = 255))]
    pub user_id: String,
    /// Properties to set: merged into the stored ones, new keys overwrite.
    /// At most 100 top-level keys, nested at most 16 levels.
    #[oai(validator(max_properties = 100))]
    pub properties: Option<BTreeMap<String, Value>>,
    /// Alternative ids of the user, added to the stored set: at most 50,
    /// each 1 to 255 characters.
    #[oai(validator(max_items = 50, min_length = 1, max_length = 255))]
    pub aliases: Option<Vec<String>>,
}

/// The sample body the docs show and their "Test Request" sends.
impl Example for IdentifyIn {
    fn example() -> Self {
        Self {
            user_id: "user_7".into(),
            properties: Some(BTreeMap::from([
                ("plan".into(), Value::from("pro")),
                ("seats".into(), Value::from(3)),
            ])),
            aliases: Some(vec!["ada@example.com".into()]),
        }
    }
}

/// A user identity as stored after the update.
#[derive(Debug, Clone, Object)]
pub struct IdentityOut {
    pub user_id: String,
    /// Every property set so far.
    pub properties: BTreeMap<String, Value>,
    /// Every alias added so far, in first-seen order.
    pub aliases: Vec<String>,
    /// When the user was first identified.
    #[oai(rename = "createdAt")]
    pub created_at: DateTime<Utc>,
    /// When the user was last identified.
    #[oai(rename = "updatedAt")]
    pub updated_at: DateTime<Utc>,
}

impl From<Identity> for IdentityOut {
    fn from(i: Identity) -> Self {
        Self {
            user_id: i.user_id,
            properties: i.properties.into_iter().collect(),
            aliases: i.aliases,
            created_at: i.created_at,
            updated_at: i.updated_at,
        }
    }
}

#[derive(ApiResponse)]
pub enum IdentifyResponse {
    /// The identity as stored after the update.
    #[oai(status = 200)]
    Ok(Json<Success<IdentityOut>>),
}

#[derive(ApiResponse)]
pub enum GetUserResponse {
    /// The identity as merged from every identify call.
    #[oai(status = 200)]
    Ok(Json<Success<IdentityOut>>),
}

pub struct IdentifyApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Identities")]
impl IdentifyApi {
    /// Create or update a user identity
    ///
    /// `properties` are merged into the stored ones (new keys overwrite) and
    /// `aliases` are added to the stored set.
    #[oai(path = "/v1/identify", method = "post", operation_id = "identify")]
    async fn identify(
        &self,
        body: ValidatedJson<IdentifyIn>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<IdentifyResponse> {
        let input = body.0;
        let identity = self
            .state
            .store
            .merge_identity(
                &auth.scope,
                &input.user_id,
                input.properties.unwrap_or_default().into_iter().collect(),
                input.aliases.unwrap_or_default(),
                common::time::now(),
            )
            .await
            .map_err(ApiError::from)?;
        Ok(IdentifyResponse::Ok(Json(Success::new(
            identity.into(),
            **request_id,
        ))))
    }

    /// Look up a user
    ///
    /// The identity as `POST /v1/identify` left it. The user's events are
    /// `GET /v1/events?userId=…`.
    #[oai(path = "/v1/users/:userId", method = "get", operation_id = "getUser")]
    async fn get_user(
        &self,
        /// The caller's own id for the user (URL-encoded).
        #[oai(name = "userId", validator(min_length = 1, max_length = 255))]
        user_id: Path<String>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<GetUserResponse> {
        let identity = self
            .state
            .store
            .get_identity(&auth.scope, &user_id.0)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::NotFound("no user with this id".into()))?;
        Ok(GetUserResponse::Ok(Json(Success::new(
            identity.into(),
            **request_id,
        ))))
    }
}

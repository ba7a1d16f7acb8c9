//! The routes of the caller's users: `POST /v1/identify` creates or
//! updates one, `GET /v1/users/{userId}` looks one up (by its id or an
//! alias), `GET /v1/users` lists them (its paging and filters are
//! `users`'). The rules of users, their counters and aliases are the
//! store's (`common::store::user`).

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use common::store::Identity;
use poem::web::Data;
use poem_openapi::{
    ApiResponse, Object, OpenApi,
    param::{Path, Query},
    payload::Json,
    types::Example,
};
use serde_json::Value;

use super::{
    ApiTags, Success,
    users::{self, ListUsersResponse},
};
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
    /// each 1 to 255 characters. Events recorded under an alias count for
    /// this user; an alias that named another user (its id or one of its
    /// aliases) merges that user into this one.
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

/// A user identity as stored, with the counters its events keep.
#[derive(Debug, Clone, Object)]
pub struct IdentityOut {
    pub user_id: String,
    /// Every property set so far.
    pub properties: BTreeMap<String, Value>,
    /// Every alias added so far, in first-seen order.
    pub aliases: Vec<String>,
    /// When its record was made: its first identify call, or the time of
    /// the event that made it.
    #[oai(rename = "createdAt")]
    pub created_at: DateTime<Utc>,
    /// When identify last changed it (`createdAt` if never).
    #[oai(rename = "updatedAt")]
    pub updated_at: DateTime<Utc>,
    /// The earliest time the user was seen: its earliest event's
    /// `createdAt`, or an identify call.
    #[oai(rename = "firstSeenAt")]
    pub first_seen_at: DateTime<Utc>,
    /// The latest time the user was seen.
    #[oai(rename = "lastSeenAt")]
    pub last_seen_at: DateTime<Utc>,
    /// How many events were recorded for the user, under its id or an
    /// alias (events retention has removed since included).
    #[oai(rename = "eventCount")]
    pub event_count: u64,
}

impl From<Identity> for IdentityOut {
    fn from(i: Identity) -> Self {
        Self {
            user_id: i.user_id,
            properties: i.properties.into_iter().collect(),
            aliases: i.aliases,
            created_at: i.created_at,
            updated_at: i.updated_at,
            first_seen_at: i.first_seen_at,
            last_seen_at: i.last_seen_at,
            event_count: i.event_count,
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
    /// `aliases` are added to the stored set. A `user_id` that is an alias
    /// updates the user it names; an alias that named another user merges
    /// that user into this one. The user counts as seen now.
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
    /// The user as events and `POST /v1/identify` left it, with its
    /// counters; an alias answers the user it names. The user's events
    /// (under its id and its aliases) are `GET /v1/events?userId=…`.
    #[oai(path = "/v1/users/:userId", method = "get", operation_id = "getUser")]
    async fn get_user(
        &self,
        /// The caller's own id for the user, or one of its aliases
        /// (URL-encoded).
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

    /// List users
    ///
    /// The project's users, most recently seen first (`lastSeenAt`, then
    /// `userId`), narrowed by the filters, with the counters kept as their
    /// events are recorded. Follow `nextCursor` for the rest: no user is
    /// listed twice in one walk; a user seen again while you page moves to
    /// the front, where a new first page shows it.
    #[oai(path = "/v1/users", method = "get", operation_id = "listUsers")]
    async fn list_users(
        &self,
        /// Only users whose id or one of whose aliases contains this text,
        /// ignoring case.
        #[oai(validator(min_length = 1, max_length = 255))]
        q: Query<Option<String>>,
        /// Only users with this property: `key:value`, the key before the
        /// first colon. A string property matches its exact text; a
        /// number or a boolean matches its JSON text (`seats:3`,
        /// `beta:true`).
        #[oai(validator(pattern = "^[^:]+:", max_length = 1000))]
        property: Query<Option<String>>,
        /// Users per page, 1 to 100; 50 when absent.
        #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
        limit: Query<Option<u32>>,
        /// Where to continue: the `nextCursor` of the previous page, passed
        /// unchanged (`<unix µs>.<user id as hex UTF-8>`: the users listed
        /// after that position).
        #[oai(validator(pattern = "^-?[0-9]{1,18}\\.(?:[0-9a-f]{2}){1,1020}$"))]
        cursor: Query<Option<String>>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ListUsersResponse> {
        let filter = users::filter(q.0, property.0.as_deref())?;
        let page = users::page(
            self.state.store.as_ref(),
            &auth.scope,
            &filter,
            cursor.0.as_deref(),
            limit.0,
        )
        .await?;
        Ok(ListUsersResponse::Ok(Json(Success::new(
            page,
            **request_id,
        ))))
    }
}

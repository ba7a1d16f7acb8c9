//! A project's API keys: create (the secret is in that one response), list
//! (revoked ones too, with when each was last used), revoke, and rotate (a
//! new secret for the same key; the old one works through a grace period).
//! Keys made here and by `ingest keys create` are the same records.

use std::sync::Arc;

use chrono::{DateTime, DurationRound as _, TimeDelta, Utc};
use common::{
    keys::{display_prefix, generate_secret, hash_secret},
    store::{ApiKey, KeyScope},
};
use poem::web::Data;
use poem_openapi::{
    ApiResponse, Enum, Object, OpenApi, param::Path, payload::Json, types::Example,
};
use serde_json::json;
use uuid::Uuid;

use super::{AdminContext, Directory, parse_id};
use crate::{
    api::{ApiTags, Success},
    audit::{details, target},
    error::ApiError,
    request_id::RequestId,
    state::AppState,
    types::Nullable,
    validation::{MaybeJson, ValidatedJson},
};

/// The grace period of a rotated key's old secret when none is given.
const DEFAULT_GRACE_SECONDS: u32 = 24 * 60 * 60;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Enum)]
pub enum ScopeName {
    #[oai(rename = "events:write")]
    EventsWrite,
    #[oai(rename = "events:read")]
    EventsRead,
    #[oai(rename = "devices:write")]
    DevicesWrite,
    #[oai(rename = "devices:read")]
    DevicesRead,
}

impl From<ScopeName> for KeyScope {
    fn from(s: ScopeName) -> Self {
        match s {
            ScopeName::EventsWrite => Self::EventsWrite,
            ScopeName::EventsRead => Self::EventsRead,
            ScopeName::DevicesWrite => Self::DevicesWrite,
            ScopeName::DevicesRead => Self::DevicesRead,
        }
    }
}

impl From<KeyScope> for ScopeName {
    fn from(s: KeyScope) -> Self {
        match s {
            KeyScope::EventsWrite => Self::EventsWrite,
            KeyScope::EventsRead => Self::EventsRead,
            KeyScope::DevicesWrite => Self::DevicesWrite,
            KeyScope::DevicesRead => Self::DevicesRead,
        }
    }
}

/// A new key's settings. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields, example)]
pub struct KeyIn {
    /// A label to recognise the key by.
    #[oai(validator(min_length = 1, max_length = 100))]
    pub name: Option<String>,
    /// What the key may do; every scope when absent.
    #[oai(validator(min_items = 1, max_items = 4, unique_items))]
    pub scopes: Option<Vec<ScopeName>>,
    /// Requests per minute; the service default when absent.
    #[oai(validator(minimum(value = "1"), maximum(value = "1000000")))]
    pub rate_limit: Option<u32>,
}

impl Example for KeyIn {
    fn example() -> Self {
        Self {
            name: Some("checkout-service".into()),
            scopes: Some(vec![ScopeName::EventsWrite]),
            rate_limit: Some(600),
        }
    }
}

/// How long the old secret of a rotated key keeps working.
#[derive(Debug, Clone, Default, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields, example)]
pub struct RotateIn {
    /// Seconds, 0 to 2592000 (30 days); 86400 (24 h) when absent.
    #[oai(validator(minimum(value = "0"), maximum(value = "2592000")))]
    pub grace_period_seconds: Option<u32>,
}

impl Example for RotateIn {
    fn example() -> Self {
        Self {
            grace_period_seconds: Some(3600),
        }
    }
}

/// An API key, never its secret.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct KeyOut {
    pub id: Uuid,
    pub project_id: Uuid,
    pub name: Nullable<String>,
    /// The first characters of the secret, to tell keys apart.
    pub prefix: String,
    pub scopes: Vec<ScopeName>,
    /// Requests per minute, or null for the service default.
    pub rate_limit: Nullable<u32>,
    pub created_at: DateTime<Utc>,
    /// To the minute.
    pub last_used_at: Nullable<DateTime<Utc>>,
    pub revoked_at: Nullable<DateTime<Utc>>,
    /// While the secret a rotation replaced still works: until when.
    pub previous_secret_expires_at: Nullable<DateTime<Utc>>,
}

/// A key and its secret, shown in this response only.
#[derive(Debug, Clone, Object)]
pub struct KeyWithSecret {
    pub key: KeyOut,
    /// `tocsin_` and 43 characters; store it now, it is never shown again.
    pub secret: String,
}

#[derive(Debug, Clone, Object)]
pub struct KeyList {
    /// Newest first, revoked ones included.
    pub items: Vec<KeyOut>,
}

#[derive(ApiResponse)]
pub enum KeyListResponse {
    #[oai(status = 200)]
    Ok(Json<Success<KeyList>>),
}

#[derive(ApiResponse)]
pub enum SecretResponse {
    /// Created; the secret is in this response only.
    #[oai(status = 201)]
    Created(Json<Success<KeyWithSecret>>),
    /// Rotated; the new secret is in this response only.
    #[oai(status = 200)]
    Rotated(Json<Success<KeyWithSecret>>),
}

#[derive(ApiResponse)]
pub enum KeyResponse {
    /// The key, revoked.
    #[oai(status = 200)]
    Ok(Json<Success<KeyOut>>),
}

pub struct KeysApi {
    pub state: Arc<AppState>,
}

impl KeysApi {
    fn out(&self, key: ApiKey, project_id: Uuid) -> KeyOut {
        let now = common::time::now();
        let last_used = key.last_used_at.max(self.state.last_used.get(key.id));
        KeyOut {
            id: key.id,
            project_id,
            prefix: key.prefix.clone(),
            scopes: key.scopes.iter().map(|s| (*s).into()).collect(),
            rate_limit: Nullable(key.rate_limit),
            created_at: key.created_at,
            last_used_at: Nullable(
                last_used.and_then(|t| t.duration_trunc(TimeDelta::minutes(1)).ok()),
            ),
            revoked_at: Nullable(key.revoked_at),
            previous_secret_expires_at: Nullable(key.previous_secret_expires(now)),
            name: Nullable(key.name),
        }
    }

    /// A key by its path id and the id of its project, or 404.
    async fn key(&self, key_id: &str) -> Result<(ApiKey, Uuid), ApiError> {
        let not_found = || ApiError::NotFound("no key with this id".into());
        let id = parse_id(key_id, "key")?;
        let store = self.state.store.as_ref();
        let key = store.get_api_key(id).await?.ok_or_else(not_found)?;
        let directory = Directory::load_with(store, &key.scope).await?;
        let project = directory.project_of(&key.scope).ok_or_else(not_found)?.id;
        Ok((key, project))
    }
}

#[OpenApi(tag = "ApiTags::Admin")]
impl KeysApi {
    /// List a project's API keys
    #[oai(
        path = "/admin/v1/projects/:projectId/keys",
        method = "get",
        operation_id = "adminListKeys"
    )]
    async fn list(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<KeyListResponse> {
        let store = self.state.store.as_ref();
        let directory = Directory::load(store).await?;
        let (organization, project) = directory.project(&project_id.0)?;
        let scope = project.scope(organization);
        let mut keys: Vec<ApiKey> = store
            .list_api_keys()
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .filter(|k| k.scope == scope)
            .collect();
        keys.sort_by_key(|k| std::cmp::Reverse((k.created_at, k.id)));
        let items = keys.into_iter().map(|k| self.out(k, project.id)).collect();
        Ok(KeyListResponse::Ok(Json(Success::new(
            KeyList { items },
            **request_id,
        ))))
    }

    /// Create an API key
    ///
    /// The secret is in this response only.
    #[oai(
        path = "/admin/v1/projects/:projectId/keys",
        method = "post",
        operation_id = "adminCreateKey"
    )]
    async fn create(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        body: ValidatedJson<KeyIn>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<SecretResponse> {
        let store = self.state.store.as_ref();
        let directory = Directory::load(store).await?;
        let (organization, project) = directory.project(&project_id.0)?;
        let input = body.0;
        let scopes = match input.scopes {
            Some(names) => KeyScope::canonical(names.into_iter().map(Into::into)),
            None => KeyScope::ALL.to_vec(),
        };
        let (key, secret) = crate::cli::new_key(
            project.scope(organization),
            input.name,
            input.rate_limit,
            &scopes,
        );
        store.insert_api_key(&key).await.map_err(ApiError::from)?;
        let about = details(json!({
            "project": project.name,
            "scopes": KeyScope::names(&key.scopes),
            "rateLimit": key.rate_limit,
        }));
        admin
            .audit(
                &self.state,
                "key.create",
                target("key", key.id, key.name.as_deref()),
                about,
            )
            .await?;
        Ok(SecretResponse::Created(Json(Success::new(
            KeyWithSecret {
                key: self.out(key, project.id),
                secret,
            },
            **request_id,
        ))))
    }

    /// Revoke an API key
    ///
    /// Requests with it get 401 from then on at the replica that answers
    /// this call, and within one second at every other one (each caches a
    /// key it has checked for at most a second); it stays listed, revoked.
    /// Revoking a revoked key changes nothing.
    #[oai(
        path = "/admin/v1/keys/:keyId/revoke",
        method = "post",
        operation_id = "adminRevokeKey"
    )]
    async fn revoke(
        &self,
        /// The key's id.
        #[oai(name = "keyId")]
        key_id: Path<String>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<KeyResponse> {
        let (key, project) = self.key(&key_id.0).await?;
        let store = self.state.store.as_ref();
        if store
            .revoke_api_key(key.id, common::time::now())
            .await
            .map_err(ApiError::from)?
        {
            // Refused from this request on, not when the cache expires.
            self.state.keys.forget_all();
            let target = target("key", key.id, key.name.as_deref());
            admin
                .audit(&self.state, "key.revoke", target, details(json!({})))
                .await?;
        }
        let (key, _) = self.key(&key_id.0).await?;
        Ok(KeyResponse::Ok(Json(Success::new(
            self.out(key, project),
            **request_id,
        ))))
    }

    /// Rotate an API key
    ///
    /// A new secret for the same key and settings; the old one keeps working
    /// until `previousSecretExpiresAt`, then gets 401. A revoked key cannot
    /// be rotated (409).
    #[oai(
        path = "/admin/v1/keys/:keyId/rotate",
        method = "post",
        operation_id = "adminRotateKey"
    )]
    async fn rotate(
        &self,
        /// The key's id.
        #[oai(name = "keyId")]
        key_id: Path<String>,
        body: MaybeJson<RotateIn>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<SecretResponse> {
        let (key, project) = self.key(&key_id.0).await?;
        let revoked = || ApiError::Conflict("this key is revoked; create a new one".into());
        if !key.is_active() {
            return Err(revoked().into());
        }
        let grace = body.0.grace_period_seconds.unwrap_or(DEFAULT_GRACE_SECONDS);
        let until = common::time::now() + TimeDelta::seconds(i64::from(grace));
        let secret = generate_secret();
        let rotated = self
            .state
            .store
            .rotate_api_key(
                key.id,
                &hash_secret(&secret),
                &display_prefix(&secret),
                until,
            )
            .await
            .map_err(ApiError::from)?;
        if !rotated {
            return Err(revoked().into());
        }
        // The replaced secret's grace starts now: no cached copy of the key
        // from before the rotation may outlive it.
        self.state.keys.forget_all();
        let about = details(json!({ "gracePeriodSeconds": grace }));
        admin
            .audit(
                &self.state,
                "key.rotate",
                target("key", key.id, key.name.as_deref()),
                about,
            )
            .await?;
        let (key, _) = self.key(&key_id.0).await?;
        Ok(SecretResponse::Rotated(Json(Success::new(
            KeyWithSecret {
                key: self.out(key, project),
                secret,
            },
            **request_id,
        ))))
    }
}

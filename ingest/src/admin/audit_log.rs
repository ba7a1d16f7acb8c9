//! `GET /admin/v1/audit`: every admin action (and CLI key and admin
//! command), newest first, a page at a time.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use common::store::AuditEntry;
use poem::web::Data;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi, param::Query, payload::Json};
use serde_json::Value;
use uuid::Uuid;

use crate::{
    api::{ApiTags, Success},
    error::ApiError,
    request_id::RequestId,
    state::AppState,
    types::Nullable,
};

/// Entries per page when the request names none.
const DEFAULT_LIMIT: u32 = 50;

/// Who acted: an admin (by token) or someone at the server's shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum ActorKind {
    Admin,
    Cli,
}

#[derive(Debug, Clone, Object)]
pub struct ActorOut {
    pub kind: ActorKind,
    /// The admin's id; null for the CLI.
    pub id: Nullable<Uuid>,
    /// The admin's name, or the shell user's.
    pub name: String,
}

/// What an action was done to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum TargetType {
    Organization,
    Project,
    Key,
    Device,
    Destination,
    Admin,
}

#[derive(Debug, Clone, Object)]
pub struct TargetOut {
    #[oai(rename = "type")]
    pub kind: TargetType,
    pub id: Uuid,
    pub name: Nullable<String>,
}

/// One entry of the audit log. It never holds a secret.
#[derive(Debug, Clone, Object)]
pub struct AuditEntryOut {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    pub actor: ActorOut,
    /// Such as `key.create`, `project.rename`, `admin.revoke`.
    pub action: String,
    pub target: TargetOut,
    /// What else is worth knowing, such as `{"from": "web", "to": "website"}`.
    pub details: BTreeMap<String, Value>,
    /// The client's address; null for the CLI.
    pub address: Nullable<String>,
}

impl AuditEntryOut {
    fn new(e: AuditEntry) -> Result<Self, ApiError> {
        let unknown = |what: &str, value: &str| {
            ApiError::Internal(anyhow::anyhow!(
                "audit entry {}: unknown {what} {value:?}",
                e.id
            ))
        };
        let kind = match e.actor.kind.as_str() {
            "admin" => ActorKind::Admin,
            "cli" => ActorKind::Cli,
            other => return Err(unknown("actor", other)),
        };
        let target = match e.target.kind.as_str() {
            "organization" => TargetType::Organization,
            "project" => TargetType::Project,
            "key" => TargetType::Key,
            "device" => TargetType::Device,
            "destination" => TargetType::Destination,
            "admin" => TargetType::Admin,
            other => return Err(unknown("target", other)),
        };
        Ok(Self {
            id: e.id,
            at: e.at,
            actor: ActorOut {
                kind,
                id: Nullable(e.actor.id),
                name: e.actor.name,
            },
            action: e.action,
            target: TargetOut {
                kind: target,
                id: e.target.id,
                name: Nullable(e.target.name),
            },
            details: e.details.into_iter().collect(),
            address: Nullable(e.address),
        })
    }
}

#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AuditPage {
    /// Newest first.
    pub items: Vec<AuditEntryOut>,
    /// Pass as `cursor` to get the next (older) page; null on the last page.
    pub next_cursor: Nullable<String>,
}

#[derive(ApiResponse)]
pub enum AuditResponse {
    #[oai(status = 200)]
    Ok(Json<Success<AuditPage>>),
}

pub struct AuditApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Admin")]
impl AuditApi {
    /// List the audit log
    ///
    /// Every admin action, and every key and admin command run with the
    /// CLI, newest first.
    #[oai(
        path = "/admin/v1/audit",
        method = "get",
        operation_id = "adminListAudit"
    )]
    async fn list(
        &self,
        /// Entries per page, 1 to 100; 50 when absent.
        #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
        limit: Query<Option<u32>>,
        /// Where to continue: the `nextCursor` of the previous page (the id
        /// of its last entry; the entries older than it follow).
        cursor: Query<Option<Uuid>>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<AuditResponse> {
        let before = cursor.0;
        let limit = limit.0.unwrap_or(DEFAULT_LIMIT);
        // One more than asked: whether it comes says if there is a next page.
        let mut entries = self
            .state
            .store
            .list_audit(before, limit + 1)
            .await
            .map_err(ApiError::from)?;
        let more = entries.len() > limit as usize;
        entries.truncate(limit as usize);
        let next_cursor = more
            .then(|| entries.last().map(|e| e.id.to_string()))
            .flatten();
        let items = entries
            .into_iter()
            .map(AuditEntryOut::new)
            .collect::<Result<_, _>>()?;
        Ok(AuditResponse::Ok(Json(Success::new(
            AuditPage {
                items,
                next_cursor: Nullable(next_cursor),
            },
            **request_id,
        ))))
    }
}

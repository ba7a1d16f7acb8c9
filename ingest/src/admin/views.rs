//! What organizations and projects look like in admin responses, with the
//! counts an operator sees beside them.

use chrono::{DateTime, Utc};
use common::store::{Organization, Store};
use poem_openapi::Object;
use uuid::Uuid;

use super::Directory;
use crate::error::ApiError;

/// An organization: the parent of projects.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct OrganizationOut {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub project_count: u64,
}

/// A project: what API keys, events and devices belong to.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ProjectOut {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_name: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// Keys not revoked.
    pub key_count: u64,
    pub device_count: u64,
}

#[derive(Debug, Clone, Object)]
pub struct OrganizationList {
    /// By name.
    pub items: Vec<OrganizationOut>,
}

#[derive(Debug, Clone, Object)]
pub struct ProjectList {
    /// By organization name, then name.
    pub items: Vec<ProjectOut>,
}

impl Directory {
    pub fn organization_out(&self, o: &Organization) -> OrganizationOut {
        OrganizationOut {
            id: o.id,
            name: o.name.clone(),
            created_at: o.created_at,
            project_count: self
                .projects
                .iter()
                .filter(|p| p.organization_id == o.id)
                .count() as u64,
        }
    }

    /// The projects of `organization` (every one when `None`), with counts.
    pub async fn projects_out(
        &self,
        store: &dyn Store,
        organization: Option<Uuid>,
    ) -> Result<Vec<ProjectOut>, ApiError> {
        let keys = store.list_api_keys().await?;
        let mut out = Vec::new();
        for o in &self.organizations {
            if organization.is_some_and(|id| id != o.id) {
                continue;
            }
            for p in self.projects.iter().filter(|p| p.organization_id == o.id) {
                let scope = p.scope(o);
                out.push(ProjectOut {
                    id: p.id,
                    organization_id: o.id,
                    organization_name: o.name.clone(),
                    name: p.name.clone(),
                    created_at: p.created_at,
                    key_count: keys
                        .iter()
                        .filter(|k| k.scope == scope && k.is_active())
                        .count() as u64,
                    device_count: store.list_devices(&scope).await?.len() as u64,
                });
            }
        }
        Ok(out)
    }
}

/// One project with its counts, or 404.
pub async fn project_out(store: &dyn Store, id: Uuid) -> Result<ProjectOut, ApiError> {
    let directory = Directory::load(store).await?;
    let organization = directory
        .projects
        .iter()
        .find(|p| p.id == id)
        .map(|p| p.organization_id);
    directory
        .projects_out(store, organization)
        .await?
        .into_iter()
        .find(|p| p.id == id)
        .ok_or_else(|| ApiError::NotFound("no project with this id".into()))
}

//! The admin API under `/admin/v1`: what an operator does in the dashboard
//! (organizations and projects, a project's API keys, devices and
//! destinations, the audit log), with a bearer admin token the
//! authentication layer checks. One module per resource, each owning its
//! types and handlers; every write is recorded in the audit log. Responses
//! use the API's envelopes and errors.

pub mod audit_log;
pub mod destinations;
pub mod devices;
pub mod keys;
pub mod sending;
pub mod session;
pub mod tenancy;
pub mod views;

use std::{net::IpAddr, sync::Arc};

use common::store::{NameTaken, Organization, Project, Scope, Store, tenancy::adopt};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::{audit, error::ApiError, state::AppState};

/// The admin a request is authenticated as, and where it came from; the
/// authentication layer puts it in the request.
#[derive(Debug, Clone)]
pub struct AdminContext {
    pub admin: common::store::Admin,
    pub address: IpAddr,
}

impl AdminContext {
    /// Appends an entry for an action of this admin to the audit log.
    pub async fn audit(
        &self,
        state: &AppState,
        action: &str,
        target: common::store::AuditTarget,
        details: Map<String, Value>,
    ) -> Result<(), ApiError> {
        audit::record(
            state.store.as_ref(),
            audit::admin_actor(&self.admin),
            Some(self.address),
            action,
            target,
            details,
        )
        .await
        .map_err(ApiError::from)
    }
}

/// Every API of the admin tree, in the order the document lists them.
pub type AdminApis = (
    session::SessionApi,
    tenancy::TenancyApi,
    keys::KeysApi,
    devices::DevicesAdminApi,
    destinations::DestinationsApi,
    audit_log::AuditApi,
);

pub fn apis(state: &Arc<AppState>) -> AdminApis {
    (
        session::SessionApi,
        tenancy::TenancyApi {
            state: Arc::clone(state),
        },
        keys::KeysApi {
            state: Arc::clone(state),
        },
        devices::DevicesAdminApi {
            state: Arc::clone(state),
        },
        destinations::DestinationsApi {
            state: Arc::clone(state),
        },
        audit_log::AuditApi {
            state: Arc::clone(state),
        },
    )
}

/// Organizations and projects as the store has them, loaded for one
/// request: admin traffic is rare and there are few of them.
pub struct Directory {
    pub organizations: Vec<Organization>,
    pub projects: Vec<Project>,
}

impl Directory {
    pub async fn load(store: &dyn Store) -> Result<Self, ApiError> {
        Ok(Self {
            organizations: store.list_organizations().await?,
            projects: store.list_projects().await?,
        })
    }

    /// Loads it, first adopting `scope` if no project has it yet (a key
    /// written straight to the store, bypassing the CLI and this API).
    pub async fn load_with(store: &dyn Store, scope: &Scope) -> Result<Self, ApiError> {
        let directory = Self::load(store).await?;
        if directory.project_of(scope).is_some() {
            return Ok(directory);
        }
        adopt(store, std::slice::from_ref(scope), common::time::now()).await?;
        Self::load(store).await
    }

    pub fn organization(&self, id: Uuid) -> Option<&Organization> {
        self.organizations.iter().find(|o| o.id == id)
    }

    /// An organization, or 404.
    pub fn existing_organization(&self, id: Uuid) -> Result<&Organization, ApiError> {
        self.organization(id)
            .ok_or_else(|| ApiError::NotFound("no organization with this id".into()))
    }

    /// A project and its organization, or 404.
    pub fn project(&self, id: &str) -> Result<(&Organization, &Project), ApiError> {
        let not_found = || ApiError::NotFound("no project with this id".into());
        let id = Uuid::parse_str(id).map_err(|_| not_found())?;
        let project = self
            .projects
            .iter()
            .find(|p| p.id == id)
            .ok_or_else(not_found)?;
        let organization = self
            .organization(project.organization_id)
            .ok_or_else(not_found)?;
        Ok((organization, project))
    }

    /// The project whose data is tagged with `scope`.
    pub fn project_of(&self, scope: &Scope) -> Option<&Project> {
        let organization = self.organizations.iter().find(|o| o.slug == scope.org)?;
        self.projects
            .iter()
            .find(|p| p.organization_id == organization.id && p.slug == scope.project)
    }
}

/// The 409 for a name that cannot be used.
pub fn name_taken(what: &str, name: &str, taken: NameTaken) -> ApiError {
    ApiError::Conflict(match taken {
        NameTaken::Name => format!("{what} name {name:?} is taken"),
        NameTaken::Slug { holder } => format!(
            "{what} name {name:?} is taken: it is the original name of {what} {holder:?} \
             (renamed since), whose data is still tagged with it; choose another name"
        ),
    })
}

/// A path id that is not a UUID names nothing: 404, like an unknown one.
pub fn parse_id(id: &str, what: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id).map_err(|_| ApiError::NotFound(format!("no {what} with this id")))
}

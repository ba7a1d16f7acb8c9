//! Organizations and projects: create, list, rename. Names are unique
//! within their parent (organizations among all); renaming keeps the id
//! and the slug the data is tagged with, so nothing moves.

use std::sync::Arc;

use common::store::{Organization, Project};
use poem::web::Data;
use poem_openapi::{ApiResponse, Object, OpenApi, param::Path, payload::Json, types::Example};
use serde_json::json;
use uuid::Uuid;

use super::{
    AdminContext, Directory, name_taken, parse_id,
    views::{OrganizationList, OrganizationOut, ProjectList, ProjectOut, project_out},
};
use crate::{
    api::{ApiTags, Success},
    audit::{details, target},
    error::ApiError,
    request_id::RequestId,
    state::AppState,
    validation::ValidatedJson,
};

/// A name for an organization or a project. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields, example)]
pub struct NameIn {
    /// 1 to 100 letters, digits, `.`, `_` or `-`; unique within the parent.
    #[oai(validator(min_length = 1, max_length = 100, pattern = "^[A-Za-z0-9._-]+$"))]
    pub name: String,
}

impl Example for NameIn {
    fn example() -> Self {
        Self {
            name: "website".into(),
        }
    }
}

#[derive(ApiResponse)]
pub enum OrganizationListResponse {
    #[oai(status = 200)]
    Ok(Json<Success<OrganizationList>>),
}

#[derive(ApiResponse)]
pub enum OrganizationResponse {
    /// Created.
    #[oai(status = 201)]
    Created(Json<Success<OrganizationOut>>),
    /// Renamed.
    #[oai(status = 200)]
    Ok(Json<Success<OrganizationOut>>),
}

#[derive(ApiResponse)]
pub enum ProjectListResponse {
    #[oai(status = 200)]
    Ok(Json<Success<ProjectList>>),
}

#[derive(ApiResponse)]
pub enum ProjectResponse {
    /// Created.
    #[oai(status = 201)]
    Created(Json<Success<ProjectOut>>),
    /// Renamed.
    #[oai(status = 200)]
    Ok(Json<Success<ProjectOut>>),
}

pub struct TenancyApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Admin")]
impl TenancyApi {
    /// List organizations
    #[oai(
        path = "/admin/v1/organizations",
        method = "get",
        operation_id = "adminListOrganizations"
    )]
    async fn list_organizations(
        &self,
        request_id: Data<&RequestId>,
    ) -> poem::Result<OrganizationListResponse> {
        let directory = Directory::load(self.state.store.as_ref()).await?;
        let items = directory
            .organizations
            .iter()
            .map(|o| directory.organization_out(o))
            .collect();
        Ok(OrganizationListResponse::Ok(Json(Success::new(
            OrganizationList { items },
            **request_id,
        ))))
    }

    /// Create an organization
    #[oai(
        path = "/admin/v1/organizations",
        method = "post",
        operation_id = "adminCreateOrganization"
    )]
    async fn create_organization(
        &self,
        body: ValidatedJson<NameIn>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<OrganizationResponse> {
        let name = body.0.name;
        let organization = Organization {
            id: Uuid::now_v7(),
            name: name.clone(),
            slug: name.clone(),
            created_at: common::time::now(),
        };
        let store = self.state.store.as_ref();
        if let Err(taken) = store
            .insert_organization(&organization)
            .await
            .map_err(ApiError::from)?
        {
            return Err(name_taken("organization", &name, taken).into());
        }
        let target = target("organization", organization.id, Some(&name));
        admin
            .audit(
                &self.state,
                "organization.create",
                target,
                details(json!({})),
            )
            .await?;
        let directory = Directory::load(store).await?;
        Ok(OrganizationResponse::Created(Json(Success::new(
            directory.organization_out(&organization),
            **request_id,
        ))))
    }

    /// Rename an organization
    ///
    /// Keeps its id, projects, keys and data.
    #[oai(
        path = "/admin/v1/organizations/:orgId",
        method = "patch",
        operation_id = "adminRenameOrganization"
    )]
    async fn rename_organization(
        &self,
        /// The organization's id.
        #[oai(name = "orgId")]
        org_id: Path<String>,
        body: ValidatedJson<NameIn>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<OrganizationResponse> {
        let id = parse_id(&org_id.0, "organization")?;
        let store = self.state.store.as_ref();
        let before = Directory::load(store).await?;
        let from = before.existing_organization(id)?.name.clone();
        let name = body.0.name;
        renamed(
            store
                .rename_organization(id, &name)
                .await
                .map_err(ApiError::from)?,
            "organization",
            &name,
        )?;
        let target = target("organization", id, Some(&name));
        let change = details(json!({ "from": from, "to": name }));
        admin
            .audit(&self.state, "organization.rename", target, change)
            .await?;
        let directory = Directory::load(store).await?;
        let organization = directory.existing_organization(id)?;
        Ok(OrganizationResponse::Ok(Json(Success::new(
            directory.organization_out(organization),
            **request_id,
        ))))
    }

    /// List an organization's projects
    #[oai(
        path = "/admin/v1/organizations/:orgId/projects",
        method = "get",
        operation_id = "adminListOrganizationProjects"
    )]
    async fn list_organization_projects(
        &self,
        /// The organization's id.
        #[oai(name = "orgId")]
        org_id: Path<String>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ProjectListResponse> {
        let id = parse_id(&org_id.0, "organization")?;
        let directory = Directory::load(self.state.store.as_ref()).await?;
        directory.existing_organization(id)?;
        let items = directory
            .projects_out(self.state.store.as_ref(), Some(id))
            .await?;
        Ok(ProjectListResponse::Ok(Json(Success::new(
            ProjectList { items },
            **request_id,
        ))))
    }

    /// Create a project
    #[oai(
        path = "/admin/v1/organizations/:orgId/projects",
        method = "post",
        operation_id = "adminCreateProject"
    )]
    async fn create_project(
        &self,
        /// The organization's id.
        #[oai(name = "orgId")]
        org_id: Path<String>,
        body: ValidatedJson<NameIn>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ProjectResponse> {
        let id = parse_id(&org_id.0, "organization")?;
        let store = self.state.store.as_ref();
        let directory = Directory::load(store).await?;
        let organization = directory.existing_organization(id)?;
        let name = body.0.name;
        let project = Project {
            id: Uuid::now_v7(),
            organization_id: organization.id,
            name: name.clone(),
            slug: name.clone(),
            created_at: common::time::now(),
        };
        if let Err(taken) = store
            .insert_project(&project)
            .await
            .map_err(ApiError::from)?
        {
            return Err(name_taken("project", &name, taken).into());
        }
        let target = target("project", project.id, Some(&name));
        let about = details(json!({ "organization": organization.name }));
        admin
            .audit(&self.state, "project.create", target, about)
            .await?;
        Ok(ProjectResponse::Created(Json(Success::new(
            project_out(store, project.id).await?,
            **request_id,
        ))))
    }

    /// List every project
    ///
    /// The projects of every organization, by organization name, then name.
    #[oai(
        path = "/admin/v1/projects",
        method = "get",
        operation_id = "adminListProjects"
    )]
    async fn list_projects(
        &self,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ProjectListResponse> {
        let directory = Directory::load(self.state.store.as_ref()).await?;
        let items = directory
            .projects_out(self.state.store.as_ref(), None)
            .await?;
        Ok(ProjectListResponse::Ok(Json(Success::new(
            ProjectList { items },
            **request_id,
        ))))
    }

    /// Rename a project
    ///
    /// Keeps its id, keys, events and devices.
    #[oai(
        path = "/admin/v1/projects/:projectId",
        method = "patch",
        operation_id = "adminRenameProject"
    )]
    async fn rename_project(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        body: ValidatedJson<NameIn>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ProjectResponse> {
        let store = self.state.store.as_ref();
        let directory = Directory::load(store).await?;
        let (_, project) = directory.project(&project_id.0)?;
        let (id, from) = (project.id, project.name.clone());
        let name = body.0.name;
        renamed(
            store
                .rename_project(id, &name)
                .await
                .map_err(ApiError::from)?,
            "project",
            &name,
        )?;
        let target = target("project", id, Some(&name));
        let change = details(json!({ "from": from, "to": name }));
        admin
            .audit(&self.state, "project.rename", target, change)
            .await?;
        Ok(ProjectResponse::Ok(Json(Success::new(
            project_out(store, id).await?,
            **request_id,
        ))))
    }
}

/// The outcome of a rename as the API answers it: done, 409 or 404.
fn renamed(
    outcome: Result<bool, common::store::NameTaken>,
    what: &str,
    name: &str,
) -> Result<(), ApiError> {
    match outcome {
        Ok(true) => Ok(()),
        Ok(false) => Err(ApiError::NotFound(format!("no {what} with this id"))),
        Err(taken) => Err(name_taken(what, name, taken)),
    }
}

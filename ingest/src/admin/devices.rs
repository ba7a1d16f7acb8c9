//! A project's devices: listed as `GET /v1/devices` shows them, deleted.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::{ApiResponse, Object, OpenApi, param::Path, payload::Json};
use serde_json::json;

use super::{AdminContext, Directory, parse_id};
use crate::{
    api::{
        ApiTags, Success,
        devices::{DeletedDevice, DeviceOut},
    },
    audit::{details, target},
    error::ApiError,
    request_id::RequestId,
    state::AppState,
};

#[derive(Debug, Clone, Object)]
pub struct ProjectDeviceList {
    /// Oldest first.
    pub items: Vec<DeviceOut>,
}

#[derive(ApiResponse)]
pub enum ProjectDevicesResponse {
    #[oai(status = 200)]
    Ok(Json<Success<ProjectDeviceList>>),
}

#[derive(ApiResponse)]
pub enum DeleteProjectDeviceResponse {
    /// The device was removed.
    #[oai(status = 200)]
    Ok(Json<Success<DeletedDevice>>),
}

pub struct DevicesAdminApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Admin")]
impl DevicesAdminApi {
    /// List a project's devices
    #[oai(
        path = "/admin/v1/projects/:projectId/devices",
        method = "get",
        operation_id = "adminListDevices"
    )]
    async fn list(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ProjectDevicesResponse> {
        let store = self.state.store.as_ref();
        let directory = Directory::load(store).await?;
        let (organization, project) = directory.project(&project_id.0)?;
        let devices = store
            .list_devices(&project.scope(organization))
            .await
            .map_err(ApiError::from)?;
        Ok(ProjectDevicesResponse::Ok(Json(Success::new(
            ProjectDeviceList {
                items: devices.into_iter().map(Into::into).collect(),
            },
            **request_id,
        ))))
    }

    /// Delete a project's device
    #[oai(
        path = "/admin/v1/projects/:projectId/devices/:deviceId",
        method = "delete",
        operation_id = "adminDeleteDevice"
    )]
    async fn delete(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        /// The device's id.
        #[oai(name = "deviceId")]
        device_id: Path<String>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<DeleteProjectDeviceResponse> {
        let store = self.state.store.as_ref();
        let directory = Directory::load(store).await?;
        let (organization, project) = directory.project(&project_id.0)?;
        let id = parse_id(&device_id.0, "device")?;
        let scope = project.scope(organization);
        let name = store
            .list_devices(&scope)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .find(|d| d.id == id)
            .and_then(|d| d.name);
        if !store
            .delete_device(&scope, id)
            .await
            .map_err(ApiError::from)?
        {
            return Err(ApiError::NotFound("no device with this id".into()).into());
        }
        let about = details(json!({ "project": project.name }));
        admin
            .audit(
                &self.state,
                "device.delete",
                target("device", id, name.as_deref()),
                about,
            )
            .await?;
        Ok(DeleteProjectDeviceResponse::Ok(Json(Success::new(
            DeletedDevice { id, deleted: true },
            **request_id,
        ))))
    }
}

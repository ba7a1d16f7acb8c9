//! `POST /v1/devices`, `GET /v1/devices`, `DELETE /v1/devices/{id}`: the
//! phones a project pushes alerts to.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::store::{ApnsEnvironment, Device, DeviceRegistration};
use poem::web::Data;
use poem_openapi::{
    ApiResponse, Enum, Object, OpenApi, param::Path, payload::Json, types::Example,
};
use uuid::Uuid;

use super::{ApiTags, Success};
use crate::{
    auth::AuthContext, error::ApiError, request_id::RequestId, state::AppState, types::Nullable,
    validation::ValidatedJson,
};

/// Which APNs environment the token belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum Environment {
    Production,
    Sandbox,
}

impl From<Environment> for ApnsEnvironment {
    fn from(e: Environment) -> Self {
        match e {
            Environment::Production => Self::Production,
            Environment::Sandbox => Self::Sandbox,
        }
    }
}

impl From<ApnsEnvironment> for Environment {
    fn from(e: ApnsEnvironment) -> Self {
        match e {
            ApnsEnvironment::Production => Self::Production,
            ApnsEnvironment::Sandbox => Self::Sandbox,
        }
    }
}

/// A device to push alerts to. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields, example)]
pub struct DeviceIn {
    /// The APNs device token, in hex.
    #[oai(validator(min_length = 32, max_length = 200, pattern = "^[0-9a-fA-F]+$"))]
    pub token: String,
    pub environment: Environment,
    /// A label to recognise the device by.
    #[oai(validator(min_length = 1, max_length = 100))]
    pub name: Option<String>,
    /// Only events of these channels are pushed to the device; absent means
    /// every channel. At most 50, each 1 to 100 characters.
    #[oai(validator(max_items = 50, min_length = 1, max_length = 100))]
    pub channels: Option<Vec<String>>,
}

/// The sample body the docs show and their "Test Request" sends: a token
/// of the length APNs gives (32 bytes, 64 hex digits).
impl Example for DeviceIn {
    fn example() -> Self {
        Self {
            token: "a1b2c3d4e5f60718".repeat(4),
            environment: Environment::Sandbox,
            name: Some("On-call iPhone".into()),
            channels: Some(vec!["payments".into()]),
        }
    }
}

/// A registered device.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct DeviceOut {
    pub id: Uuid,
    pub token: String,
    pub environment: Environment,
    pub name: Nullable<String>,
    /// The channels it gets alerts from, or null for every channel.
    pub channels: Nullable<Vec<String>>,
    /// False once APNs reported the token dead; re-registering revives it.
    pub active: bool,
    /// Why the device was deactivated.
    pub deactivated_reason: Nullable<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<Device> for DeviceOut {
    fn from(d: Device) -> Self {
        Self {
            id: d.id,
            token: d.token,
            environment: d.environment.into(),
            name: Nullable(d.name),
            channels: Nullable(d.channels),
            active: d.active,
            deactivated_reason: Nullable(d.deactivated_reason),
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

/// Every device of the project.
#[derive(Debug, Clone, Object)]
pub struct DeviceList {
    pub devices: Vec<DeviceOut>,
}

/// What a deletion removed.
#[derive(Debug, Clone, Object)]
pub struct DeletedDevice {
    pub id: Uuid,
    pub deleted: bool,
}

#[derive(ApiResponse)]
pub enum RegisterResponse {
    /// A new device was registered.
    #[oai(status = 201)]
    Created(Json<Success<DeviceOut>>),
    /// The token was already registered; the device was updated (and reactivated).
    #[oai(status = 200)]
    Updated(Json<Success<DeviceOut>>),
}

#[derive(ApiResponse)]
pub enum ListResponse {
    /// The project's devices, oldest first.
    #[oai(status = 200)]
    Ok(Json<Success<DeviceList>>),
}

#[derive(ApiResponse)]
pub enum DeleteResponse {
    /// The device was removed.
    #[oai(status = 200)]
    Ok(Json<Success<DeletedDevice>>),
}

pub struct DevicesApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Devices")]
impl DevicesApi {
    /// Register a device
    ///
    /// Registering a token the project already has updates that device and
    /// makes it active again.
    #[oai(path = "/v1/devices", method = "post", operation_id = "registerDevice")]
    async fn register(
        &self,
        body: ValidatedJson<DeviceIn>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<RegisterResponse> {
        let input = body.0;
        let registration = DeviceRegistration {
            // Hex is case-insensitive; one spelling keeps one device per token.
            token: input.token.to_ascii_lowercase(),
            environment: input.environment.into(),
            name: input.name,
            channels: input.channels,
        };
        let (device, created) = self
            .state
            .store
            .upsert_device(&auth.scope, &registration, common::time::now())
            .await
            .map_err(ApiError::from)?;
        let body = Json(Success::new(device.into(), **request_id));
        Ok(if created {
            RegisterResponse::Created(body)
        } else {
            RegisterResponse::Updated(body)
        })
    }

    /// List devices
    #[oai(path = "/v1/devices", method = "get", operation_id = "listDevices")]
    async fn list(
        &self,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ListResponse> {
        let devices = self
            .state
            .store
            .list_devices(&auth.scope)
            .await
            .map_err(ApiError::from)?;
        Ok(ListResponse::Ok(Json(Success::new(
            DeviceList {
                devices: devices.into_iter().map(Into::into).collect(),
            },
            **request_id,
        ))))
    }

    /// Remove a device
    #[oai(
        path = "/v1/devices/:id",
        method = "delete",
        operation_id = "deleteDevice"
    )]
    async fn delete(
        &self,
        /// The device's id.
        id: Path<String>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<DeleteResponse> {
        let not_found = || ApiError::NotFound("no device with this id".into());
        let id = Uuid::parse_str(&id.0).map_err(|_| not_found())?;
        if !self
            .state
            .store
            .delete_device(&auth.scope, id)
            .await
            .map_err(ApiError::from)?
        {
            return Err(not_found().into());
        }
        Ok(DeleteResponse::Ok(Json(Success::new(
            DeletedDevice { id, deleted: true },
            **request_id,
        ))))
    }
}

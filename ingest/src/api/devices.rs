//! `POST /v1/devices`, `GET /v1/devices`, `DELETE /v1/devices/{id}`: the
//! phones and browsers a project pushes alerts to.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::store::{ApnsEnvironment, Device, DeviceKind, PushTarget};
use poem::web::Data;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi, param::Path, payload::Json};
use uuid::Uuid;

pub use super::device_in::DeviceIn;
use super::{
    ApiTags, Success,
    device_rules::{BurstRule, DevicePatchIn, QuietHoursOut, RulesOut, not_found},
    priority::EventPriority,
};
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

/// Which push service reaches a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum DeviceKindOut {
    Apns,
    Webpush,
    Fcm,
}

impl From<DeviceKind> for DeviceKindOut {
    fn from(k: DeviceKind) -> Self {
        match k {
            DeviceKind::Apns => Self::Apns,
            DeviceKind::Webpush => Self::Webpush,
            DeviceKind::Fcm => Self::Fcm,
        }
    }
}

/// A registered device.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct DeviceOut {
    pub id: Uuid,
    pub kind: DeviceKindOut,
    /// The APNs or FCM token; null for a Web Push subscription.
    pub token: Nullable<String>,
    /// The APNs environment; null for other kinds.
    pub environment: Nullable<Environment>,
    /// The Web Push subscription's endpoint; null for other kinds. (Its
    /// keys are never shown.)
    pub endpoint: Nullable<String>,
    pub name: Nullable<String>,
    /// The channels it gets alerts from, or null for every channel.
    pub channels: Nullable<Vec<String>>,
    /// It gets only events carrying one of these tags; null for any event.
    pub tags: Nullable<Vec<String>>,
    /// It gets only events of this priority or higher.
    pub min_priority: EventPriority,
    /// When alerts are held for a summary; null for never.
    pub quiet_hours: Nullable<QuietHoursOut>,
    /// How many alerts may come in a window before the rest wait for a
    /// digest; null for no limit.
    pub burst: Nullable<BurstRule>,
    /// False once its push service reported it gone; re-registering
    /// revives it.
    pub active: bool,
    /// Why the device was deactivated.
    pub deactivated_reason: Nullable<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<Device> for DeviceOut {
    fn from(d: Device) -> Self {
        let kind = d.kind().into();
        let (token, environment, endpoint) = match d.target {
            PushTarget::Apns { token, environment } => {
                (Some(token), Some(environment.into()), None)
            }
            PushTarget::WebPush(s) => (None, None, Some(s.endpoint)),
            PushTarget::Fcm { token } => (Some(token), None, None),
        };
        let rules = RulesOut::from(d.rules);
        Self {
            id: d.id,
            kind,
            token: Nullable(token),
            environment: Nullable(environment),
            endpoint: Nullable(endpoint),
            name: Nullable(d.name),
            channels: rules.channels,
            tags: rules.tags,
            min_priority: rules.min_priority,
            quiet_hours: rules.quiet_hours,
            burst: rules.burst,
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
    /// The token or subscription was already registered; the device was
    /// updated (and reactivated).
    #[oai(status = 200)]
    Updated(Json<Success<DeviceOut>>),
}

/// The key browsers subscribe with.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct WebPushKey {
    /// The VAPID public key (uncompressed P-256 point, base64url): the
    /// `applicationServerKey` of `pushManager.subscribe`.
    pub public_key: String,
}

#[derive(ApiResponse)]
pub enum WebPushKeyResponse {
    /// Web Push is configured: subscribe with this key.
    #[oai(status = 200)]
    Ok(Json<Success<WebPushKey>>),
}

#[derive(ApiResponse)]
pub enum ListResponse {
    /// The project's devices, oldest first.
    #[oai(status = 200)]
    Ok(Json<Success<DeviceList>>),
}

#[derive(ApiResponse)]
pub enum UpdateResponse {
    /// The device as it stands now.
    #[oai(status = 200)]
    Ok(Json<Success<DeviceOut>>),
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
    /// An APNs token (`kind` `apns`, the default), a browser's Web Push
    /// subscription (`webpush`, as `PushSubscription.toJSON()` gives it) or
    /// an FCM token (`fcm`). Registering a token or subscription the
    /// project already has updates that device and makes it active again.
    /// A subscription's endpoint must be https on a public address.
    #[oai(path = "/v1/devices", method = "post", operation_id = "registerDevice")]
    async fn register(
        &self,
        body: ValidatedJson<DeviceIn>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<RegisterResponse> {
        let registration = body.0.registration(&self.state.endpoint_policy).await?;
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

    /// The Web Push key
    ///
    /// The VAPID public key a web page subscribes with. Needs no API key.
    /// 404 when this server has no VAPID key (Web Push is not configured).
    #[oai(
        path = "/v1/webpush/key",
        method = "get",
        operation_id = "getWebPushKey"
    )]
    async fn webpush_key(&self, request_id: Data<&RequestId>) -> poem::Result<WebPushKeyResponse> {
        let public_key = self.state.config.vapid_public_key.clone().ok_or_else(|| {
            ApiError::NotFound(
                "Web Push is not configured on this server (no VAPID key: see \
                 NOTIFIER_VAPID_PRIVATE_KEY)"
                    .into(),
            )
        })?;
        Ok(WebPushKeyResponse::Ok(Json(Success::new(
            WebPushKey { public_key },
            **request_id,
        ))))
    }

    /// Change a device's rules
    ///
    /// Changes its name, channels, tags, minimum priority, quiet hours or
    /// burst limit. A field left out is left as it is; `null` clears it.
    /// A key reaches only its own project's devices.
    #[oai(
        path = "/v1/devices/:id",
        method = "patch",
        operation_id = "updateDevice"
    )]
    async fn update(
        &self,
        /// The device's id.
        id: Path<String>,
        body: ValidatedJson<DevicePatchIn>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<UpdateResponse> {
        let id = Uuid::parse_str(&id.0).map_err(|_| not_found())?;
        let patch = body.0.parse()?;
        let device = self
            .state
            .store
            .update_device(&auth.scope, id, &patch, common::time::now())
            .await
            .map_err(ApiError::from)?
            .ok_or_else(not_found)?;
        Ok(UpdateResponse::Ok(Json(Success::new(
            device.into(),
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

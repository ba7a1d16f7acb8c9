//! `POST /v1/devices`, `GET /v1/devices`, `DELETE /v1/devices/{id}`: the
//! phones and browsers a project pushes alerts to.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::{
    endpoint::EndpointPolicy,
    store::{
        ApnsEnvironment, Device, DeviceKind, DeviceRegistration, PushTarget, WebPushSubscription,
    },
};
use poem::web::Data;
use poem_openapi::{
    ApiResponse, Enum, Object, OpenApi, Union, param::Path, payload::Json, types::Example,
};
use uuid::Uuid;

use super::{ApiTags, Success};
use crate::{
    auth::AuthContext,
    error::{ApiError, FieldError},
    request_id::RequestId,
    state::AppState,
    types::Nullable,
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

/// `"apns"`: an iPhone app's APNs device token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum ApnsKind {
    Apns,
}

/// `"webpush"`: a browser's Web Push subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum WebPushKind {
    Webpush,
}

/// `"fcm"`: a Firebase Cloud Messaging registration token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum FcmKind {
    Fcm,
}

/// An iPhone to push alerts to through APNs. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields, example)]
pub struct ApnsDeviceIn {
    /// `apns`, the default when absent.
    pub kind: Option<ApnsKind>,
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
impl Example for ApnsDeviceIn {
    fn example() -> Self {
        Self {
            kind: Some(ApnsKind::Apns),
            token: "a1b2c3d4e5f60718".repeat(4),
            environment: Environment::Sandbox,
            name: Some("On-call iPhone".into()),
            channels: Some(vec!["payments".into()]),
        }
    }
}

/// The keys of a Web Push subscription.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields)]
pub struct WebPushKeys {
    /// The browser's P-256 public key, base64url.
    #[oai(validator(min_length = 80, max_length = 100, pattern = "^[A-Za-z0-9_-]+={0,2}$"))]
    pub p256dh: String,
    /// The browser's 16-byte authentication secret, base64url.
    #[oai(validator(min_length = 16, max_length = 32, pattern = "^[A-Za-z0-9_-]+={0,2}$"))]
    pub auth: String,
}

/// A browser's push subscription, exactly as `PushSubscription.toJSON()`
/// gives it.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebPushSubscriptionIn {
    /// The push service's URL for this subscription: https, on a public
    /// address.
    #[oai(validator(min_length = 1, max_length = 2048))]
    pub endpoint: String,
    /// When the subscription expires (milliseconds since the epoch), if the
    /// browser says; accepted and not used.
    pub expiration_time: Option<Nullable<f64>>,
    pub keys: WebPushKeys,
}

/// A browser to push alerts to through Web Push. Unknown fields are
/// rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields)]
pub struct WebPushDeviceIn {
    pub kind: WebPushKind,
    pub subscription: WebPushSubscriptionIn,
    /// A label to recognise the device by.
    #[oai(validator(min_length = 1, max_length = 100))]
    pub name: Option<String>,
    /// Only events of these channels are pushed to the device; absent means
    /// every channel. At most 50, each 1 to 100 characters.
    #[oai(validator(max_items = 50, min_length = 1, max_length = 100))]
    pub channels: Option<Vec<String>>,
}

/// An Android phone (or any FCM client) to push alerts to through Firebase
/// Cloud Messaging. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(deny_unknown_fields)]
pub struct FcmDeviceIn {
    pub kind: FcmKind,
    /// The FCM registration token.
    #[oai(validator(min_length = 1, max_length = 4096))]
    pub token: String,
    /// A label to recognise the device by.
    #[oai(validator(min_length = 1, max_length = 100))]
    pub name: Option<String>,
    /// Only events of these channels are pushed to the device; absent means
    /// every channel. At most 50, each 1 to 100 characters.
    #[oai(validator(max_items = 50, min_length = 1, max_length = 100))]
    pub channels: Option<Vec<String>>,
}

/// A device to push alerts to, by `kind`: `apns` (the default), `webpush`
/// or `fcm`.
#[derive(Debug, Clone, Union)]
#[oai(one_of)]
pub enum DeviceIn {
    Apns(ApnsDeviceIn),
    WebPush(WebPushDeviceIn),
    Fcm(FcmDeviceIn),
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
        Self {
            id: d.id,
            kind,
            token: Nullable(token),
            environment: Nullable(environment),
            endpoint: Nullable(endpoint),
            name: Nullable(d.name),
            channels: Nullable(d.channels),
            active: d.active,
            deactivated_reason: Nullable(d.deactivated_reason),
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

impl DeviceIn {
    /// What to store, once the endpoint of a subscription passed the
    /// policy (a refusal is reported at its field).
    async fn registration(self, policy: &EndpointPolicy) -> Result<DeviceRegistration, ApiError> {
        Ok(match self {
            Self::Apns(d) => DeviceRegistration {
                target: PushTarget::Apns {
                    // Hex is case-insensitive; one spelling keeps one device per token.
                    token: d.token.to_ascii_lowercase(),
                    environment: d.environment.into(),
                },
                name: d.name,
                channels: d.channels,
            },
            Self::WebPush(d) => {
                let endpoint = d.subscription.endpoint;
                policy.check(&endpoint).await.map_err(|refusal| {
                    ApiError::Validation(vec![FieldError::new(
                        vec!["subscription".into(), "endpoint".into()],
                        refusal.to_string(),
                    )])
                })?;
                DeviceRegistration {
                    target: PushTarget::WebPush(WebPushSubscription {
                        endpoint,
                        p256dh: d.subscription.keys.p256dh,
                        auth: d.subscription.keys.auth,
                    }),
                    name: d.name,
                    channels: d.channels,
                }
            }
            Self::Fcm(d) => DeviceRegistration {
                target: PushTarget::Fcm { token: d.token },
                name: d.name,
                channels: d.channels,
            },
        })
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

//! `GET /healthz` (the process is up) and `GET /readyz` (the store answers).

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::{ApiResponse, Object, OpenApi, payload::Json};

use super::{ApiTags, Success};
use crate::{error::ApiError, request_id::RequestId, state::AppState};

#[derive(Debug, Clone, Object)]
pub struct HealthOut {
    /// `ok` when the check passed.
    pub status: String,
}

#[derive(ApiResponse)]
pub enum HealthResponse {
    /// The check passed.
    #[oai(status = 200)]
    Ok(Json<Success<HealthOut>>),
}

pub struct HealthApi {
    pub state: Arc<AppState>,
}

fn ok(request_id: RequestId) -> HealthResponse {
    HealthResponse::Ok(Json(Success::new(
        HealthOut {
            status: "ok".into(),
        },
        request_id,
    )))
}

#[OpenApi(tag = "ApiTags::Health")]
impl HealthApi {
    /// Liveness: the process is up
    #[oai(path = "/healthz", method = "get", operation_id = "healthz")]
    async fn healthz(&self, request_id: Data<&RequestId>) -> HealthResponse {
        ok(**request_id)
    }

    /// Readiness: the store answers
    ///
    /// 503 while the store cannot be reached within the configured deadline.
    #[oai(path = "/readyz", method = "get", operation_id = "readyz")]
    async fn readyz(&self, request_id: Data<&RequestId>) -> poem::Result<HealthResponse> {
        self.state.store.ping().await.map_err(ApiError::from)?;
        Ok(ok(**request_id))
    }
}

//! `GET /admin/v1/me`: the admin whose token this is (the dashboard checks
//! a pasted token with it).

use chrono::{DateTime, Utc};
use poem::web::Data;
use poem_openapi::{ApiResponse, Object, OpenApi, payload::Json};
use uuid::Uuid;

use super::AdminContext;
use crate::{
    api::{ApiTags, Success},
    request_id::RequestId,
};

/// An operator holding an admin token.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdminOut {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

#[derive(ApiResponse)]
pub enum MeResponse {
    /// The admin the token belongs to.
    #[oai(status = 200)]
    Ok(Json<Success<AdminOut>>),
}

pub struct SessionApi;

#[OpenApi(tag = "ApiTags::Admin")]
impl SessionApi {
    /// Who am I
    ///
    /// The admin whose token authenticates the request.
    #[oai(path = "/admin/v1/me", method = "get", operation_id = "adminMe")]
    async fn me(
        &self,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<MeResponse> {
        let a = &admin.admin;
        Ok(MeResponse::Ok(Json(Success::new(
            AdminOut {
                id: a.id,
                name: a.name.clone(),
                created_at: a.created_at,
            },
            **request_id,
        ))))
    }
}

//! `GET /v1/channels`: the project's channels and how busy each is.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::store::ChannelStats;
use poem::web::Data;
use poem_openapi::{ApiResponse, Object, OpenApi, payload::Json};

use super::{ApiTags, Success};
use crate::{
    auth::AuthContext, error::ApiError, request_id::RequestId, state::AppState, types::Nullable,
};

/// A channel and its events.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ChannelOut {
    pub name: String,
    /// How many events the channel holds.
    pub event_count: u64,
    /// When its latest event was recorded; null when it holds none.
    pub last_event_at: Nullable<DateTime<Utc>>,
}

impl From<ChannelStats> for ChannelOut {
    fn from(c: ChannelStats) -> Self {
        Self {
            name: c.name,
            event_count: c.event_count,
            last_event_at: Nullable(c.last_event_at),
        }
    }
}

/// Every channel of the project.
#[derive(Debug, Clone, Object)]
pub struct ChannelList {
    /// Most recently active first.
    pub items: Vec<ChannelOut>,
}

#[derive(ApiResponse)]
pub enum ListChannelsResponse {
    /// The project's channels.
    #[oai(status = 200)]
    Ok(Json<Success<ChannelList>>),
}

pub struct ChannelsApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Events")]
impl ChannelsApi {
    /// List channels
    ///
    /// Every channel of the project with its event count and latest event,
    /// most recently active first.
    #[oai(path = "/v1/channels", method = "get", operation_id = "listChannels")]
    async fn list(
        &self,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ListChannelsResponse> {
        let channels = self
            .state
            .store
            .channel_stats(&auth.scope)
            .await
            .map_err(ApiError::from)?;
        Ok(ListChannelsResponse::Ok(Json(Success::new(
            ChannelList {
                items: channels.into_iter().map(Into::into).collect(),
            },
            **request_id,
        ))))
    }
}

//! `GET /v1/stats/events`: how many events were recorded per hour or day,
//! for the feed page's chart.

use std::{collections::HashMap, sync::Arc};

use chrono::{DateTime, Duration, Utc};
use common::store::Bucket;
use poem::web::Data;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi, param::Query, payload::Json};

use super::{ApiTags, Success, listing::query_fault};
use crate::{
    auth::AuthContext, error::ApiError, request_id::RequestId, state::AppState, types::Nullable,
};

/// The most buckets one answer holds.
pub const MAX_BUCKETS: i64 = 1000;

/// How wide each bucket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum BucketIn {
    /// UTC hours.
    Hour,
    /// UTC days.
    Day,
}

impl From<BucketIn> for Bucket {
    fn from(b: BucketIn) -> Self {
        match b {
            BucketIn::Hour => Self::Hour,
            BucketIn::Day => Self::Day,
        }
    }
}

/// The events of one bucket.
#[derive(Debug, Clone, Object)]
pub struct BucketOut {
    /// Where the bucket starts: a whole UTC hour or day.
    pub start: DateTime<Utc>,
    /// Events recorded from `start` to the next bucket's start.
    pub count: u64,
}

/// Events per bucket, oldest first, empty buckets included.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct EventStats {
    /// At most 1000.
    pub buckets: Vec<BucketOut>,
    /// Where the rest of a range of more than 1000 buckets begins: ask
    /// again with this as `since` (and the same `until` and `bucket`). Null
    /// once the answer reaches the end of the range.
    pub next_since: Nullable<DateTime<Utc>>,
}

#[derive(ApiResponse)]
pub enum EventStatsResponse {
    /// Event counts per bucket.
    #[oai(status = 200)]
    Ok(Json<Success<EventStats>>),
}

/// Buckets in the default range: a day of hours, 30 days.
fn default_buckets(bucket: Bucket) -> i32 {
    match bucket {
        Bucket::Hour => 24,
        Bucket::Day => 30,
    }
}

pub struct StatsApi {
    pub state: Arc<AppState>,
}

#[OpenApi(tag = "ApiTags::Events")]
impl StatsApi {
    /// Count events over time
    ///
    /// How many events (of one channel, or all) were recorded in each hour
    /// or day of a range: by default the last 24 hours, or the last 30 days
    /// by day. An answer holds at most 1000 buckets: a longer range comes a
    /// page at a time, each naming where the next begins (`nextSince`).
    #[oai(path = "/v1/stats/events", method = "get", operation_id = "eventStats")]
    async fn events(
        &self,
        /// Only events of this channel.
        #[oai(validator(min_length = 1, max_length = 100))]
        channel: Query<Option<String>>,
        /// Start of the range (RFC 3339), rounded down to its bucket's
        /// start; by default 24 hourly or 30 daily buckets before `until`.
        since: Query<Option<DateTime<Utc>>>,
        /// End of the range (RFC 3339, exclusive); now when absent.
        until: Query<Option<DateTime<Utc>>>,
        /// Bucket width; `hour` when absent.
        bucket: Query<Option<BucketIn>>,
        auth: Data<&AuthContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<EventStatsResponse> {
        let bucket = Bucket::from(bucket.0.unwrap_or(BucketIn::Hour));
        let width = Duration::seconds(bucket.seconds());
        let until = until.0.unwrap_or_else(common::time::now);
        // The newest bucket holds the last instant before `until`; the
        // oldest holds `since`, or is as many buckets back as the default
        // span has.
        let out_of_range = || query_fault("until", "is too far from today to count events");
        let last = bucket.floor(
            until
                .checked_sub_signed(Duration::milliseconds(1))
                .ok_or_else(out_of_range)?,
        );
        let first = match since.0 {
            Some(since) => bucket.floor(since),
            None => last
                .checked_sub_signed(width * (default_buckets(bucket) - 1))
                .ok_or_else(out_of_range)?,
        };
        // A range that ends before it starts holds no bucket; one of more
        // than a page is answered a page at a time, from its start.
        let count = ((last - first).num_seconds() / bucket.seconds() + 1).max(0);
        let page = count.min(MAX_BUCKETS);
        let page_end = first + width * i32::try_from(page).unwrap_or(0);
        let (end, next_since) = if count > page {
            (page_end, Some(page_end))
        } else {
            (until, None)
        };
        let counted: HashMap<_, _> = self
            .state
            .store
            .count_events_per_bucket(&auth.scope, channel.0.as_deref(), first, end, bucket)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .collect();
        let buckets = (0..page)
            .map(|i| {
                let start = first + width * i32::try_from(i).unwrap_or(0);
                BucketOut {
                    start,
                    count: counted.get(&start).copied().unwrap_or(0),
                }
            })
            .collect();
        Ok(EventStatsResponse::Ok(Json(Success::new(
            EventStats {
                buckets,
                next_since: Nullable(next_since),
            },
            **request_id,
        ))))
    }
}

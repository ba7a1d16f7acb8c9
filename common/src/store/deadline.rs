//! A store layer that puts a deadline on every call, so a store that
//! stops answering turns into a prompt `Unavailable` error (503) instead of
//! requests that hang.

use std::{future::Future, time::Duration};

use super::{StoreError, StoreResult, layer::Layer};

/// Every call fails with [`StoreError::Unavailable`] once `limit` has passed.
pub(super) struct Deadline {
    limit: Duration,
}

impl Deadline {
    pub(super) fn new(limit: Duration) -> Self {
        Self { limit }
    }
}

impl Layer for Deadline {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        _method: &'static str,
        call: impl Future<Output = StoreResult<T>> + Send + 'a,
    ) -> StoreResult<T> {
        match tokio::time::timeout(self.limit, call).await {
            Ok(result) => result,
            Err(elapsed) => Err(StoreError::Unavailable(
                anyhow::Error::new(elapsed)
                    .context(format!("no answer within {} ms", self.limit.as_millis())),
            )),
        }
    }
}

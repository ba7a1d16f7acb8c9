//! What a test reads back from a store to check what was recorded, through
//! the store's read side (the product has no "count the events" or "list
//! the channels" method: nothing but tests needs one).

use async_trait::async_trait;
use common::store::{EventFilter, Scope, Store, StoreResult};

/// Events read back page by page, as the API lists them.
const PAGE: u32 = 500;

/// Reading back what a scope holds.
#[async_trait]
pub trait StoredEvents {
    /// How many events the scope holds: every one the listing returns.
    async fn events_stored(&self, scope: &Scope) -> StoreResult<u64>;
    /// The names of the scope's channels, by name.
    async fn channel_names(&self, scope: &Scope) -> StoreResult<Vec<String>>;
}

#[async_trait]
impl<S: Store + ?Sized> StoredEvents for S {
    async fn events_stored(&self, scope: &Scope) -> StoreResult<u64> {
        let (mut count, mut before) = (0, None);
        loop {
            let page = self
                .list_events(scope, &EventFilter::default(), before, PAGE)
                .await?;
            count += page.len() as u64;
            match page.last() {
                Some(last) if page.len() == PAGE as usize => before = Some(last.position()),
                _ => return Ok(count),
            }
        }
    }

    async fn channel_names(&self, scope: &Scope) -> StoreResult<Vec<String>> {
        let mut names: Vec<String> = self
            .channel_stats(scope)
            .await?
            .into_iter()
            .map(|c| c.name)
            .collect();
        names.sort();
        Ok(names)
    }
}

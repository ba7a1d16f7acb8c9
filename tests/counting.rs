//! A store layer for tests that counts the calls of some of the store's
//! methods, around the real store (`TestApp::spawn_wrapped`).

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use common::store::{StoreResult, layer::Layer};

/// Counts the calls of `methods`, named as in `Store`.
pub struct CountCalls {
    methods: &'static [&'static str],
    count: Arc<AtomicUsize>,
}

impl CountCalls {
    /// The layer, and the count it keeps.
    pub fn of(methods: &'static [&'static str]) -> (Self, Arc<AtomicUsize>) {
        let count = Arc::new(AtomicUsize::new(0));
        let layer = Self {
            methods,
            count: Arc::clone(&count),
        };
        (layer, count)
    }
}

impl Layer for CountCalls {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        method: &'static str,
        call: impl Future<Output = StoreResult<T>> + Send + 'a,
    ) -> StoreResult<T> {
        if self.methods.contains(&method) {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
        call.await
    }
}

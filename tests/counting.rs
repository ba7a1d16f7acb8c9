//! A store observer for tests that counts the calls of some of the store's
//! methods, installed on the real store (`TestApp::spawn_wrapped`).

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use common::store::{Store, StoreObserver};

/// Counts the calls of `methods`, named as in the store's traits.
pub struct CountCalls {
    methods: &'static [&'static str],
    count: Arc<AtomicUsize>,
}

impl CountCalls {
    /// The observer, and the count it keeps.
    pub fn of(methods: &'static [&'static str]) -> (Self, Arc<AtomicUsize>) {
        let count = Arc::new(AtomicUsize::new(0));
        let observer = Self {
            methods,
            count: Arc::clone(&count),
        };
        (observer, count)
    }

    /// Installs the observer on `store` and returns the store, as
    /// `TestApp::spawn_wrapped` takes it.
    pub fn on(self, store: Arc<dyn Store>) -> Arc<dyn Store> {
        assert!(store.observe(Arc::new(self)), "the store had an observer");
        store
    }
}

impl StoreObserver for CountCalls {
    fn called(&self, method: &'static str) {
        if self.methods.contains(&method) {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }
}

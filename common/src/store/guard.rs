//! What every store call passes through, whichever the backend: a deadline,
//! so a store that stops answering turns into a prompt `Unavailable` error
//! (503) instead of requests that hang, and an optional observer told the
//! name of each method called.
//!
//! The backends apply it where they wait on their database, once per call:
//! the SQLite store in `SqliteStore::run` and its group-commit `write` (every
//! trip to the connection's thread), the MongoDB store around the body of
//! each method (the driver is awaited in many places, cursors included).

use std::{
    future::Future,
    sync::{Arc, OnceLock},
    time::Duration,
};

use super::{StoreError, StoreResult};

/// Told the name of every store method called (as written in the store's
/// traits), as the call begins: the SQLite store at its one trip to the
/// connection, the MongoDB store as the method's body starts. A MongoDB
/// method that calls another of the store's (a rotation reads the key
/// first) tells both.
pub trait StoreObserver: Send + Sync + 'static {
    fn called(&self, method: &'static str);
}

/// Runs `call`, or fails with [`StoreError::Unavailable`] once `limit` has
/// passed (`call` is then dropped: what it had sent may still commit).
pub async fn within<T>(
    limit: Duration,
    call: impl Future<Output = StoreResult<T>>,
) -> StoreResult<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(elapsed) => Err(StoreError::Unavailable(
            anyhow::Error::new(elapsed)
                .context(format!("no answer within {} ms", limit.as_millis())),
        )),
    }
}

/// A backend's deadline (none for a store a test or a tool opened without
/// one) and its observer, if it was given one.
pub(super) struct Guard {
    limit: Option<Duration>,
    observer: OnceLock<Arc<dyn StoreObserver>>,
}

impl Guard {
    pub(super) fn new(limit: Option<Duration>) -> Self {
        Self {
            limit,
            observer: OnceLock::new(),
        }
    }

    /// Gives the store its observer; false when it already has one.
    pub(super) fn observe(&self, observer: Arc<dyn StoreObserver>) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// Runs `call`, a call (or a trip) of the store method `method`, within
    /// the deadline, telling the observer first.
    pub(super) async fn call<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        if let Some(observer) = self.observer.get() {
            observer.called(method);
        }
        match self.limit {
            Some(limit) => within(limit, call).await,
            None => call.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_that_never_answers_is_unavailable_at_the_deadline() {
        let limit = Duration::from_millis(50);
        let started = std::time::Instant::now();
        let stuck = within(limit, std::future::pending::<StoreResult<()>>()).await;
        let Err(StoreError::Unavailable(cause)) = stuck else {
            panic!("not unavailable: {stuck:?}");
        };
        assert!(
            cause.to_string().contains("no answer within 50 ms"),
            "{cause}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "answered, not hung"
        );
    }

    #[tokio::test]
    async fn a_call_within_the_deadline_keeps_its_answer_and_is_observed_by_name() {
        struct Names(std::sync::Mutex<Vec<&'static str>>);
        impl StoreObserver for Names {
            fn called(&self, method: &'static str) {
                self.0.lock().expect("names").push(method);
            }
        }
        let guard = Guard::new(Some(Duration::from_secs(5)));
        let names = Arc::new(Names(Default::default()));
        assert!(guard.observe(Arc::clone(&names) as Arc<dyn StoreObserver>));
        assert!(!guard.observe(Arc::clone(&names) as Arc<dyn StoreObserver>));
        let answer = guard.call("get_event", async { Ok(7) }).await;
        assert_eq!(answer.expect("answered"), 7);
        let failed = guard
            .call("list_devices", async {
                Err::<(), _>(StoreError::unavailable("down"))
            })
            .await;
        assert!(matches!(failed, Err(StoreError::Unavailable(_))));
        assert_eq!(
            *names.0.lock().expect("names"),
            ["get_event", "list_devices"]
        );
    }
}

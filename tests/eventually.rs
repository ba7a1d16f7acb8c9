//! Waiting for something that holds eventually (an event settles, a log
//! line appears, a server recovers): one polling loop for every test, so a
//! test states what it waits for, and a timeout reports what was last seen
//! rather than only that time ran out.

use std::{fmt::Display, time::Duration};

use tokio::time::{Instant, sleep};

/// The first pause between two looks: short, as most conditions hold
/// within milliseconds.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The pause grows up to this, so a slow wait does not flood a slow server
/// (the MongoDB-compatible one answers hundreds of requests a second).
const LONGEST_PAUSE: Duration = Duration::from_millis(100);

/// What one look at a condition saw: the value waited for, or what stands
/// in its way (reported if time runs out).
pub trait Observation {
    type Value;
    fn into_result(self) -> Result<Self::Value, String>;
}

impl<T> Observation for Option<T> {
    type Value = T;
    fn into_result(self) -> Result<T, String> {
        self.ok_or_else(|| "nothing yet".to_owned())
    }
}

impl<T, E: Display> Observation for Result<T, E> {
    type Value = T;
    fn into_result(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// Calls `check` until it returns `Some` or `Ok`, and returns what it held.
/// Past `timeout` it fails the test, naming `what` was waited for and the
/// last `Err` seen. `check` may panic itself when waiting is pointless (the
/// process it watches has exited).
pub async fn eventually<R: Observation>(
    timeout: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> R,
) -> R::Value {
    let deadline = Instant::now() + timeout;
    let mut pause = FIRST_PAUSE;
    loop {
        let last = match check().await.into_result() {
            Ok(value) => return value,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "waited {timeout:?} for {what}; last seen: {last}"
        );
        sleep(pause).await;
        pause = (pause * 3 / 2).min(LONGEST_PAUSE);
    }
}

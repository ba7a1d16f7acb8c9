//! The one stand-in the tests use: a push provider that records every push
//! instead of calling Apple, and answers from a script per device token.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
};

use async_trait::async_trait;
use notifier::push::{Push, PushOutcome, PushProvider};

/// Records pushes; answers `Delivered` unless a script says otherwise.
#[derive(Default)]
pub struct RecordingProvider {
    sent: Mutex<Vec<(Push, PushOutcome)>>,
    scripts: Mutex<HashMap<String, VecDeque<PushOutcome>>>,
}

impl RecordingProvider {
    /// The next answers for `token`, in order; after them, `Delivered`.
    pub fn script(&self, token: &str, outcomes: Vec<PushOutcome>) {
        self.scripts
            .lock()
            .expect("lock")
            .insert(token.to_owned(), outcomes.into());
    }

    /// Every push tried so far, with the answer given.
    pub fn sent(&self) -> Vec<(Push, PushOutcome)> {
        self.sent.lock().expect("lock").clone()
    }

    /// Pushes that were delivered, by device token.
    pub fn delivered_to(&self, token: &str) -> Vec<Push> {
        self.sent()
            .into_iter()
            .filter(|(p, o)| p.address() == token && matches!(o, PushOutcome::Delivered { .. }))
            .map(|(p, _)| p)
            .collect()
    }
}

#[async_trait]
impl PushProvider for RecordingProvider {
    fn name(&self) -> &'static str {
        "recording"
    }

    async fn send(&self, push: &Push) -> PushOutcome {
        let scripted = self
            .scripts
            .lock()
            .expect("lock")
            .get_mut(push.address())
            .and_then(VecDeque::pop_front);
        let outcome = scripted.unwrap_or(PushOutcome::Delivered {
            apns_id: Some(uuid::Uuid::new_v4().to_string()),
        });
        self.sent
            .lock()
            .expect("lock")
            .push((push.clone(), outcome.clone()));
        outcome
    }
}

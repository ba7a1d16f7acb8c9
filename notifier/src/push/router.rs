//! One provider per device kind: the push of each device goes to the
//! provider of its kind, so APNs, Web Push and FCM sit side by side
//! behind the one [`PushProvider`] the deliverer holds, with the same
//! claims, retries, dead-letter queue and metrics.

use std::sync::Arc;

use async_trait::async_trait;

use super::{DeviceKind, Push, PushOutcome, PushProvider};

/// Sends each push through the provider configured for its device's kind.
pub struct Router {
    pub apns: Arc<dyn PushProvider>,
    pub webpush: Arc<dyn PushProvider>,
    pub fcm: Arc<dyn PushProvider>,
}

impl Router {
    fn pick(&self, push: &Push) -> &dyn PushProvider {
        match push.target.kind() {
            DeviceKind::Apns => self.apns.as_ref(),
            DeviceKind::Webpush => self.webpush.as_ref(),
            DeviceKind::Fcm => self.fcm.as_ref(),
        }
    }
}

#[async_trait]
impl PushProvider for Router {
    fn name(&self) -> &'static str {
        "router"
    }

    fn provider_for(&self, push: &Push) -> &'static str {
        self.pick(push).provider_for(push)
    }

    async fn send(&self, push: &Push) -> PushOutcome {
        self.pick(push).send(push).await
    }
}

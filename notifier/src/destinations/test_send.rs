//! The admin API's "send test", through the same senders alerts go
//! through ([`common::embedded::DestinationTester`]).

use async_trait::async_trait;
use common::{
    destination::Settings,
    embedded::{DestinationTester, TestSent},
    store::Destination,
};

use super::{Message, Senders};
use crate::push::PushOutcome;

#[async_trait]
impl DestinationTester for Senders {
    async fn send_test(
        &self,
        destination: &Destination,
        settings: &Settings,
        project: &str,
    ) -> TestSent {
        let message = Message::test(
            destination.id,
            &destination.name,
            project,
            common::time::now(),
        );
        match self.send(destination.id, settings, &message).await {
            PushOutcome::Delivered { .. } => TestSent::Delivered,
            PushOutcome::Retry { reason, .. } => TestSent::Retryable(reason),
            PushOutcome::Rejected { reason } => TestSent::Rejected(reason),
            PushOutcome::DeviceGone { reason } => TestSent::Gone(reason),
        }
    }
}

//! The push provider used for a device kind whose credentials are not
//! configured (APNs keys, a VAPID key, an FCM account): it logs that a push
//! would have gone out, so a first run without them still shows the whole
//! path working end to end, and the delivery says `log`, not the provider.

use async_trait::async_trait;

use super::{Push, PushOutcome, PushProvider};

/// Logs each push instead of sending it, and reports it delivered.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoggingProvider;

#[async_trait]
impl PushProvider for LoggingProvider {
    fn name(&self) -> &'static str {
        "log"
    }

    async fn send(&self, push: &Push) -> PushOutcome {
        // The device token is a credential for pushing to that phone; it
        // stays out of the log.
        // The event's id and requestId come from the job's span; a
        // summary's job has no event, so its line names the summary.
        let summary = push.alert.summary.then(|| push.alert.event_id.to_string());
        tracing::info!(
            deviceId = %push.device_id,
            summaryId = summary.as_deref(),
            channel = %push.alert.channel,
            title = %push.alert.title,
            kind = push.target.kind().as_str(),
            "no credentials configured for this kind of device: push logged, not sent"
        );
        PushOutcome::Delivered { apns_id: None }
    }
}

/// A tracing subscriber that keeps, as text, every span and event it is given,
/// so tests can assert on what would reach a log (shared with the APNs tests).
#[cfg(test)]
pub(crate) mod capture {
    use std::fmt::{self, Write as _};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    #[derive(Clone, Default)]
    pub(crate) struct Capture {
        text: Arc<Mutex<String>>,
        next_id: Arc<AtomicU64>,
    }

    impl Capture {
        /// Everything recorded so far, one line per span, record or event.
        pub(crate) fn text(&self) -> String {
            self.text
                .lock()
                .map(|text| text.clone())
                .unwrap_or_default()
        }

        fn push(&self, line: Line) {
            if let Ok(mut text) = self.text.lock() {
                text.push_str(&line.0);
                text.push('\n');
            }
        }
    }

    struct Line(String);

    impl Visit for Line {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }

        fn new_span(&self, span: &Attributes<'_>) -> Id {
            let meta = span.metadata();
            let mut line = Line(format!("span {}::{}", meta.target(), meta.name()));
            span.record(&mut line);
            self.push(line);
            Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
        }

        fn record(&self, _: &Id, values: &Record<'_>) {
            let mut line = Line("record".into());
            values.record(&mut line);
            self.push(line);
        }

        fn record_follows_from(&self, _: &Id, _: &Id) {}

        fn event(&self, event: &Event<'_>) {
            let mut line = Line(format!("event {}", event.metadata().target()));
            event.record(&mut line);
            self.push(line);
        }

        fn enter(&self, _: &Id) {}

        fn exit(&self, _: &Id) {}
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::capture::Capture;
    use super::*;
    use crate::push::{Alert, ApnsEnvironment};

    const DEVICE_TOKEN: &str = "5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee00";

    fn push() -> Push {
        Push {
            device_id: Uuid::nil(),
            target: crate::push::PushTarget::Apns {
                token: DEVICE_TOKEN.into(),
                environment: ApnsEnvironment::Sandbox,
            },
            alert: Alert {
                title: "💸 Payment failed".into(),
                body: Some("Card declined for order 1234".into()),
                icon: Some("💸".into()),
                channel: "payments".into(),
                event_id: Uuid::from_u128(0x0195_1234_5678_7abc_8def_0123_4567_89ab),
                priority: Default::default(),
                alert_key: None,
                collapse_id: Uuid::nil().to_string(),
                summary: false,
                url: None,
            },
        }
    }

    #[test]
    fn names_itself_log() {
        assert_eq!(LoggingProvider.name(), "log");
    }

    #[tokio::test]
    async fn reports_the_push_delivered_without_an_apns_id() {
        let outcome = LoggingProvider.send(&push()).await;
        assert_eq!(outcome, PushOutcome::Delivered { apns_id: None });
    }

    #[tokio::test]
    async fn logs_channel_and_title_but_never_the_device_token() {
        let capture = Capture::default();
        let push = push();
        {
            let _guard = tracing::subscriber::set_default(capture.clone());
            LoggingProvider.send(&push).await;
        }
        let logged = capture.text();
        assert!(logged.contains("channel=payments"), "{logged}");
        assert!(logged.contains("kind=\"apns\""), "{logged}");
        assert!(logged.contains("title=💸 Payment failed"), "{logged}");
        assert!(!logged.contains(DEVICE_TOKEN), "{logged}");
    }
}

//! What the APNs tests share: a throwaway P-256 key and a valid config built
//! on it, a device token, an alert, a fixed clock, and predicates on the
//! outcome's kind.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::Uuid;

use super::ApnsConfig;
use crate::push::{Alert, PushOutcome};

// A P-256 key made for these tests with `openssl genpkey`; it belongs to
// no Apple account.
pub(super) const TEST_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQggX3h7Rsc6/xB0oa4
2KZc5KXbEWmm8NRsksHS12U5MyihRANCAAQbSS83mR5/bnQpzdh0Cp/jL2lO1DAh
iCUGCyC7WNF+6y9B/N3rGgXHACxb6JKelbOmTQS2p48Bt4gmC3otdc/4
-----END PRIVATE KEY-----";
// A valid PEM private key of the wrong kind (Ed25519, not P-256).
pub(super) const ED25519_KEY: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIEDJRwcry9am2GwC5EjDYwFi1cRVjjjsZ9c4DfqHytAT
-----END PRIVATE KEY-----";
pub(super) const DEVICE_TOKEN: &str =
    "5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee00";
pub(super) const TOPIC: &str = "dev.tocsin.app";

pub(super) fn config() -> ApnsConfig {
    ApnsConfig {
        key_pem: TEST_KEY.into(),
        key_id: "KEY1234567".into(),
        team_id: "TEAM123456".into(),
        topic: TOPIC.into(),
    }
}

pub(super) fn alert() -> Alert {
    let event_id = Uuid::from_u128(0x0195_1234_5678_7abc_8def_0123_4567_89ab);
    Alert {
        title: "Payment failed".into(),
        body: Some("Card declined for order 1234".into()),
        icon: Some("💸".into()),
        channel: "payments".into(),
        event_id,
        priority: Default::default(),
        alert_key: None,
        collapse_id: event_id.to_string(),
        summary: false,
        url: Some("https://shop.example.com/orders/1234".into()),
    }
}

pub(super) fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

pub(super) fn is_gone(outcome: &PushOutcome) -> bool {
    matches!(outcome, PushOutcome::DeviceGone { .. })
}

pub(super) fn is_retry(outcome: &PushOutcome) -> bool {
    matches!(outcome, PushOutcome::Retry { .. })
}

pub(super) fn is_rejected(outcome: &PushOutcome) -> bool {
    matches!(outcome, PushOutcome::Rejected { .. })
}

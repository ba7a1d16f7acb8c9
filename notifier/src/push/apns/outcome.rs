//! What APNs' answer means for a delivery: a2's responses and errors (also
//! those raised before anything was sent) turned into a [`PushOutcome`]
//! that says whether to retry, give up, or forget the device. Which answer
//! is which is the retry policy's (`crate::retry::classify`); this module
//! reads a2's types and words the reason recorded with the delivery.

use std::error::Error as StdError;

use crate::{push::PushOutcome, retry::classify};

/// What an a2 answer means for the delivery: its class is decided by the
/// retry policy (`crate::retry::classify`); this says what to record.
pub(super) fn classify(result: Result<a2::Response, a2::Error>) -> PushOutcome {
    match result {
        Ok(response) | Err(a2::Error::ResponseError(response)) => classify_response(response),
        Err(error) => classify::apns_error(&error).outcome(describe(&error), None),
    }
}

fn classify_response(response: a2::Response) -> PushOutcome {
    let code = response.code;
    if code == 200 {
        return PushOutcome::Delivered {
            apns_id: response.apns_id,
        };
    }
    let reason = response.error.map(|body| body.reason);
    let label = match &reason {
        Some(reason) => format!("{code} {reason:?}"),
        None => format!("{code} (no reason given)"),
    };
    classify::apns_answer(code, reason.as_ref()).outcome(label, None)
}

/// The error and its causes on one line, each cause once (a2's messages often
/// repeat their source).
fn describe(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use a2::{
        Client, ClientConfig, DefaultNotificationBuilder, ErrorReason, NotificationBuilder as _,
        NotificationOptions,
    };

    use super::*;
    use crate::push::apns::fixtures::{ED25519_KEY, TEST_KEY, is_gone, is_rejected, is_retry};

    fn response(code: u16, reason: Option<ErrorReason>) -> a2::Response {
        a2::Response {
            error: reason.map(|reason| a2::ErrorBody {
                reason,
                timestamp: None,
            }),
            apns_id: None,
            code,
        }
    }

    // ---- classify: answers from APNs ----

    #[test]
    fn status_200_is_delivered_with_the_apns_id() {
        let ok = a2::Response {
            error: None,
            apns_id: Some("3F2504E0-4F89-11D3-9A0C-0305E82C3301".into()),
            code: 200,
        };
        assert_eq!(
            classify(Ok(ok)),
            PushOutcome::Delivered {
                apns_id: Some("3F2504E0-4F89-11D3-9A0C-0305E82C3301".into())
            }
        );
    }

    #[test]
    fn unregistered_bad_and_wrong_topic_tokens_mean_the_device_is_gone() {
        for (code, reason) in [
            (410, ErrorReason::Unregistered),
            (400, ErrorReason::BadDeviceToken),
            (400, ErrorReason::DeviceTokenNotForTopic),
        ] {
            let name = format!("{code} {reason:?}");
            let outcome = classify(Err(a2::Error::ResponseError(response(code, Some(reason)))));
            assert_eq!(outcome, PushOutcome::DeviceGone { reason: name });
        }
    }

    #[test]
    fn throttling_and_server_errors_are_retried() {
        for (code, reason) in [
            (429, ErrorReason::TooManyRequests),
            (429, ErrorReason::TooManyProviderTokenUpdates),
            (500, ErrorReason::InternalServerError),
            (503, ErrorReason::ServiceUnavailable),
            (503, ErrorReason::Shutdown),
            (400, ErrorReason::IdleTimeout),
        ] {
            let outcome = classify(Err(a2::Error::ResponseError(response(code, Some(reason)))));
            assert!(is_retry(&outcome), "{code}: {outcome:?}");
        }
    }

    #[test]
    fn other_client_errors_are_rejected() {
        for (code, reason) in [
            (400, ErrorReason::PayloadTooLarge),
            (413, ErrorReason::PayloadTooLarge),
            (403, ErrorReason::InvalidProviderToken),
            (403, ErrorReason::ExpiredProviderToken),
            (403, ErrorReason::MissingProviderToken),
            (400, ErrorReason::BadTopic),
            (400, ErrorReason::TopicDisallowed),
            (400, ErrorReason::BadCollapseId),
            (400, ErrorReason::BadExpirationDate),
            (405, ErrorReason::MethodNotAllowed),
        ] {
            let outcome = classify(Err(a2::Error::ResponseError(response(code, Some(reason)))));
            assert!(is_rejected(&outcome), "{code}: {outcome:?}");
        }
    }

    #[test]
    fn without_a_reason_the_status_decides() {
        let outcome = |code| classify(Err(a2::Error::ResponseError(response(code, None))));
        assert!(is_gone(&outcome(410)));
        for code in [429, 500, 502, 503] {
            assert!(is_retry(&outcome(code)), "{code}");
        }
        for code in [400, 403, 404, 413] {
            assert!(is_rejected(&outcome(code)), "{code}");
        }
    }

    // ---- classify: errors before any answer ----

    #[test]
    fn a_request_timeout_is_retried() {
        assert!(is_retry(&classify(Err(a2::Error::RequestTimeout(20)))));
    }

    #[test]
    fn local_serialization_options_and_key_errors_are_rejected() {
        let serde_error = serde_json::from_str::<u8>("x").expect_err("not a number");
        let signer_error = Client::token("not a pem".as_bytes(), "K", "T", ClientConfig::default())
            .expect_err("no PEM");
        assert!(
            matches!(signer_error, a2::Error::SignerError(_)),
            "{signer_error:?}"
        );
        let key_error = Client::token(ED25519_KEY.as_bytes(), "K", "T", ClientConfig::default())
            .expect_err("not a P-256 key");
        assert!(
            matches!(key_error, a2::Error::UnexpectedKey(_)),
            "{key_error:?}"
        );

        for error in [
            a2::Error::SerializeError(serde_error),
            a2::Error::InvalidOptions("collapse id too long".into()),
            a2::Error::ReadError(std::io::Error::other("unreadable key")),
            a2::Error::InvalidCertificate,
            signer_error,
            key_error,
        ] {
            let shown = format!("{error:?}");
            assert!(is_rejected(&classify(Err(error))), "{shown}");
        }
    }

    #[tokio::test]
    async fn a_request_a2_cannot_build_is_rejected() {
        let client = Client::token(TEST_KEY.as_bytes(), "K", "T", ClientConfig::default())
            .expect("test key loads");
        let payload =
            DefaultNotificationBuilder::new().build("bad\r\ntoken", NotificationOptions::default());
        let error = client.send(payload).await.expect_err("cannot build");
        assert!(
            matches!(error, a2::Error::BuildRequestError(_)),
            "{error:?}"
        );
        assert!(is_rejected(&classify(Err(error))));
    }
}

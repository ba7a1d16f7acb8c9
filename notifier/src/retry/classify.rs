//! What counts as transient: the class a push service's answer falls into
//! (worth a retry, refused for good, or the device is gone), and which of
//! our own errors an outage is. The providers (`crate::push`) read their
//! service's answer and ask here what it means; the delivery then follows
//! the class through its [`PushOutcome`] (`crate::deliver`).
//!
//! The rules, for every service: a push that got no answer (the network,
//! a timeout) is transient, the next attempt may well get through
//! ([`unanswered`]); HTTP 429 and 5xx are transient ([`is_transient_status`]);
//! each service has its own "device gone" answers ([`http_status`], and
//! APNs' and FCM's error codes); anything else is refused for good.

use std::time::Duration;

use a2::ErrorReason;

use crate::{deliver::DeliverError, push::PushOutcome};

/// What an answer means for the delivery that got it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Throttling, a server error, no answer: retry after the backoff.
    Transient,
    /// Refused for a reason retrying will not fix (the payload, the
    /// credentials, the settings): record the failure, never retry.
    Permanent,
    /// The device's token or subscription is dead: deactivate the device,
    /// never retry.
    DeviceGone,
}

impl Class {
    /// The outcome of a push answered with this class; `after` is the push
    /// service's `Retry-After`, kept only for a transient answer.
    pub fn outcome(self, reason: String, after: Option<Duration>) -> PushOutcome {
        match self {
            Self::Transient => PushOutcome::Retry { reason, after },
            Self::Permanent => PushOutcome::Rejected { reason },
            Self::DeviceGone => PushOutcome::DeviceGone { reason },
        }
    }
}

/// A push that got no answer (unreachable, a timeout): transient.
pub fn unanswered(reason: String) -> PushOutcome {
    Class::Transient.outcome(reason, None)
}

/// Which HTTP endpoint answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// APNs, when a2 could not read the reason of its answer.
    Apns,
    /// A browser's push service (RFC 8030).
    WebPush,
    /// FCM's HTTP v1 send endpoint.
    Fcm,
    /// The OAuth token endpoint of an FCM service account: its answers are
    /// about the account, never a device.
    FcmToken,
}

/// APNs' "410 Unregistered": the token is no longer active for the topic.
const APNS_GONE: &[u16] = &[410];
/// RFC 8030 §7.3 and the push services' practice: 404 Not Found and 410
/// Gone mean the subscription expired or was removed.
const WEBPUSH_GONE: &[u16] = &[404, 410];
/// FCM's 404 NOT_FOUND: the app was uninstalled or the token expired.
const FCM_GONE: &[u16] = &[404];
/// The token endpoint never speaks of a device.
const FCM_TOKEN_GONE: &[u16] = &[];

/// FCM's error code for a token that is gone for good, whatever the status.
pub const FCM_UNREGISTERED: &str = "UNREGISTERED";

/// Whether an HTTP status means "try later" from any push service or
/// token endpoint: 429 Too Many Requests, or a server error (5xx).
pub fn is_transient_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// The class of a non-success HTTP status from `service`.
pub fn http_status(service: Service, status: u16) -> Class {
    let gone = match service {
        Service::Apns => APNS_GONE,
        Service::WebPush => WEBPUSH_GONE,
        Service::Fcm => FCM_GONE,
        Service::FcmToken => FCM_TOKEN_GONE,
    };
    if gone.contains(&status) {
        Class::DeviceGone
    } else if is_transient_status(status) {
        Class::Transient
    } else {
        Class::Permanent
    }
}

/// The class of an FCM error: its error code when it is
/// [`FCM_UNREGISTERED`], else its status. Other codes (`INVALID_ARGUMENT`: a
/// malformed token or message; `SENDER_ID_MISMATCH`: a token of another
/// project, a setting to fix, so the device is kept;
/// `THIRD_PARTY_AUTH_ERROR`) follow the status, which is 4xx for them.
pub fn fcm(status: u16, code: Option<&str>) -> Class {
    if code == Some(FCM_UNREGISTERED) {
        Class::DeviceGone
    } else {
        http_status(Service::Fcm, status)
    }
}

/// The class of an APNs answer that is not a success: by its reason, or by
/// its status when a2 could not read the reason (one newer than a2).
pub fn apns_answer(status: u16, reason: Option<&ErrorReason>) -> Class {
    use ErrorReason as R;
    match reason {
        Some(R::Unregistered | R::BadDeviceToken | R::DeviceTokenNotForTopic) => Class::DeviceGone,
        Some(
            R::TooManyRequests
            | R::TooManyProviderTokenUpdates
            | R::InternalServerError
            | R::ServiceUnavailable
            | R::Shutdown
            | R::IdleTimeout,
        ) => Class::Transient,
        // Listed rather than `_` so a reason added to a2 has to be placed.
        Some(
            R::BadCollapseId
            | R::BadExpirationDate
            | R::BadMessageId
            | R::BadPriority
            | R::BadTopic
            | R::DuplicateHeaders
            | R::MissingDeviceToken
            | R::MissingTopic
            | R::PayloadEmpty
            | R::TopicDisallowed
            | R::BadCertificate
            | R::BadCertificateEnvironment
            | R::ExpiredProviderToken
            | R::Forbidden
            | R::InvalidProviderToken
            | R::MissingProviderToken
            | R::BadPath
            | R::MethodNotAllowed
            | R::PayloadTooLarge,
        ) => Class::Permanent,
        None => http_status(Service::Apns, status),
    }
}

/// The class of an a2 error: an answer from APNs by its reason
/// ([`apns_answer`]); no answer (the network, Apple's front door) is
/// transient; a request that could not be built or signed here (the key,
/// the options, the payload) fails the same way every time.
pub fn apns_error(error: &a2::Error) -> Class {
    use a2::Error as E;
    match error {
        E::ResponseError(response) => apns_answer(
            response.code,
            response.error.as_ref().map(|body| &body.reason),
        ),
        E::ConnectionError(_) | E::ClientError(_) | E::RequestTimeout(_) => Class::Transient,
        E::SerializeError(_)
        | E::SignerError(_)
        | E::InvalidOptions(_)
        | E::ReadError(_)
        | E::Tls(_)
        | E::BuildRequestError(_)
        | E::UnexpectedKey(_)
        | E::InvalidCertificate => Class::Permanent,
    }
}

/// Whether an error of ours while processing a job is an outage that
/// waiting fixes (the store or the broker away, or refusing for now, as a
/// broker under a resource alarm does), as opposed to one that fails the
/// same way every time (a poison job).
pub fn is_transient(error: &DeliverError) -> bool {
    use common::store::StoreError;
    matches!(
        error,
        DeliverError::Store(StoreError::Unavailable(_)) | DeliverError::Queue(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_and_server_errors_are_transient_everywhere() {
        for service in [
            Service::Apns,
            Service::WebPush,
            Service::Fcm,
            Service::FcmToken,
        ] {
            for status in [429, 500, 502, 503, 599] {
                assert_eq!(
                    http_status(service, status),
                    Class::Transient,
                    "{service:?} {status}"
                );
            }
            for status in [400, 401, 403, 413, 428, 600] {
                assert_eq!(
                    http_status(service, status),
                    Class::Permanent,
                    "{service:?} {status}"
                );
            }
        }
    }

    #[test]
    fn each_service_has_its_own_gone_statuses() {
        let gone = |service| {
            (100..600)
                .filter(|status| http_status(service, *status) == Class::DeviceGone)
                .collect::<Vec<u16>>()
        };
        assert_eq!(gone(Service::Apns), vec![410]);
        assert_eq!(gone(Service::WebPush), vec![404, 410]);
        assert_eq!(gone(Service::Fcm), vec![404]);
        assert_eq!(gone(Service::FcmToken), Vec::<u16>::new());
    }

    #[test]
    fn fcms_unregistered_code_wins_over_the_status() {
        assert_eq!(fcm(400, Some("UNREGISTERED")), Class::DeviceGone);
        assert_eq!(fcm(500, Some("UNREGISTERED")), Class::DeviceGone);
        assert_eq!(fcm(400, Some("INVALID_ARGUMENT")), Class::Permanent);
        assert_eq!(fcm(403, Some("SENDER_ID_MISMATCH")), Class::Permanent);
        assert_eq!(fcm(429, Some("QUOTA_EXCEEDED")), Class::Transient);
        assert_eq!(fcm(404, None), Class::DeviceGone);
    }

    #[test]
    fn apns_reasons_decide_before_the_status() {
        use ErrorReason as R;
        assert_eq!(apns_answer(410, Some(&R::Unregistered)), Class::DeviceGone);
        assert_eq!(
            apns_answer(400, Some(&R::BadDeviceToken)),
            Class::DeviceGone
        );
        assert_eq!(
            apns_answer(429, Some(&R::TooManyRequests)),
            Class::Transient
        );
        assert_eq!(
            apns_answer(503, Some(&R::ServiceUnavailable)),
            Class::Transient
        );
        assert_eq!(
            apns_answer(403, Some(&R::ExpiredProviderToken)),
            Class::Permanent
        );
        assert_eq!(
            apns_answer(413, Some(&R::PayloadTooLarge)),
            Class::Permanent
        );
        assert_eq!(apns_answer(410, None), Class::DeviceGone);
        assert_eq!(apns_answer(500, None), Class::Transient);
        assert_eq!(apns_answer(400, None), Class::Permanent);
    }

    #[test]
    fn outages_of_ours_are_transient_and_other_errors_are_not() {
        use common::{queue::QueueError, store::StoreError};
        assert!(is_transient(&DeliverError::Store(StoreError::unavailable(
            "down"
        ))));
        assert!(is_transient(&DeliverError::Queue(QueueError::Reconnecting)));
        assert!(!is_transient(&DeliverError::Store(StoreError::Backend(
            anyhow::anyhow!("bad document")
        ))));
    }

    #[test]
    fn a_class_becomes_its_outcome() {
        let after = Some(Duration::from_secs(3));
        assert_eq!(
            Class::Transient.outcome("r".into(), after),
            PushOutcome::Retry {
                reason: "r".into(),
                after
            }
        );
        assert_eq!(
            Class::Permanent.outcome("r".into(), after),
            PushOutcome::Rejected { reason: "r".into() }
        );
        assert_eq!(
            Class::DeviceGone.outcome("r".into(), after),
            PushOutcome::DeviceGone { reason: "r".into() }
        );
        assert_eq!(
            unanswered("r".into()),
            PushOutcome::Retry {
                reason: "r".into(),
                after: None
            }
        );
    }
}

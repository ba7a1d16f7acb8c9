//! The FCM provider (Firebase Cloud Messaging HTTP v1): each push is one
//! `POST {base}/v1/projects/{project_id}/messages:send` ([`message`]) with
//! an OAuth 2.0 access token the service account obtains and caches
//! ([`token`], [`account`]). A 401 gets one new token and one resend. What
//! an answer means is the retry policy's (`crate::retry::classify`):
//! `UNREGISTERED` deactivates the device; 429 and 5xx are retried no
//! sooner than `Retry-After`.
//!
//! The base URL and the token endpoint come from the operator's settings
//! and key file, never from an API caller, so unlike Web Push endpoints
//! they are not held to the endpoint (SSRF) policy.

pub mod account;
mod message;
mod token;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use serde::Deserialize;

use super::{Push, PushOutcome, PushProvider, PushTarget, retry_after};
use account::ServiceAccount;
use token::{AccessTokens, TokenError};

use crate::retry::classify;

/// Sends FCM messages as one service account.
pub struct FcmProvider {
    tokens: AccessTokens,
    client: reqwest::Client,
    send_url: String,
}

impl FcmProvider {
    /// A provider for `account`, sending to `base_url` (no trailing path),
    /// giving each request `timeout`.
    pub fn new(account: ServiceAccount, base_url: &str, timeout: Duration) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .timeout(timeout)
            .build()?;
        let send_url = format!(
            "{}/v1/projects/{}/messages:send",
            base_url.trim_end_matches('/'),
            account.project_id
        );
        Ok(Self {
            tokens: AccessTokens::new(Arc::new(account), client.clone()),
            client,
            send_url,
        })
    }

    async fn post(&self, access_token: &str, body: &[u8]) -> Result<Answer, PushOutcome> {
        let response = self
            .client
            .post(&self.send_url)
            .bearer_auth(access_token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| classify::unanswered(format!("FCM unreachable: {}", e.without_url())))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.bytes().await.unwrap_or_default();
        Ok(Answer {
            status,
            headers,
            body: body.to_vec(),
        })
    }
}

/// FCM's answer to one send.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

/// FCM's error body (google.rpc.Status, with FcmError details).
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorStatus,
}

#[derive(Deserialize)]
struct ErrorStatus {
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    details: Vec<ErrorDetail>,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(rename = "errorCode")]
    error_code: Option<String>,
}

/// The outcome of FCM's answer, of the class the retry policy gives its
/// error code (of the details when there is one: `UNREGISTERED`,
/// `INVALID_ARGUMENT`, `QUOTA_EXCEEDED`, …) and status
/// ([`classify::fcm`]).
fn classify(answer: &Answer) -> PushOutcome {
    let status = answer.status;
    if (200..300).contains(&status) {
        return PushOutcome::Delivered { apns_id: None };
    }
    let error = serde_json::from_slice::<ErrorBody>(&answer.body).ok();
    let code = error.as_ref().and_then(|e| {
        e.error
            .details
            .iter()
            .find_map(|d| d.error_code.clone())
            .or_else(|| Some(e.error.status.clone()).filter(|s| !s.is_empty()))
    });
    let message = error.map(|e| e.error.message).unwrap_or_default();
    let reason = format!(
        "FCM answered {status} {}: {message}",
        code.as_deref().unwrap_or("")
    );
    classify::fcm(status, code.as_deref()).outcome(reason, retry_after(&answer.headers))
}

#[async_trait]
impl PushProvider for FcmProvider {
    fn name(&self) -> &'static str {
        "fcm"
    }

    async fn send(&self, push: &Push) -> PushOutcome {
        let PushTarget::Fcm { token } = &push.target else {
            return PushOutcome::Rejected {
                reason: "not an FCM device".into(),
            };
        };
        let body = message::body(token, &push.alert);
        let access = match self.tokens.get().await {
            Ok(access) => access,
            Err(TokenError(outcome)) => return outcome,
        };
        let mut answer = match self.post(&access, &body).await {
            Ok(answer) => answer,
            Err(outcome) => return outcome,
        };
        if answer.status == 401 {
            // Revoked or expired before its time: one new token, one resend.
            tracing::info!("FCM refused the access token; getting a new one");
            let access = match self.tokens.replace(&access).await {
                Ok(access) => access,
                Err(TokenError(outcome)) => return outcome,
            };
            answer = match self.post(&access, &body).await {
                Ok(answer) => answer,
                Err(outcome) => return outcome,
            };
        }
        classify(&answer)
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn answer(status: u16, body: serde_json::Value) -> Answer {
        Answer {
            status,
            headers: HeaderMap::new(),
            body: body.to_string().into_bytes(),
        }
    }

    fn fcm_error(status: u16, rpc: &str, code: Option<&str>) -> Answer {
        let details = match code {
            Some(code) => serde_json::json!([{
                "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                "errorCode": code,
            }]),
            None => serde_json::json!([]),
        };
        answer(
            status,
            serde_json::json!({ "error": {
                "code": status, "message": "said FCM", "status": rpc, "details": details,
            }}),
        )
    }

    #[test]
    fn answers_are_classified_by_error_code_then_status() {
        assert!(matches!(
            classify(&answer(
                200,
                serde_json::json!({"name": "projects/p/messages/1"})
            )),
            PushOutcome::Delivered { .. }
        ));
        let gone = classify(&fcm_error(404, "NOT_FOUND", Some("UNREGISTERED")));
        assert!(
            matches!(&gone, PushOutcome::DeviceGone { reason } if reason.contains("UNREGISTERED")),
            "{gone:?}"
        );
        assert!(matches!(
            classify(&fcm_error(400, "INVALID_ARGUMENT", Some("UNREGISTERED"))),
            PushOutcome::DeviceGone { .. }
        ));
        assert!(matches!(
            classify(&answer(404, serde_json::json!({}))),
            PushOutcome::DeviceGone { .. }
        ));
        let invalid = classify(&fcm_error(
            400,
            "INVALID_ARGUMENT",
            Some("INVALID_ARGUMENT"),
        ));
        assert!(
            matches!(&invalid, PushOutcome::Rejected { reason } if reason.contains("INVALID_ARGUMENT")),
            "{invalid:?}"
        );
        assert!(matches!(
            classify(&fcm_error(
                403,
                "PERMISSION_DENIED",
                Some("SENDER_ID_MISMATCH")
            )),
            PushOutcome::Rejected { .. }
        ));
        let mut throttled = fcm_error(429, "RESOURCE_EXHAUSTED", Some("QUOTA_EXCEEDED"));
        throttled
            .headers
            .insert("retry-after", HeaderValue::from_static("9"));
        assert!(matches!(
            classify(&throttled),
            PushOutcome::Retry { after: Some(after), .. } if after == Duration::from_secs(9)
        ));
        assert!(matches!(
            classify(&answer(503, serde_json::json!("unavailable"))),
            PushOutcome::Retry { after: None, .. }
        ));
    }
}

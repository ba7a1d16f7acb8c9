//! OAuth 2.0 access tokens for FCM by the JWT bearer grant (RFC 7523 §2.1):
//! the service account's signed assertion is posted to its `token_uri`, and
//! the token granted is cached until shortly before it expires. One request
//! at a time fetches: pushes sent meanwhile wait for its token instead of
//! asking too.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde::Deserialize;
use tokio::sync::Mutex;

use super::account::ServiceAccount;
use crate::{
    push::{PushOutcome, retry_after},
    retry::classify::{self, Service},
};

const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// A token is replaced this long before it expires (or at half its life,
/// if that is sooner), so none goes out about to lapse.
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// The token endpoint's answer (RFC 6749 §5.1).
#[derive(Deserialize)]
struct Granted {
    access_token: String,
    expires_in: u64,
}

/// Its error answer (RFC 6749 §5.2); the description is Google's own text.
#[derive(Deserialize)]
struct GrantError {
    error: String,
    error_description: Option<String>,
}

#[derive(Clone)]
struct Cached {
    token: String,
    refresh_at: Instant,
}

/// Why no token could be had; each is what the push it was for becomes.
#[derive(Debug)]
pub struct TokenError(pub PushOutcome);

/// The access tokens of one service account.
pub struct AccessTokens {
    account: Arc<ServiceAccount>,
    client: reqwest::Client,
    cached: Mutex<Option<Cached>>,
}

impl AccessTokens {
    pub fn new(account: Arc<ServiceAccount>, client: reqwest::Client) -> Self {
        Self {
            account,
            client,
            cached: Mutex::new(None),
        }
    }

    /// The cached token, or a new one when it is near expiry.
    pub async fn get(&self) -> Result<String, TokenError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| Instant::now() < c.refresh_at) {
            return Ok(c.token.clone());
        }
        self.fetch_into(&mut cached).await
    }

    /// A new token in place of `refused`, which FCM answered 401 to. When
    /// another push already replaced it, that replacement is used: one
    /// refusal, one new token, however many pushes saw it.
    pub async fn replace(&self, refused: &str) -> Result<String, TokenError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| c.token != refused) {
            return Ok(c.token.clone());
        }
        self.fetch_into(&mut cached).await
    }

    async fn fetch_into(&self, cached: &mut Option<Cached>) -> Result<String, TokenError> {
        let fetched = self.fetch().await?;
        let token = fetched.token.clone();
        *cached = Some(fetched);
        Ok(token)
    }

    async fn fetch(&self) -> Result<Cached, TokenError> {
        let rejected = |reason: String| TokenError(PushOutcome::Rejected { reason });
        let assertion = self.account.assertion().map_err(rejected)?;
        let asked = Instant::now();
        let response = self
            .client
            .post(&self.account.token_uri)
            .form(&[("grant_type", GRANT_TYPE), ("assertion", &assertion)])
            .send()
            .await
            .map_err(|e| {
                TokenError(classify::unanswered(format!(
                    "FCM token endpoint unreachable: {}",
                    e.without_url()
                )))
            })?;
        let status = response.status().as_u16();
        let after = retry_after(response.headers());
        let body = response.bytes().await.unwrap_or_default();
        if status == 200 {
            let granted: Granted = serde_json::from_slice(&body).map_err(|e| {
                rejected(format!(
                    "FCM token endpoint answered 200 without a token: {e}"
                ))
            })?;
            let life = Duration::from_secs(granted.expires_in);
            let margin = REFRESH_MARGIN.min(life / 2);
            tracing::info!(expires_in = granted.expires_in, "FCM access token granted");
            return Ok(Cached {
                token: granted.access_token,
                refresh_at: asked + life - margin,
            });
        }
        let why = serde_json::from_slice::<GrantError>(&body)
            .map(|e| match e.error_description {
                Some(description) => format!("{}: {description}", e.error),
                None => e.error,
            })
            .unwrap_or_default();
        let reason = format!("FCM token endpoint answered {status} {why}")
            .trim_end()
            .to_owned();
        // Anything but a transient status refuses the account's key or its
        // rights: every push would be refused, until the operator fixes the
        // settings.
        Err(TokenError(
            classify::http_status(Service::FcmToken, status).outcome(reason, after),
        ))
    }
}

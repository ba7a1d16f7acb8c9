//! The push providers the settings select, one per device kind ([`Router`]):
//! each kind's credentials are checked, and a kind without them gets the
//! logging provider.

use std::{sync::Arc, time::Duration};

use common::{config::ConfigError, endpoint::EndpointPolicy};

use super::Config;
use crate::guarded::GuardedClient;
use crate::push::{
    PushProvider, Router,
    apns::{ApnsConfig, ApnsProvider},
    fcm::{FcmProvider, account::ServiceAccount},
    logging::LoggingProvider,
    webpush::WebPushProvider,
};

impl Config {
    /// The FCM service account, when one is configured (its file read and
    /// its key parsed now, so a bad file fails the start), and the base URL.
    pub(super) fn fcm(&self) -> Result<Option<ServiceAccount>, ConfigError> {
        let base_ok = url::Url::parse(&self.fcm_base_url)
            .is_ok_and(|u| matches!(u.scheme(), "https" | "http") && u.host().is_some());
        if !base_ok {
            return Err(ConfigError::invalid(
                "NOTIFIER_FCM_BASE_URL",
                "must be an http(s) URL such as https://fcm.googleapis.com",
            ));
        }
        self.fcm_service_account
            .as_deref()
            .map(ServiceAccount::load)
            .transpose()
            .map_err(|e| ConfigError::invalid("NOTIFIER_FCM_SERVICE_ACCOUNT", e))
    }

    /// One provider per device kind ([`Router`]): APNs, Web Push and FCM
    /// when configured, otherwise the logging provider (and a warning
    /// saying so).
    pub fn push_provider(&self) -> anyhow::Result<Arc<dyn PushProvider>> {
        Ok(Arc::new(self.router()?))
    }

    /// The providers [`Config::push_provider`] routes to, each replaceable
    /// (tests put a recording provider in APNs' place).
    pub fn router(&self) -> anyhow::Result<Router> {
        Ok(Router {
            apns: self.apns_provider()?,
            webpush: self.webpush_provider()?,
            fcm: self.fcm_provider()?,
        })
    }

    pub(super) fn fcm_provider(&self) -> anyhow::Result<Arc<dyn PushProvider>> {
        let Some(account) = self.fcm()? else {
            tracing::warn!(
                "no FCM service account (NOTIFIER_FCM_SERVICE_ACCOUNT): \
                 FCM messages are logged, not sent"
            );
            return Ok(Arc::new(LoggingProvider));
        };
        tracing::info!(
            project = %account.project_id,
            base = %self.fcm_base_url,
            "FCM messages are sent as this project's service account"
        );
        Ok(Arc::new(FcmProvider::new(
            account,
            &self.fcm_base_url,
            Duration::from_millis(self.fcm_timeout_ms.get()),
        )?))
    }

    pub(super) fn webpush_provider(&self) -> anyhow::Result<Arc<dyn PushProvider>> {
        let Some(key) = self.vapid()? else {
            tracing::warn!(
                "no VAPID key (NOTIFIER_VAPID_PRIVATE_KEY, NOTIFIER_VAPID_SUBJECT): \
                 Web Push messages are logged, not sent"
            );
            return Ok(Arc::new(LoggingProvider));
        };
        tracing::info!(publicKey = %key.public_key(), "Web Push messages are sent, signed with this VAPID key");
        let client = GuardedClient::new(
            EndpointPolicy::new(self.webpush_allowed()?),
            Duration::from_millis(self.webpush_timeout_ms.get()),
        )?;
        Ok(Arc::new(WebPushProvider::new(key, client)))
    }

    pub(super) fn apns_provider(&self) -> anyhow::Result<Arc<dyn PushProvider>> {
        match self.apns()? {
            Some((path, key_id, team_id, topic)) => {
                let key_pem = std::fs::read_to_string(&path).map_err(|e| {
                    ConfigError::invalid(
                        "APNS_KEY_PATH",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                let provider = ApnsProvider::new(ApnsConfig {
                    key_pem,
                    key_id,
                    team_id,
                    topic,
                })?;
                tracing::info!("pushes go to APNs");
                Ok(Arc::new(provider))
            }
            None => {
                tracing::warn!(
                    "no APNs credentials (APNS_KEY_PATH, APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC): \
                     pushes are logged, not sent"
                );
                Ok(Arc::new(LoggingProvider))
            }
        }
    }
}

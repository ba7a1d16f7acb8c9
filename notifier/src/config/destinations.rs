//! What the destinations' senders are made of, from the settings both
//! services share ([`Backend`]): the SSRF policy with the operator's
//! allow-list, Telegram's API base, the SMTP server, the per-request
//! deadline. Ingest builds the same senders for its "send test", so a test
//! goes out exactly as an alert would.

use common::config::{Backend, ConfigError};

use crate::destinations::{SenderSettings, Senders, SmtpSecurity, SmtpSettings};

/// The senders' settings, checked: a bad allow-list, an unknown SMTP
/// security, a plain-text SMTP server that is not allow-listed, or an
/// SMTP host without a sender is refused at start.
pub fn sender_settings(backend: &Backend) -> Result<SenderSettings, ConfigError> {
    let policy = common::endpoint::EndpointPolicy::hosts(
        backend
            .destinations_allow()
            .map_err(|e| ConfigError::invalid("NOTIFIER_DESTINATIONS_ALLOW", e))?,
    );
    let smtp = match backend
        .smtp_host
        .as_deref()
        .filter(|h| !h.trim().is_empty())
    {
        None => None,
        Some(host) => {
            let security = SmtpSecurity::parse(&backend.smtp_security).ok_or_else(|| {
                ConfigError::invalid("NOTIFIER_SMTP_SECURITY", "must be tls, starttls or none")
            })?;
            let from = backend
                .smtp_from
                .clone()
                .filter(|f| !f.trim().is_empty())
                .ok_or_else(|| {
                    ConfigError::invalid(
                        "NOTIFIER_SMTP_FROM",
                        "must be set with NOTIFIER_SMTP_HOST (the sender of every mail)",
                    )
                })?;
            let port = backend.smtp_port.unwrap_or(match security {
                SmtpSecurity::Tls => 465,
                _ => 587,
            });
            let smtp = SmtpSettings {
                host: host.trim().to_owned(),
                port,
                from,
                security,
                user: backend.smtp_user.clone().filter(|u| !u.is_empty()),
                password: backend.smtp_password.clone(),
            };
            smtp.check(&policy)
                .map_err(|e| ConfigError(format!("the SMTP settings (NOTIFIER_SMTP_*): {e}")))?;
            Some(smtp)
        }
    };
    Ok(SenderSettings {
        policy,
        telegram_base_url: backend.telegram_base_url.trim_end_matches('/').to_owned(),
        smtp,
        timeout: backend.destination_timeout(),
    })
}

/// The senders the settings make.
pub fn senders(backend: &Backend) -> anyhow::Result<Senders> {
    Senders::new(sender_settings(backend)?)
}

/// The senders as ingest's "send test" takes them.
pub fn tester(
    backend: &Backend,
) -> anyhow::Result<std::sync::Arc<dyn common::embedded::DestinationTester>> {
    Ok(std::sync::Arc::new(senders(backend)?))
}

//! Destinations as the store keeps them: a project's webhook, Slack,
//! Discord, Telegram, ntfy and email recipients, with their rules, their
//! settings (sealed, and masked for display; the store never sees them in
//! the clear) and their health as the notifier last found it.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{RulesPatch, Scope};
use crate::{destination::DestinationKind, rules::AlertRules};

/// A place outside Tocsin a project's alerts go.
#[derive(Debug, Clone, PartialEq)]
pub struct Destination {
    /// A destination id ([`crate::destination::new_destination_id`]).
    pub id: Uuid,
    pub scope: Scope,
    pub kind: DestinationKind,
    pub name: String,
    /// Whether alerts go to it: an admin's switch, turned off too when its
    /// receiver says it is gone (`disabled_reason` then says so).
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub rules: AlertRules,
    /// The settings as shown after creation, secrets cut to hints
    /// ([`crate::destination::Settings::masked`]).
    pub masked: serde_json::Value,
    /// The settings, sealed ([`crate::sealed`]).
    pub sealed: String,
    pub health: Health,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// How its deliveries have gone lately.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// Failed attempts since the last delivered one.
    pub failures: u32,
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    pub last_delivered_at: Option<DateTime<Utc>>,
}

/// What one attempt to deliver to a destination came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Delivered,
    Failed {
        error: String,
    },
    /// Its receiver said it is gone: it is disabled, with this reason.
    Gone {
        error: String,
    },
}

/// A change to a destination: each field `None` is left as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DestinationPatch {
    pub name: Option<String>,
    pub enabled: Option<bool>,
    /// New settings of the same kind: masked and sealed.
    pub settings: Option<(serde_json::Value, String)>,
    pub rules: RulesPatch,
}

impl DestinationPatch {
    /// Applies the change to `destination`; true when something changed.
    /// Turning it on again forgets why it was off and its failures, so it
    /// shows as healthy until its next delivery says otherwise.
    pub fn apply(&self, destination: &mut Destination) -> bool {
        let before = destination.clone();
        if let Some(name) = &self.name {
            destination.name.clone_from(name);
        }
        if let Some((masked, sealed)) = &self.settings {
            destination.masked = masked.clone();
            destination.sealed.clone_from(sealed);
        }
        if let Some(enabled) = self.enabled {
            if enabled && !destination.enabled {
                destination.disabled_reason = None;
                destination.health.failures = 0;
            }
            destination.enabled = enabled;
        }
        self.rules.apply(&mut destination.rules);
        before != *destination
    }
}

impl Destination {
    /// Its health after `attempt` at `at`.
    pub fn record(&mut self, attempt: &Attempt, at: DateTime<Utc>) {
        match attempt {
            Attempt::Delivered => {
                self.health.failures = 0;
                self.health.last_delivered_at = Some(at);
            }
            Attempt::Failed { error } | Attempt::Gone { error } => {
                self.health.failures += 1;
                self.health.last_error = Some(error.clone());
                self.health.last_error_at = Some(at);
            }
        }
        if let Attempt::Gone { error } = attempt {
            self.enabled = false;
            self.disabled_reason = Some(error.clone());
        }
    }
}

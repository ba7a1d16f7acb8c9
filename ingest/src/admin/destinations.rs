//! A project's destinations: the places outside Tocsin its alerts go (a
//! signed webhook, Slack, Discord, Telegram, ntfy, email), with the rules
//! devices have. Created (the secrets are shown in that one answer, then
//! only as hints), listed, read, changed, deleted, and sent a test alert
//! whose outcome is the answer. Every URL passes the destinations' SSRF
//! policy here, and again at every send; every change is in the audit log.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use common::{
    destination::{DestinationKind, Settings, new_destination_id, new_webhook_secret},
    store::{Attempt, Destination, DestinationPatch, Health, Scope},
};
use poem::web::Data;
use poem_openapi::{
    ApiResponse, Enum, Object, OpenApi, Union,
    param::Path,
    payload::Json,
    types::{Example, ParseFromJSON, ToJSON},
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{AdminContext, Directory, parse_id};
use crate::{
    api::{
        ApiTags, Success,
        device_rules::{BurstRule, QuietHoursIn, QuietHoursOut, RulesChange, RulesIn, RulesOut},
        priority::EventPriority,
    },
    audit::{details, target},
    error::{ApiError, FieldError},
    request_id::RequestId,
    state::AppState,
    types::{Change, Nullable},
    validation::ValidatedJson,
};

/// Which service a destination is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum DestinationKindOut {
    Webhook,
    Slack,
    Discord,
    Telegram,
    Ntfy,
    Email,
}

impl From<DestinationKind> for DestinationKindOut {
    fn from(k: DestinationKind) -> Self {
        match k {
            DestinationKind::Webhook => Self::Webhook,
            DestinationKind::Slack => Self::Slack,
            DestinationKind::Discord => Self::Discord,
            DestinationKind::Telegram => Self::Telegram,
            DestinationKind::Ntfy => Self::Ntfy,
            DestinationKind::Email => Self::Email,
        }
    }
}

/// One kind's `kind` value: an enum of one, so each kind's body is its own
/// schema and a body matches exactly one of them.
macro_rules! kind_tag {
    ($name:ident, $variant:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
        #[oai(rename_all = "lowercase")]
        pub enum $name {
            $variant,
        }
    };
}

kind_tag!(WebhookKind, Webhook, "`\"webhook\"`");
kind_tag!(SlackKind, Slack, "`\"slack\"`");
kind_tag!(DiscordKind, Discord, "`\"discord\"`");
kind_tag!(TelegramKind, Telegram, "`\"telegram\"`");
kind_tag!(NtfyKind, Ntfy, "`\"ntfy\"`");
kind_tag!(EmailKind, Email, "`\"email\"`");

/// A webhook's settings. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookSettingsIn {
    /// Where alerts are POSTed: https to a public address (or a host the
    /// operator allowed). Signed per Standard Webhooks with a `whsec_`
    /// secret generated at creation.
    #[oai(validator(min_length = 1, max_length = 2048))]
    pub url: String,
}

/// A Slack incoming webhook. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackSettingsIn {
    /// The incoming webhook's URL (`https://hooks.slack.com/services/…`):
    /// a secret, shown only in the creation answer.
    #[oai(validator(min_length = 1, max_length = 2048))]
    pub webhook_url: String,
}

/// A Discord channel webhook. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscordSettingsIn {
    /// The webhook's URL (`https://discord.com/api/webhooks/…`): a secret,
    /// shown only in the creation answer.
    #[oai(validator(min_length = 1, max_length = 2048))]
    pub webhook_url: String,
}

/// A Telegram bot and the chat it writes to. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct TelegramSettingsIn {
    /// The bot's token from @BotFather (`123456:ABC…`): a secret, shown
    /// only in the creation answer.
    #[oai(validator(max_length = 128, pattern = "^[0-9]{1,20}:[A-Za-z0-9_-]{20,100}$"))]
    pub bot_token: String,
    /// The chat: its numeric id (`-1001234567890`) or a channel's
    /// `@username`.
    #[oai(validator(pattern = "^(-?[0-9]{1,20}|@[A-Za-z0-9_]{4,64})$"))]
    pub chat_id: String,
}

/// A topic on an ntfy server. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct NtfySettingsIn {
    /// The server (`https://ntfy.sh`, or your own).
    #[oai(validator(min_length = 1, max_length = 2048))]
    pub server_url: String,
    /// The topic: 1 to 64 letters, digits, `-` and `_`.
    #[oai(validator(pattern = "^[-_A-Za-z0-9]{1,64}$"))]
    pub topic: String,
    /// An access token (`tk_…`) for a protected topic: a secret, shown only
    /// in the creation answer.
    #[oai(validator(min_length = 1, max_length = 256))]
    pub token: Option<String>,
}

/// Mail recipients. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmailSettingsIn {
    /// 1 to 20 addresses; each alert is one mail to all of them, sent
    /// through the notifier's SMTP server (`NOTIFIER_SMTP_*`).
    #[oai(validator(
        min_items = 1,
        max_items = 20,
        unique_items,
        max_length = 254,
        // Spelled without `\s`, whose meaning differs between the
        // ECMAScript regexes of JSON Schema and the service's (U+0085).
        pattern = "^[^@<>,;\"\\x00-\\x20\\x7f]+@[^@<>,;\"\\x00-\\x20\\x7f]+\\.[^@<>,;\"\\x00-\\x20\\x7f]+$"
    ))]
    pub to: Vec<String>,
}

/// Builds one kind's creation body: its `kind`, its settings, and what
/// every destination has (a name, a switch, the rules devices have).
macro_rules! destination_in {
    (
        $(#[$meta:meta])* $name:ident, $kind:ident :: $tag:ident, $settings:ty,
        example: $label:literal, $example:expr
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Object)]
        #[oai(rename_all = "camelCase", deny_unknown_fields, example)]
        pub struct $name {
            pub kind: $kind,
            /// A label to recognise it by.
            #[oai(validator(min_length = 1, max_length = 100))]
            pub name: String,
            /// Whether alerts go to it; true when absent.
            pub enabled: Option<bool>,
            pub settings: $settings,
            /// Only events of these channels; absent means every channel.
            /// At most 50, each 1 to 100 characters.
            #[oai(validator(max_items = 50, min_length = 1, max_length = 100))]
            pub channels: Option<Vec<String>>,
            /// Only events carrying one of these tags; absent means any
            /// event. 1 to 20, each 1 to 64 characters.
            #[oai(validator(min_items = 1, max_items = 20, min_length = 1, max_length = 64))]
            pub tags: Option<Vec<String>>,
            /// Only events of this priority or higher; `low` when absent.
            pub min_priority: Option<EventPriority>,
            /// When alerts are held for one summary at the end; none when
            /// absent.
            pub quiet_hours: Option<QuietHoursIn>,
            /// How many alerts may come in a window before the rest wait
            /// for one digest; no limit when absent.
            pub burst: Option<BurstRule>,
        }

        impl $name {
            /// Its name, switch, rules and settings, taken apart.
            fn parts(self) -> (String, bool, RulesIn, $settings) {
                let rules = RulesIn {
                    channels: self.channels,
                    tags: self.tags,
                    min_priority: self.min_priority,
                    quiet_hours: self.quiet_hours,
                    burst: self.burst,
                };
                (self.name, self.enabled.unwrap_or(true), rules, self.settings)
            }
        }

        /// The sample the docs show: alerts of `normal` or higher.
        impl Example for $name {
            fn example() -> Self {
                Self {
                    kind: $kind::$tag,
                    name: $label.into(),
                    enabled: None,
                    settings: $example,
                    channels: None,
                    tags: None,
                    min_priority: Some(EventPriority::Normal),
                    quiet_hours: None,
                    burst: None,
                }
            }
        }
    };
}

destination_in!(
    /// A webhook destination. Unknown fields are rejected.
    WebhookDestinationIn,
    WebhookKind::Webhook,
    WebhookSettingsIn,
    example: "Orders service",
    WebhookSettingsIn {
        url: "https://orders.example.com/hooks/tocsin".into(),
    }
);
destination_in!(
    /// A Slack destination. Unknown fields are rejected.
    SlackDestinationIn,
    SlackKind::Slack,
    SlackSettingsIn,
    example: "#ops on Slack",
    SlackSettingsIn {
        webhook_url: "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
            .into(),
    }
);
destination_in!(
    /// A Discord destination. Unknown fields are rejected.
    DiscordDestinationIn,
    DiscordKind::Discord,
    DiscordSettingsIn,
    example: "#alerts on Discord",
    DiscordSettingsIn {
        webhook_url: "https://discord.com/api/webhooks/123456789012345678/XXXXXXXXXXXXXXXXXXXX"
            .into(),
    }
);
destination_in!(
    /// A Telegram destination. Unknown fields are rejected.
    TelegramDestinationIn,
    TelegramKind::Telegram,
    TelegramSettingsIn,
    example: "On-call group",
    TelegramSettingsIn {
        bot_token: "123456789:AAExampleExampleExampleExample0000".into(),
        chat_id: "-1001234567890".into(),
    }
);
destination_in!(
    /// An ntfy destination. Unknown fields are rejected.
    NtfyDestinationIn,
    NtfyKind::Ntfy,
    NtfySettingsIn,
    example: "Phones via ntfy",
    NtfySettingsIn {
        server_url: "https://ntfy.sh".into(),
        topic: "acme-shop-alerts".into(),
        token: None,
    }
);
destination_in!(
    /// An email destination. Unknown fields are rejected.
    EmailDestinationIn,
    EmailKind::Email,
    EmailSettingsIn,
    example: "On-call mail",
    EmailSettingsIn {
        to: vec!["oncall@example.com".into()],
    }
);

/// A new destination, by `kind`.
#[derive(Debug, Clone, Union)]
#[oai(one_of)]
pub enum DestinationIn {
    Webhook(WebhookDestinationIn),
    Slack(SlackDestinationIn),
    Discord(DiscordDestinationIn),
    Telegram(TelegramDestinationIn),
    Ntfy(NtfyDestinationIn),
    Email(EmailDestinationIn),
}

/// New settings, of the destination's own kind (a Slack destination takes
/// a Slack webhook, never a Discord one).
#[derive(Debug, Clone, Union)]
pub enum SettingsIn {
    Webhook(WebhookSettingsIn),
    Slack(SlackSettingsIn),
    Discord(DiscordSettingsIn),
    Telegram(TelegramSettingsIn),
    Ntfy(NtfySettingsIn),
    Email(EmailSettingsIn),
}

/// A change to a destination. A field left out is left as it is; `null`
/// clears a rule. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields, example)]
pub struct DestinationPatchIn {
    /// A label to recognise it by.
    #[oai(validator(min_length = 1, max_length = 100))]
    pub name: Option<String>,
    /// Turns it on or off. Turning on a destination its receiver disabled
    /// (a webhook's 410) clears the reason and its failures.
    pub enabled: Option<bool>,
    /// Replaces its settings whole, secrets included (a webhook keeps its
    /// signing secret). Of the destination's own kind.
    pub settings: Option<SettingsIn>,
    /// Only events of these channels; null for every channel.
    #[oai(validator(max_items = 50, min_length = 1, max_length = 100))]
    pub channels: Change<Vec<String>>,
    /// Only events carrying one of these tags; null for any event.
    #[oai(validator(min_items = 1, max_items = 20, min_length = 1, max_length = 64))]
    pub tags: Change<Vec<String>>,
    /// Only events of this priority or higher; null resets it to `low`.
    pub min_priority: Change<EventPriority>,
    /// Quiet hours; null for none.
    pub quiet_hours: Change<QuietHoursIn>,
    /// A burst limit; null for none.
    pub burst: Change<BurstRule>,
}

/// The sample the docs show: only `payments`, quiet at night.
impl Example for DestinationPatchIn {
    fn example() -> Self {
        Self {
            name: None,
            enabled: Some(true),
            settings: None,
            channels: Change::Set(vec!["payments".into()]),
            tags: Change::Keep,
            min_priority: Change::Keep,
            quiet_hours: Change::Set(QuietHoursIn {
                start: "22:00".into(),
                end: "07:00".into(),
                time_zone: "Europe/Berlin".into(),
                allow_priority: Change::Keep,
            }),
            burst: Change::Keep,
        }
    }
}

/// How a destination's deliveries have gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum DestinationHealthStatus {
    /// Nothing tried yet.
    Untested,
    /// Its last attempt was delivered, or it failed fewer than
    /// [`UNHEALTHY_AFTER`] times in a row.
    Healthy,
    /// Its last attempts all failed: see `lastError`. Alerts still go to
    /// it, retried as any delivery is.
    Unhealthy,
    /// Off: turned off by an admin, or by its receiver (`disabledReason`).
    Disabled,
}

/// Failed attempts in a row after which a destination shows unhealthy: a
/// single failure (retried anyway) is not worth a red mark.
const UNHEALTHY_AFTER: u32 = 3;

/// How a destination's deliveries have gone.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct DestinationHealth {
    pub status: DestinationHealthStatus,
    /// Failed attempts since the last delivered one.
    pub failures: u32,
    /// The last failure, as the receiver (or the network) gave it.
    pub last_error: Nullable<String>,
    pub last_error_at: Nullable<DateTime<Utc>>,
    pub last_delivered_at: Nullable<DateTime<Utc>>,
}

impl DestinationHealth {
    fn of(enabled: bool, h: Health) -> Self {
        let status = if !enabled {
            DestinationHealthStatus::Disabled
        } else if h.failures >= UNHEALTHY_AFTER {
            DestinationHealthStatus::Unhealthy
        } else if h.last_delivered_at.is_none() && h.last_error_at.is_none() {
            DestinationHealthStatus::Untested
        } else {
            DestinationHealthStatus::Healthy
        };
        Self {
            status,
            failures: h.failures,
            last_error: Nullable(h.last_error),
            last_error_at: Nullable(h.last_error_at),
            last_delivered_at: Nullable(h.last_delivered_at),
        }
    }
}

/// A destination, its secrets cut to hints.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct DestinationOut {
    /// Its id; deliveries to it name it as `destinationId`.
    pub id: Uuid,
    pub kind: DestinationKindOut,
    pub name: String,
    /// Whether alerts go to it.
    pub enabled: bool,
    /// Why its receiver had it turned off (a webhook's 410), if it did.
    pub disabled_reason: Nullable<String>,
    /// The kind's settings as given, each secret cut to a hint (`…1a2b`,
    /// or a webhook URL that is a credential to its origin).
    pub settings: BTreeMap<String, Value>,
    /// The channels it gets alerts from, or null for every channel.
    pub channels: Nullable<Vec<String>>,
    /// It gets only events carrying one of these tags; null for any event.
    pub tags: Nullable<Vec<String>>,
    /// It gets only events of this priority or higher.
    pub min_priority: EventPriority,
    /// When alerts are held for a summary; null for never.
    pub quiet_hours: Nullable<QuietHoursOut>,
    /// How many alerts may come in a window before the rest wait for a
    /// digest; null for no limit.
    pub burst: Nullable<BurstRule>,
    pub health: DestinationHealth,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<Destination> for DestinationOut {
    fn from(d: Destination) -> Self {
        let rules = RulesOut::from(d.rules);
        Self {
            id: d.id,
            kind: d.kind.into(),
            name: d.name,
            enabled: d.enabled,
            disabled_reason: Nullable(d.disabled_reason),
            settings: match d.masked {
                Value::Object(map) => map.into_iter().collect(),
                _ => BTreeMap::new(),
            },
            channels: rules.channels,
            tags: rules.tags,
            min_priority: rules.min_priority,
            quiet_hours: rules.quiet_hours,
            burst: rules.burst,
            health: DestinationHealth::of(d.enabled, d.health),
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

/// A new destination and its secrets, shown in this answer only.
#[derive(Debug, Clone, Object)]
pub struct DestinationWithSecrets {
    pub destination: DestinationOut,
    /// Each secret of its settings in full, by field (`secret`, the
    /// webhook's generated `whsec_…` signing secret; `webhookUrl`;
    /// `botToken`; `token`): store them now, they are never shown again.
    pub secrets: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Object)]
pub struct DestinationList {
    /// Oldest first.
    pub items: Vec<DestinationOut>,
}

#[derive(Debug, Clone, Object)]
pub struct DeletedDestination {
    pub id: Uuid,
    pub deleted: bool,
}

/// What a test alert came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "lowercase")]
pub enum TestOutcome {
    /// The receiver took it.
    Delivered,
    /// It failed in a way a delivery would retry (a 5xx, a 429, no answer).
    Retryable,
    /// It was refused for a reason retrying does not fix.
    Rejected,
    /// The receiver says the destination is gone (a webhook's 410): it is
    /// now disabled.
    Gone,
}

/// The answer to a test alert.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct TestResult {
    pub outcome: TestOutcome,
    /// What went wrong, when something did.
    pub error: Nullable<String>,
    /// How long the receiver took, in milliseconds.
    pub latency_ms: u64,
    /// The destination as it stands after the test (its health counts it).
    pub destination: DestinationOut,
}

#[derive(ApiResponse)]
pub enum CreatedResponse {
    /// Created; the answer holds its secrets, shown this once.
    #[oai(status = 201)]
    Created(Json<Success<DestinationWithSecrets>>),
}

#[derive(ApiResponse)]
pub enum ListResponse {
    #[oai(status = 200)]
    Ok(Json<Success<DestinationList>>),
}

#[derive(ApiResponse)]
pub enum OneResponse {
    #[oai(status = 200)]
    Ok(Json<Success<DestinationOut>>),
}

#[derive(ApiResponse)]
pub enum DeletedResponse {
    #[oai(status = 200)]
    Ok(Json<Success<DeletedDestination>>),
}

#[derive(ApiResponse)]
pub enum TestResponse {
    /// The test was sent; `outcome` says how it went.
    #[oai(status = 200)]
    Ok(Json<Success<TestResult>>),
}

pub struct DestinationsApi {
    pub state: Arc<AppState>,
}

/// A fault in the settings, reported at `["settings", field]`.
fn settings_fault(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::Validation(vec![FieldError::new(
        vec!["settings".into(), field.into()],
        message.into(),
    )])
}

fn not_found() -> ApiError {
    ApiError::NotFound("no destination with this id".into())
}

impl DestinationsApi {
    /// The project's scope, or 404.
    async fn scope(&self, project_id: &str) -> Result<(Scope, String), ApiError> {
        let directory = Directory::load(self.state.store.as_ref()).await?;
        let (organization, project) = directory.project(project_id)?;
        Ok((project.scope(organization), project.name.clone()))
    }

    /// Checks every URL of `settings` against the destinations' policy.
    async fn check(&self, settings: &Settings) -> Result<(), ApiError> {
        let field = match settings.kind() {
            DestinationKind::Webhook => "url",
            DestinationKind::Ntfy => "serverUrl",
            _ => "webhookUrl",
        };
        for url in settings.urls() {
            self.state
                .destinations
                .policy
                .check(url)
                .await
                .map_err(|refusal| settings_fault(field, refusal.to_string()))?;
        }
        Ok(())
    }

    /// The settings `input` asks for, as a `kind` destination has them
    /// (`secret`: the webhook's signing secret to keep or give).
    fn settings(kind: DestinationKind, input: Value, secret: String) -> Result<Settings, ApiError> {
        // Parsed again as the kind's own body: a Slack webhook's shape is
        // a Discord one's, and the union cannot tell them apart.
        fn parse<T: ParseFromJSON>(kind: DestinationKind, input: Value) -> Result<T, ApiError> {
            T::parse_from_json(Some(input)).map_err(|e| {
                ApiError::Validation(vec![FieldError::new(
                    vec!["settings".into()],
                    format!(
                        "are not the settings of a {} destination: {}",
                        kind.as_str(),
                        e.into_message()
                    ),
                )])
            })
        }
        Ok(match kind {
            DestinationKind::Webhook => {
                let s: WebhookSettingsIn = parse(kind, input)?;
                Settings::Webhook { url: s.url, secret }
            }
            DestinationKind::Slack => Settings::Slack {
                webhook_url: parse::<SlackSettingsIn>(kind, input)?.webhook_url,
            },
            DestinationKind::Discord => Settings::Discord {
                webhook_url: parse::<DiscordSettingsIn>(kind, input)?.webhook_url,
            },
            DestinationKind::Telegram => {
                let s: TelegramSettingsIn = parse(kind, input)?;
                Settings::Telegram {
                    bot_token: s.bot_token,
                    chat_id: s.chat_id,
                }
            }
            DestinationKind::Ntfy => {
                let s: NtfySettingsIn = parse(kind, input)?;
                Settings::Ntfy {
                    server_url: s.server_url.trim_end_matches('/').to_owned(),
                    topic: s.topic,
                    token: s.token,
                }
            }
            DestinationKind::Email => {
                let s: EmailSettingsIn = parse(kind, input)?;
                Settings::Email { to: s.to }
            }
        })
    }

    /// Seals `settings` for destination `id`: what the store keeps.
    fn seal(&self, id: Uuid, settings: &Settings) -> Result<(Value, String), ApiError> {
        let key = self.state.destinations.key()?;
        Ok((settings.masked(), settings.seal(key, id)))
    }

    async fn existing(&self, scope: &Scope, id: &str) -> Result<Destination, ApiError> {
        let id = parse_id(id, "destination")?;
        self.state
            .store
            .get_destination(scope, id)
            .await?
            .ok_or_else(not_found)
    }
}

/// A creation body as its kind, settings and the rest.
fn taken_apart(body: DestinationIn) -> (DestinationKind, String, bool, RulesIn, Value) {
    macro_rules! parts {
        ($kind:expr, $d:expr) => {{
            let (name, enabled, rules, settings) = $d.parts();
            (
                $kind,
                name,
                enabled,
                rules,
                settings.to_json().unwrap_or_default(),
            )
        }};
    }
    match body {
        DestinationIn::Webhook(d) => parts!(DestinationKind::Webhook, d),
        DestinationIn::Slack(d) => parts!(DestinationKind::Slack, d),
        DestinationIn::Discord(d) => parts!(DestinationKind::Discord, d),
        DestinationIn::Telegram(d) => parts!(DestinationKind::Telegram, d),
        DestinationIn::Ntfy(d) => parts!(DestinationKind::Ntfy, d),
        DestinationIn::Email(d) => parts!(DestinationKind::Email, d),
    }
}

#[OpenApi(tag = "ApiTags::Admin")]
impl DestinationsApi {
    /// Create a destination
    ///
    /// A place outside Tocsin the project's alerts go, with the rules
    /// devices have. Its URL must be https to a public address, unless the
    /// operator allowed its host (`NOTIFIER_DESTINATIONS_ALLOW`). This is
    /// the only answer that shows its secrets (a webhook's generated
    /// signing secret, a Slack or Discord webhook URL, a bot or access
    /// token); every later one shows hints.
    #[oai(
        path = "/admin/v1/projects/:projectId/destinations",
        method = "post",
        operation_id = "adminCreateDestination"
    )]
    async fn create(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        body: ValidatedJson<DestinationIn>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<CreatedResponse> {
        let (scope, project) = self.scope(&project_id.0).await?;
        let (kind, name, enabled, rules, settings) = taken_apart(body.0);
        let rules = rules.parse()?;
        let settings = Self::settings(kind, settings, new_webhook_secret())?;
        self.check(&settings).await?;
        let id = new_destination_id();
        let (masked, sealed) = self.seal(id, &settings)?;
        let now = common::time::now();
        let destination = Destination {
            id,
            scope,
            kind,
            name,
            enabled,
            disabled_reason: None,
            rules,
            masked,
            sealed,
            health: Health::default(),
            created_at: now,
            updated_at: now,
        };
        self.state
            .store
            .create_destination(&destination)
            .await
            .map_err(ApiError::from)?;
        let about = details(json!({ "project": project, "kind": kind.as_str() }));
        admin
            .audit(
                &self.state,
                "destination.create",
                target("destination", id, Some(&destination.name)),
                about,
            )
            .await?;
        let secrets = settings
            .secret_fields()
            .into_iter()
            .map(|(field, secret)| (field.to_owned(), secret.to_owned()))
            .collect();
        Ok(CreatedResponse::Created(Json(Success::new(
            DestinationWithSecrets {
                destination: destination.into(),
                secrets,
            },
            **request_id,
        ))))
    }

    /// List a project's destinations
    #[oai(
        path = "/admin/v1/projects/:projectId/destinations",
        method = "get",
        operation_id = "adminListDestinations"
    )]
    async fn list(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<ListResponse> {
        let (scope, _) = self.scope(&project_id.0).await?;
        let items = self
            .state
            .store
            .list_destinations(&scope)
            .await
            .map_err(ApiError::from)?;
        Ok(ListResponse::Ok(Json(Success::new(
            DestinationList {
                items: items.into_iter().map(Into::into).collect(),
            },
            **request_id,
        ))))
    }

    /// Get a destination
    #[oai(
        path = "/admin/v1/projects/:projectId/destinations/:destinationId",
        method = "get",
        operation_id = "adminGetDestination"
    )]
    async fn get(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        /// The destination's id.
        #[oai(name = "destinationId")]
        destination_id: Path<String>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<OneResponse> {
        let (scope, _) = self.scope(&project_id.0).await?;
        let destination = self.existing(&scope, &destination_id.0).await?;
        Ok(OneResponse::Ok(Json(Success::new(
            destination.into(),
            **request_id,
        ))))
    }

    /// Change a destination
    ///
    /// Its name, its switch, its settings (whole, of its own kind) and its
    /// rules; a field left out is left as it is.
    #[oai(
        path = "/admin/v1/projects/:projectId/destinations/:destinationId",
        method = "patch",
        operation_id = "adminUpdateDestination"
    )]
    async fn update(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        /// The destination's id.
        #[oai(name = "destinationId")]
        destination_id: Path<String>,
        body: ValidatedJson<DestinationPatchIn>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<OneResponse> {
        let (scope, project) = self.scope(&project_id.0).await?;
        let existing = self.existing(&scope, &destination_id.0).await?;
        let body = body.0;
        let settings = match body.settings {
            None => None,
            Some(input) => {
                // A webhook keeps the secret its receiver verifies with;
                // one whose settings no longer open (the secrets key
                // changed) cannot, and a new one would never be shown.
                let secret = match existing.kind {
                    DestinationKind::Webhook => match self.state.destinations.open(&existing) {
                        Ok(Settings::Webhook { secret, .. }) => secret,
                        _ => {
                            return Err(ApiError::Conflict(
                                "this webhook's signing secret cannot be read with this \
                                 server's secrets key: delete the destination and create it \
                                 again (its new secret is shown then)"
                                    .into(),
                            )
                            .into());
                        }
                    },
                    _ => String::new(),
                };
                let settings =
                    Self::settings(existing.kind, input.to_json().unwrap_or_default(), secret)?;
                self.check(&settings).await?;
                Some(self.seal(existing.id, &settings)?)
            }
        };
        let patch = DestinationPatch {
            name: body.name,
            enabled: body.enabled,
            settings,
            rules: RulesChange {
                channels: body.channels,
                tags: body.tags,
                min_priority: body.min_priority,
                quiet_hours: body.quiet_hours,
                burst: body.burst,
            }
            .parse()?,
        };
        let changed = self
            .state
            .store
            .update_destination(&scope, existing.id, &patch, common::time::now())
            .await
            .map_err(ApiError::from)?
            .ok_or_else(not_found)?;
        let about = details(json!({
            "project": project,
            "settings": patch.settings.is_some(),
            "enabled": patch.enabled,
        }));
        admin
            .audit(
                &self.state,
                "destination.update",
                target("destination", changed.id, Some(&changed.name)),
                about,
            )
            .await?;
        Ok(OneResponse::Ok(Json(Success::new(
            changed.into(),
            **request_id,
        ))))
    }

    /// Delete a destination
    ///
    /// Alerts stop going to it; what was delivered to it stays in the
    /// events' deliveries.
    #[oai(
        path = "/admin/v1/projects/:projectId/destinations/:destinationId",
        method = "delete",
        operation_id = "adminDeleteDestination"
    )]
    async fn delete(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        /// The destination's id.
        #[oai(name = "destinationId")]
        destination_id: Path<String>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<DeletedResponse> {
        let (scope, project) = self.scope(&project_id.0).await?;
        let existing = self.existing(&scope, &destination_id.0).await?;
        if !self
            .state
            .store
            .delete_destination(&scope, existing.id)
            .await
            .map_err(ApiError::from)?
        {
            return Err(not_found().into());
        }
        admin
            .audit(
                &self.state,
                "destination.delete",
                target("destination", existing.id, Some(&existing.name)),
                details(json!({ "project": project, "kind": existing.kind.as_str() })),
            )
            .await?;
        Ok(DeletedResponse::Ok(Json(Success::new(
            DeletedDestination {
                id: existing.id,
                deleted: true,
            },
            **request_id,
        ))))
    }

    /// Send a test alert to a destination
    ///
    /// Sent now, from this server, the way the notifier sends alerts (a
    /// webhook's `type` is `destination.test`), once, without retries; the
    /// answer says how it went, and the destination's health counts it.
    #[oai(
        path = "/admin/v1/projects/:projectId/destinations/:destinationId/test",
        method = "post",
        operation_id = "adminTestDestination"
    )]
    async fn test(
        &self,
        /// The project's id.
        #[oai(name = "projectId")]
        project_id: Path<String>,
        /// The destination's id.
        #[oai(name = "destinationId")]
        destination_id: Path<String>,
        admin: Data<&AdminContext>,
        request_id: Data<&RequestId>,
    ) -> poem::Result<TestResponse> {
        let (scope, project) = self.scope(&project_id.0).await?;
        let existing = self.existing(&scope, &destination_id.0).await?;
        let tried = self.state.destinations.test(&existing, &project).await?;
        let now = common::time::now();
        let attempt = match &tried.error {
            None => Attempt::Delivered,
            Some(error) if tried.outcome == TestOutcome::Gone => Attempt::Gone {
                error: error.clone(),
            },
            Some(error) => Attempt::Failed {
                error: error.clone(),
            },
        };
        self.state
            .store
            .record_attempt(&scope, existing.id, &attempt, now)
            .await
            .map_err(ApiError::from)?;
        admin
            .audit(
                &self.state,
                "destination.test",
                target("destination", existing.id, Some(&existing.name)),
                details(json!({ "project": project, "outcome": tried.outcome.to_json() })),
            )
            .await?;
        let destination = self.existing(&scope, &destination_id.0).await?;
        Ok(TestResponse::Ok(Json(Success::new(
            TestResult {
                outcome: tried.outcome,
                error: Nullable(tried.error),
                latency_ms: tried.latency_ms,
                destination: destination.into(),
            },
            **request_id,
        ))))
    }
}

/// What a test send came to, before it is recorded.
pub struct Tried {
    pub outcome: TestOutcome,
    pub error: Option<String>,
    pub latency_ms: u64,
}

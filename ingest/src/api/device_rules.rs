//! A device's alert rules as the API takes and shows them (`tags`,
//! `minPriority`, `quietHours`, `burst`, beside `channels`), what is
//! checked beyond the schema (a time zone the database knows), and the
//! body of `PATCH /v1/devices/{id}`, where a field left out is left as it
//! is and `null` clears it.

use common::{
    rules::{AlertRules, Burst, QuietHours, QuietHoursForm},
    store::{DevicePatch, RulesPatch},
};
use poem_openapi::Object;

use super::priority::EventPriority;
use crate::{
    error::{ApiError, FieldError},
    types::{Change, Nullable},
};

/// Quiet hours: a daily window, on the device's own clock, during which
/// alerts below `allowPriority` are held; when it ends, the device gets one
/// summary push for everything held. Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuietHoursIn {
    /// When quiet hours start each day, `HH:MM` (00:00 to 23:59).
    #[oai(validator(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub start: String,
    /// When they end, `HH:MM`: before `start` for a window across midnight
    /// (`22:00` to `07:00`). Must differ from `start`.
    #[oai(validator(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub end: String,
    /// The IANA time zone the times are reckoned in (`Europe/Berlin`,
    /// `America/New_York`, `UTC`), daylight-saving changes included.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub time_zone: String,
    /// Alerts of this priority or higher go out at once even during quiet
    /// hours: `high` when absent; `null` lets nothing through.
    pub allow_priority: Change<EventPriority>,
}

/// Quiet hours as a device has them.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct QuietHoursOut {
    /// `HH:MM`.
    pub start: String,
    /// `HH:MM`; before `start` when the window crosses midnight.
    pub end: String,
    /// IANA time zone name.
    pub time_zone: String,
    /// Alerts of this priority or higher go out at once; null: none do.
    pub allow_priority: Nullable<EventPriority>,
}

/// A burst limit: at most `max` alerts reach the device within
/// `perMinutes`; the ones past `max` are held, and one digest push
/// summarises them when the window ends. Unknown fields are rejected.
#[derive(Debug, Clone, Copy, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields)]
pub struct BurstRule {
    /// Most alerts in a window: 1 to 1000.
    #[oai(validator(minimum(value = "1"), maximum(value = "1000")))]
    pub max: u32,
    /// How long a window lasts, in minutes: 1 to 1440.
    #[oai(validator(minimum(value = "1"), maximum(value = "1440")))]
    pub per_minutes: u32,
}

impl From<BurstRule> for Burst {
    fn from(b: BurstRule) -> Self {
        Self {
            max: b.max,
            per_minutes: b.per_minutes,
        }
    }
}

impl From<Burst> for BurstRule {
    fn from(b: Burst) -> Self {
        Self {
            max: b.max,
            per_minutes: b.per_minutes,
        }
    }
}

impl From<QuietHours> for QuietHoursOut {
    fn from(q: QuietHours) -> Self {
        let form = QuietHoursForm::from(q);
        Self {
            start: form.start,
            end: form.end,
            time_zone: form.time_zone,
            allow_priority: Nullable(form.allow_priority.map(Into::into)),
        }
    }
}

impl QuietHoursIn {
    /// The quiet hours this asks for; a fault is reported under `at`
    /// (`["quietHours", field]`).
    fn parse(self) -> Result<QuietHours, ApiError> {
        let allow_priority = match self.allow_priority {
            Change::Keep => Some(common::store::Priority::High),
            Change::Clear => None,
            Change::Set(allowed) => Some(allowed.into()),
        };
        QuietHours::try_from(QuietHoursForm {
            start: self.start,
            end: self.end,
            time_zone: self.time_zone,
            allow_priority,
        })
        .map_err(|fault| {
            ApiError::Validation(vec![FieldError::new(
                vec!["quietHours".into(), fault.field.into()],
                fault.message,
            )])
        })
    }
}

/// The rules fields of a registration, as every kind of device takes them.
pub(crate) struct RulesIn {
    pub channels: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    pub min_priority: Option<EventPriority>,
    pub quiet_hours: Option<QuietHoursIn>,
    pub burst: Option<BurstRule>,
}

impl RulesIn {
    /// The rules they make: each field absent is its default (every
    /// channel, any tag, `low`, no quiet hours, no burst limit).
    pub(crate) fn parse(self) -> Result<AlertRules, ApiError> {
        Ok(AlertRules {
            channels: self.channels,
            tags: self.tags,
            min_priority: self
                .min_priority
                .map_or(common::store::Priority::Low, Into::into),
            quiet_hours: self.quiet_hours.map(QuietHoursIn::parse).transpose()?,
            burst: self.burst.map(Into::into),
        })
    }
}

/// A device's rules as answers show them: every field, defaults included.
pub(crate) struct RulesOut {
    pub channels: Nullable<Vec<String>>,
    pub tags: Nullable<Vec<String>>,
    pub min_priority: EventPriority,
    pub quiet_hours: Nullable<QuietHoursOut>,
    pub burst: Nullable<BurstRule>,
}

impl From<AlertRules> for RulesOut {
    fn from(r: AlertRules) -> Self {
        Self {
            channels: Nullable(r.channels),
            tags: Nullable(r.tags),
            min_priority: r.min_priority.into(),
            quiet_hours: Nullable(r.quiet_hours.map(Into::into)),
            burst: Nullable(r.burst.map(Into::into)),
        }
    }
}

/// A change to a device. A field left out is left as it is; `null` clears
/// it (a cleared `minPriority` is `low`). Unknown fields are rejected.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase", deny_unknown_fields, example)]
pub struct DevicePatchIn {
    /// A label to recognise the device by.
    #[oai(validator(min_length = 1, max_length = 100))]
    pub name: Change<String>,
    /// Only events of these channels; null for every channel. At most 50,
    /// each 1 to 100 characters.
    #[oai(validator(max_items = 50, min_length = 1, max_length = 100))]
    pub channels: Change<Vec<String>>,
    /// Only events carrying one of these tags; null for any event. 1 to
    /// 20, each 1 to 64 characters (no tag at all would let nothing
    /// through).
    #[oai(validator(min_items = 1, max_items = 20, min_length = 1, max_length = 64))]
    pub tags: Change<Vec<String>>,
    /// Only events of this priority or higher; null resets it to `low`.
    pub min_priority: Change<EventPriority>,
    /// Quiet hours; null for none.
    pub quiet_hours: Change<QuietHoursIn>,
    /// A burst limit; null for none.
    pub burst: Change<BurstRule>,
}

impl poem_openapi::types::Example for DevicePatchIn {
    fn example() -> Self {
        Self {
            name: Change::Keep,
            channels: Change::Keep,
            tags: Change::Clear,
            min_priority: Change::Set(EventPriority::Normal),
            quiet_hours: Change::Set(QuietHoursIn {
                start: "22:00".into(),
                end: "07:00".into(),
                time_zone: "Europe/Berlin".into(),
                allow_priority: Change::Set(EventPriority::High),
            }),
            burst: Change::Set(BurstRule {
                max: 5,
                per_minutes: 10,
            }),
        }
    }
}

impl DevicePatchIn {
    /// The change it asks for.
    pub(crate) fn parse(self) -> Result<DevicePatch, ApiError> {
        Ok(DevicePatch {
            name: self.name.into_patch(),
            rules: RulesChange {
                channels: self.channels,
                tags: self.tags,
                min_priority: self.min_priority,
                quiet_hours: self.quiet_hours,
                burst: self.burst,
            }
            .parse()?,
        })
    }
}

/// The rules fields of a change to a recipient (a device, a destination).
pub(crate) struct RulesChange {
    pub channels: Change<Vec<String>>,
    pub tags: Change<Vec<String>>,
    pub min_priority: Change<EventPriority>,
    pub quiet_hours: Change<QuietHoursIn>,
    pub burst: Change<BurstRule>,
}

impl RulesChange {
    /// The change to the rules they ask for.
    pub(crate) fn parse(self) -> Result<RulesPatch, ApiError> {
        let quiet_hours = match self.quiet_hours {
            Change::Set(q) => Change::Set(q.parse()?),
            Change::Clear => Change::Clear,
            Change::Keep => Change::Keep,
        };
        Ok(RulesPatch {
            channels: self.channels.into_patch(),
            tags: self.tags.into_patch(),
            min_priority: self.min_priority.map(Into::into).into_patch(),
            quiet_hours: quiet_hours.into_patch(),
            burst: self.burst.map(Into::into).into_patch(),
        })
    }
}

/// The answer for a device id the key's project does not have (another
/// project's devices are not told apart from missing ones).
pub(crate) fn not_found() -> ApiError {
    ApiError::NotFound("no device with this id".into())
}

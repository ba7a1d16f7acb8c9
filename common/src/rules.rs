//! A recipient's alert rules: which events reach it (channels, tags, a
//! minimum priority), when alerts are held back (quiet hours reckoned in
//! its own time zone, a burst limit), and the reckoning the notifier
//! applies to each (event, recipient) pair. Devices carry them today;
//! every later kind of recipient carries the same ones.
//!
//! What is held is not the rules' business: they only say *that* an alert
//! is held and until when; the store keeps what was held and the notifier
//! sends the summary.

use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveTime, TimeZone as _, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::store::Priority;

/// Which alerts a recipient gets, and which are held back for a summary.
/// The default lets every alert through at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertRules {
    /// Only events of these channels; `None` for every channel. Each store
    /// keeps it apart from the other rules (it predates them), so it is not
    /// part of their serialized form.
    #[serde(skip)]
    pub channels: Option<Vec<String>>,
    /// Only events carrying one of these tags; `None` for any event, tagged
    /// or not.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Only events of this priority or higher.
    #[serde(default = "lowest")]
    pub min_priority: Priority,
    /// When alerts below a priority are held for a summary.
    #[serde(default)]
    pub quiet_hours: Option<QuietHours>,
    /// How many alerts may reach the recipient in a window before the rest
    /// are held for a digest.
    #[serde(default)]
    pub burst: Option<Burst>,
}

fn lowest() -> Priority {
    Priority::Low
}

impl Default for AlertRules {
    fn default() -> Self {
        Self::every_alert()
    }
}

impl AlertRules {
    /// Every alert, at once: what a recipient registered without rules gets.
    pub fn every_alert() -> Self {
        Self {
            channels: None,
            tags: None,
            min_priority: Priority::Low,
            quiet_hours: None,
            burst: None,
        }
    }

    /// Why an event of `channel`, with `tags`, at `priority`, is not for
    /// this recipient at all; `None` when it is.
    pub fn filter(
        &self,
        channel: &str,
        tags: &[String],
        priority: Priority,
    ) -> Option<FilterReason> {
        if let Some(channels) = &self.channels
            && !channels.iter().any(|c| c == channel)
        {
            return Some(FilterReason::Channel);
        }
        if let Some(wanted) = &self.tags
            && !tags.iter().any(|tag| wanted.contains(tag))
        {
            return Some(FilterReason::Tag);
        }
        (priority < self.min_priority).then_some(FilterReason::Priority)
    }
}

/// Why an event is not for a recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterReason {
    /// Not one of its channels.
    Channel,
    /// It has tags, and the event carries none of them.
    Tag,
    /// Below its minimum priority.
    Priority,
}

/// Why an alert is held back for a summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldReason {
    /// The recipient's quiet hours: summarised when they end.
    QuietHours,
    /// Past the recipient's burst limit: summarised when the window ends.
    Burst,
}

impl HoldReason {
    pub const ALL: [Self; 2] = [Self::QuietHours, Self::Burst];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::QuietHours => "quietHours",
            Self::Burst => "burst",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }
}

impl FilterReason {
    pub const ALL: [Self; 3] = [Self::Channel, Self::Tag, Self::Priority];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Channel => "channel",
            Self::Tag => "tag",
            Self::Priority => "priority",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// A time of day, to the minute, written `HH:MM` (00:00 to 23:59).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeOfDay(NaiveTime);

impl TimeOfDay {
    /// `HH:MM`, two digits each; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let (h, m) = s.split_once(':')?;
        let two_digits = |p: &str| p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit());
        if !two_digits(h) || !two_digits(m) {
            return None;
        }
        NaiveTime::from_hms_opt(h.parse().ok()?, m.parse().ok()?, 0).map(Self)
    }

    pub fn time(self) -> NaiveTime {
        self.0
    }
}

impl std::fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.format("%H:%M"))
    }
}

/// An IANA time zone name the zone database knows (`Europe/Berlin`).
pub fn parse_time_zone(name: &str) -> Option<Tz> {
    name.parse().ok()
}

/// A daily window in the recipient's own time zone during which alerts
/// below `allow_priority` are held, and summarised when it ends. A window
/// whose end is before its start crosses midnight (`22:00`–`07:00`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "QuietHoursForm", into = "QuietHoursForm")]
pub struct QuietHours {
    pub start: TimeOfDay,
    pub end: TimeOfDay,
    pub time_zone: Tz,
    /// Alerts of this priority or higher still go out at once; `None` lets
    /// nothing through.
    pub allow_priority: Option<Priority>,
}

/// How quiet hours are written: in the API and in both stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuietHoursForm {
    pub start: String,
    pub end: String,
    pub time_zone: String,
    pub allow_priority: Option<Priority>,
}

/// What is wrong with a written [`QuietHours`]: the field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct QuietHoursFault {
    pub field: &'static str,
    pub message: String,
}

impl TryFrom<QuietHoursForm> for QuietHours {
    type Error = QuietHoursFault;

    fn try_from(form: QuietHoursForm) -> Result<Self, Self::Error> {
        let time = |field: &'static str, value: &str| {
            TimeOfDay::parse(value).ok_or_else(|| QuietHoursFault {
                field,
                message: format!("{value:?} is not a time of day written HH:MM (00:00 to 23:59)"),
            })
        };
        let start = time("start", &form.start)?;
        let end = time("end", &form.end)?;
        if start == end {
            return Err(QuietHoursFault {
                field: "end",
                message: "must differ from start (a window of no length holds nothing)".into(),
            });
        }
        let time_zone = parse_time_zone(&form.time_zone).ok_or_else(|| QuietHoursFault {
            field: "timeZone",
            message: format!(
                "{:?} is not an IANA time zone name (such as Europe/Berlin or UTC)",
                form.time_zone
            ),
        })?;
        Ok(Self {
            start,
            end,
            time_zone,
            allow_priority: form.allow_priority,
        })
    }
}

impl From<QuietHours> for QuietHoursForm {
    fn from(q: QuietHours) -> Self {
        Self {
            start: q.start.to_string(),
            end: q.end.to_string(),
            time_zone: q.time_zone.name().to_owned(),
            allow_priority: q.allow_priority,
        }
    }
}

impl QuietHours {
    /// Whether an alert of `priority` goes out even during quiet hours.
    pub fn lets_through(&self, priority: Priority) -> bool {
        self.allow_priority
            .is_some_and(|allowed| priority >= allowed)
    }

    /// When the quiet hours `now` falls in end; `None` when `now` is not in
    /// quiet hours. Reckoned on the wall clock of the time zone, so a
    /// window keeps its local times across daylight-saving changes; an end
    /// that falls in a skipped hour is the first instant after it.
    pub fn ends_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = now.with_timezone(&self.time_zone);
        let (t, today) = (local.time(), local.date_naive());
        let (start, end) = (self.start.time(), self.end.time());
        let end_day = if start < end {
            (start <= t && t < end).then_some(today)?
        } else if t >= start {
            today.succ_opt()?
        } else if t < end {
            today
        } else {
            return None;
        };
        Some(self.instant(end_day, end))
    }

    /// The instant the wall clock of the zone reads `time` on `day`: the
    /// earlier one when the clock goes back through it, the first after
    /// the gap when it jumps over it.
    fn instant(&self, day: NaiveDate, time: NaiveTime) -> DateTime<Utc> {
        let mut wall = day.and_time(time);
        // No gap in the database is longer than a day; step a minute at a
        // time out of it.
        for _ in 0..=24 * 60 {
            match self.time_zone.from_local_datetime(&wall) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
                    return t.with_timezone(&Utc);
                }
                LocalResult::None => wall += Duration::minutes(1),
            }
        }
        wall.and_utc()
    }
}

/// At most `max` alerts to a recipient in a window of `per_minutes`, which
/// opens with the first alert after the previous window closed; the rest
/// are held and go out as one digest when the window closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Burst {
    pub max: u32,
    pub per_minutes: u32,
}

impl Burst {
    pub const MAX: std::ops::RangeInclusive<u32> = 1..=1000;
    pub const PER_MINUTES: std::ops::RangeInclusive<u32> = 1..=1440;

    /// How long a window lasts.
    pub fn window(&self) -> Duration {
        Duration::minutes(i64::from(self.per_minutes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(start: &str, end: &str, zone: &str) -> QuietHours {
        QuietHours::try_from(QuietHoursForm {
            start: start.into(),
            end: end.into(),
            time_zone: zone.into(),
            allow_priority: Some(Priority::High),
        })
        .expect("valid")
    }

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().expect("an RFC 3339 time")
    }

    #[test]
    fn times_of_day_are_exactly_hh_mm() {
        assert_eq!(
            TimeOfDay::parse("07:05").map(|t| t.to_string()),
            Some("07:05".into())
        );
        for bad in [
            "7:05", "24:00", "12:60", "12:5", "12-30", "12:30:00", "", "ab:cd", "+1:00",
        ] {
            assert_eq!(TimeOfDay::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_window_across_midnight_is_reckoned_in_its_own_zone() {
        // 22:00–07:00 in Berlin (UTC+1 in November): 21:00–06:00 UTC.
        let q = quiet("22:00", "07:00", "Europe/Berlin");
        assert_eq!(q.ends_after(utc("2026-11-26T20:59:00Z")), None);
        assert_eq!(
            q.ends_after(utc("2026-11-26T21:00:00Z")),
            Some(utc("2026-11-27T06:00:00Z")),
            "from the start, the window ends the next morning"
        );
        assert_eq!(
            q.ends_after(utc("2026-11-26T23:30:00Z")),
            Some(utc("2026-11-27T06:00:00Z")),
            "after midnight local time, still the same window"
        );
        assert_eq!(
            q.ends_after(utc("2026-11-27T05:59:59Z")),
            Some(utc("2026-11-27T06:00:00Z"))
        );
        assert_eq!(q.ends_after(utc("2026-11-27T06:00:00Z")), None);
        // In UTC the same times would be an hour later.
        let in_utc = quiet("22:00", "07:00", "UTC");
        assert_eq!(in_utc.ends_after(utc("2026-11-26T21:30:00Z")), None);
    }

    #[test]
    fn a_window_within_a_day() {
        let q = quiet("12:00", "13:30", "Asia/Tokyo"); // UTC+9
        assert_eq!(q.ends_after(utc("2026-11-26T02:59:00Z")), None);
        assert_eq!(
            q.ends_after(utc("2026-11-26T03:00:00Z")),
            Some(utc("2026-11-26T04:30:00Z"))
        );
        assert_eq!(q.ends_after(utc("2026-11-26T04:30:00Z")), None);
    }

    #[test]
    fn daylight_saving_changes_keep_the_wall_clock_times() {
        let q = quiet("22:00", "07:00", "Europe/Berlin");
        // The night of 28–29 March 2026 the clocks go 02:00 → 03:00: the
        // window starts at 22:00 CET (21:00 UTC) and ends at 07:00 CEST
        // (05:00 UTC), eight hours later.
        assert_eq!(
            q.ends_after(utc("2026-03-28T21:00:00Z")),
            Some(utc("2026-03-29T05:00:00Z"))
        );
        // The night of 24–25 October the clocks go 03:00 → 02:00: 07:00 CET
        // is 06:00 UTC.
        assert_eq!(
            q.ends_after(utc("2026-10-24T20:00:00Z")),
            Some(utc("2026-10-25T06:00:00Z"))
        );
        // An end inside the skipped hour is the first instant after it.
        let gap = quiet("01:00", "02:30", "Europe/Berlin");
        assert_eq!(
            gap.ends_after(utc("2026-03-29T00:30:00Z")),
            Some(utc("2026-03-29T01:00:00Z")),
            "02:30 does not exist that night; 03:00 CEST does"
        );
    }

    #[test]
    fn written_quiet_hours_are_checked_field_by_field() {
        let form = |start: &str, end: &str, zone: &str| QuietHoursForm {
            start: start.into(),
            end: end.into(),
            time_zone: zone.into(),
            allow_priority: None,
        };
        let fault = |f: QuietHoursForm| QuietHours::try_from(f).expect_err("refused").field;
        assert_eq!(fault(form("25:00", "07:00", "UTC")), "start");
        assert_eq!(fault(form("22:00", "7", "UTC")), "end");
        assert_eq!(fault(form("22:00", "22:00", "UTC")), "end");
        assert_eq!(fault(form("22:00", "07:00", "Mars/Olympus")), "timeZone");
        let q = QuietHours::try_from(form("22:00", "07:00", "America/New_York")).expect("valid");
        assert!(!q.lets_through(Priority::High), "null lets nothing through");
        assert_eq!(
            QuietHoursForm::from(q),
            form("22:00", "07:00", "America/New_York")
        );
    }

    #[test]
    fn filters_say_why_an_event_is_not_for_a_recipient() {
        let rules = AlertRules {
            channels: Some(vec!["payments".into()]),
            tags: Some(vec!["vip".into()]),
            min_priority: Priority::Normal,
            ..AlertRules::every_alert()
        };
        let vip = vec!["vip".to_owned()];
        assert_eq!(
            rules.filter("signups", &vip, Priority::High),
            Some(FilterReason::Channel)
        );
        assert_eq!(
            rules.filter("payments", &[], Priority::High),
            Some(FilterReason::Tag)
        );
        assert_eq!(
            rules.filter("payments", &vip, Priority::Low),
            Some(FilterReason::Priority)
        );
        assert_eq!(rules.filter("payments", &vip, Priority::Normal), None);
        assert_eq!(
            AlertRules::every_alert().filter("any", &[], Priority::Low),
            None
        );
    }
}

//! Quiet hours for tests of what devices' rules hold: windows that hold now
//! and end within a minute or two (quiet hours are reckoned to the minute),
//! so a test sees them end without sleeping for hours.

use chrono::{DurationRound as _, Timelike as _, Utc};
use serde_json::{Value, json};

/// Quiet hours, in UTC, that hold now and end at the next minute boundary
/// at least 20 seconds away (time enough to record what they hold).
pub fn quiet_hours_ending_soon() -> Value {
    let now = Utc::now();
    let minute = chrono::Duration::minutes(1);
    let mut end = now.duration_trunc(minute).expect("a minute") + minute;
    if (end - now).num_seconds() < 20 {
        end += minute;
    }
    let start = end - chrono::Duration::minutes(30);
    let hm = |t: chrono::DateTime<Utc>| format!("{:02}:{:02}", t.hour(), t.minute());
    json!({ "start": hm(start), "end": hm(end), "timeZone": "UTC" })
}

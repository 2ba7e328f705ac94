//! When a scheduled job runs: once `at` a moment, `every` so often, or at the times a `cron`
//! expression gives in a time zone. Parsed from what a user or the agent wrote (an error
//! names the field and says what is allowed), kept as text in the job store, and asked for
//! the next time after a moment.

use std::fmt;
use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::heartbeat::parse_interval;

/// A job's schedule.
#[derive(Debug, Clone, PartialEq)]
pub enum JobSchedule {
    /// Once, at this moment.
    At(Timestamp),
    /// Every so often, counted from when the job was made.
    Every(Duration),
    /// At the times of a cron expression.
    /// (Boxed: a parsed expression is large, and most jobs have none.)
    Cron(Box<CronSpec>),
}

/// A cron expression with its time zone.
#[derive(Debug, Clone)]
pub struct CronSpec {
    /// As written (5 fields, or 6 with seconds first).
    expr: String,
    /// An IANA name; `None`: the machine's own zone.
    tz_name: Option<String>,
    tz: TimeZone,
    cron: Cron,
}

impl PartialEq for CronSpec {
    fn eq(&self, other: &Self) -> bool {
        self.expr == other.expr && self.tz_name == other.tz_name
    }
}

/// A schedule that cannot be: which field (`at`, `every`, `cron`, `tz`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ScheduleError {
    pub field: &'static str,
    pub message: String,
}

impl ScheduleError {
    fn new(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

impl JobSchedule {
    /// `text` is an RFC 3339 moment (`2026-12-01T09:00:00+01:00`) or a time from `now`
    /// (`+20m`, `+1h30m`), to the second; a moment not after `now` is an error.
    pub fn at(text: &str, now: Timestamp) -> Result<Self, ScheduleError> {
        let text = text.trim();
        let at = match text.strip_prefix('+') {
            Some(offset) => {
                let offset = job_interval(offset)
                    .map_err(|e| ScheduleError::new("at", e))?
                    .ok_or_else(|| ScheduleError::new("at", "+0 is now, not a time to come"))?;
                let offset = jiff::SignedDuration::try_from(offset)
                    .map_err(|e| ScheduleError::new("at", e.to_string()))?;
                now.checked_add(offset)
                    .map_err(|e| ScheduleError::new("at", e.to_string()))?
            }
            None => text.parse::<Timestamp>().map_err(|_| {
                ScheduleError::new(
                    "at",
                    format!(
                        "{text:?} is not a time; use RFC 3339 (2026-12-01T09:00:00+01:00) or a \
                         time from now (+20m, +1h30m)"
                    ),
                )
            })?,
        };
        // Whole seconds: the store keeps them, and nobody schedules by the nanosecond.
        let at = Timestamp::from_second(at.as_second()).unwrap_or(at);
        if at <= now {
            return Err(ScheduleError::new(
                "at",
                format!(
                    "{at} is in the past (now is {})",
                    now.round(jiff::Unit::Second).unwrap_or(now)
                ),
            ));
        }
        Ok(Self::At(at))
    }

    /// `text` is an interval of at least a second: `30m`, `1h30m`, `90s` or seconds (`45`).
    pub fn every(text: &str) -> Result<Self, ScheduleError> {
        match job_interval(text).map_err(|e| ScheduleError::new("every", e))? {
            Some(every) => Ok(Self::Every(every)),
            None => Err(ScheduleError::new(
                "every",
                format!(
                    "{:?} is under 1 second; the shortest interval is 1s",
                    text.trim()
                ),
            )),
        }
    }

    /// A cron expression of 5 fields (minute hour day-of-month month day-of-week) or 6 (with
    /// seconds first), read in time zone `tz` (an IANA name; `None`: the machine's own).
    /// An expression that never matches (`0 0 30 2 *`) is an error too.
    pub fn cron(expr: &str, tz: Option<&str>, now: Timestamp) -> Result<Self, ScheduleError> {
        let spec = CronSpec::new(expr, tz)?;
        if spec.next_after(now).is_none() {
            return Err(ScheduleError::new(
                "cron",
                format!("{:?} never matches a date to come", spec.expr),
            ));
        }
        Ok(Self::Cron(Box::new(spec)))
    }

    /// A schedule as [`JobSchedule::kind`], [`JobSchedule::spec`] and [`JobSchedule::tz`]
    /// gave it to the job store.
    pub fn from_stored(kind: &str, spec: &str, tz: Option<&str>) -> Result<Self, ScheduleError> {
        match kind {
            "at" => spec
                .parse()
                .map(Self::At)
                .map_err(|e| ScheduleError::new("at", format!("{spec:?}: {e}"))),
            "every" => Self::every(spec),
            "cron" => CronSpec::new(spec, tz).map(|spec| Self::Cron(Box::new(spec))),
            other => Err(ScheduleError::new(
                "kind",
                format!("{other:?} is not a schedule; known: at, every, cron"),
            )),
        }
    }

    /// `at`, `every` or `cron`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::At(_) => "at",
            Self::Every(_) => "every",
            Self::Cron(_) => "cron",
        }
    }

    /// The schedule's text: the moment (RFC 3339, UTC), the interval (`1h30m`) or the
    /// expression.
    pub fn spec(&self) -> String {
        match self {
            Self::At(at) => at.to_string(),
            Self::Every(every) => format_interval(*every),
            Self::Cron(spec) => spec.expr.clone(),
        }
    }

    /// The time zone a cron expression is read in; `None`: the machine's own (or no cron).
    pub fn tz(&self) -> Option<&str> {
        match self {
            Self::At(_) | Self::Every(_) => None,
            Self::Cron(spec) => spec.tz_name.as_deref(),
        }
    }

    /// The zone a cron expression is read in (the machine's own when it names none); `None`
    /// for the other schedules, whose times are moments.
    pub fn zone(&self) -> Option<&TimeZone> {
        match self {
            Self::At(_) | Self::Every(_) => None,
            Self::Cron(spec) => Some(&spec.tz),
        }
    }

    /// `at` as a person reads this schedule's times: in the cron expression's zone, with its
    /// offset and name (`2026-11-30T09:00:00+01:00[Europe/Berlin]`); other schedules in UTC.
    pub fn show_time(&self, at: Timestamp) -> String {
        match self.zone() {
            Some(zone) => at.to_zoned(zone.clone()).to_string(),
            None => at.to_string(),
        }
    }

    /// Whether the job runs once and is then done.
    pub fn is_once(&self) -> bool {
        match self {
            Self::At(_) => true,
            Self::Every(_) | Self::Cron(_) => false,
        }
    }

    /// The first time strictly after `after`; an `every` schedule counts from `anchor` (when
    /// the job was made). `None`: there is none (a moment that has passed, an expression
    /// with no date to come).
    pub fn next_after(&self, after: Timestamp, anchor: Timestamp) -> Option<Timestamp> {
        match self {
            Self::At(at) => (*at > after).then_some(*at),
            Self::Every(every) => {
                let every = i64::try_from(every.as_secs()).ok()?.max(1);
                let (after, anchor) = (after.as_second(), anchor.as_second());
                let steps = if after < anchor {
                    1
                } else {
                    (after - anchor).div_euclid(every).checked_add(1)?
                };
                Timestamp::from_second(anchor.checked_add(steps.checked_mul(every)?)?).ok()
            }
            Self::Cron(spec) => spec.next_after(after),
        }
    }
}

impl CronSpec {
    fn new(expr: &str, tz: Option<&str>) -> Result<Self, ScheduleError> {
        let expr = expr.split_whitespace().collect::<Vec<_>>().join(" ");
        let fields = expr.split(' ').filter(|f| !f.is_empty()).count();
        // Nicknames (`@daily`) are one field; croner reads them.
        if !(expr.starts_with('@') || fields == 5 || fields == 6) {
            return Err(ScheduleError::new(
                "cron",
                format!(
                    "{expr:?} has {fields} fields; use 5 (minute hour day-of-month month \
                     day-of-week, e.g. \"0 9 * * 1-5\") or 6 with seconds first"
                ),
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(&expr)
            .map_err(|e| {
                ScheduleError::new("cron", format!("{expr:?} is not a cron expression: {e}"))
            })?;
        let tz_name = tz.map(str::trim).filter(|t| !t.is_empty());
        let zone = match tz_name {
            Some(name) => TimeZone::get(name).map_err(|_| {
                ScheduleError::new(
                    "tz",
                    format!(
                        "{name:?} is not a known time zone; use an IANA name such as \
                         Europe/Berlin or America/New_York"
                    ),
                )
            })?,
            None => TimeZone::system(),
        };
        Ok(Self {
            expr,
            tz_name: tz_name.map(str::to_owned),
            tz: zone,
            cron,
        })
    }

    fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let local = after.to_zoned(self.tz.clone());
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.timestamp())
    }
}

impl fmt::Display for JobSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::At(at) => write!(f, "at {at}"),
            Self::Every(every) => write!(f, "every {}", format_interval(*every)),
            Self::Cron(spec) => match &spec.tz_name {
                Some(tz) => write!(f, "cron {} ({tz})", spec.expr),
                None => write!(f, "cron {}", spec.expr),
            },
        }
    }
}

/// An interval of a job (`every`, `jitter`, `at +…`) as [`parse_interval`] reads it, with an
/// error that does not offer `0 for off`, which a job's interval is not.
pub fn job_interval(text: &str) -> Result<Option<Duration>, String> {
    parse_interval(text).map_err(|_| {
        format!(
            "{:?} is not an interval; use a number with s, m, h or d (30m, 1h30m, 90s)",
            text.trim()
        )
    })
}

/// An interval as [`parse_interval`] reads it: `1h30m`, `90s` shown as `1m30s`, `2d`.
pub fn format_interval(every: Duration) -> String {
    let mut left = every.as_secs();
    if left == 0 {
        return "0s".to_owned();
    }
    let mut text = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if left >= size {
            text.push_str(&format!("{}{unit}", left / size));
            left %= size;
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn at_takes_a_moment_or_a_time_from_now_and_refuses_the_past() {
        let now = at("2026-11-28T02:30:00Z");
        assert_eq!(
            JobSchedule::at("+20m", now),
            Ok(JobSchedule::At(at("2026-11-28T02:50:00Z")))
        );
        assert_eq!(
            JobSchedule::at("2026-12-01T09:00:00+01:00", now),
            Ok(JobSchedule::At(at("2026-12-01T08:00:00Z")))
        );
        assert_eq!(
            JobSchedule::at("+1s", at("2026-11-28T02:30:00.75Z")),
            Ok(JobSchedule::At(at("2026-11-28T02:30:01Z")))
        );
        let fields: Vec<_> = ["2026-11-28T02:00:00Z", "+0", "tomorrow", "+5x"]
            .iter()
            .map(|text| JobSchedule::at(text, now).map(|_| ()).map_err(|e| e.field))
            .collect();
        assert_eq!(fields, [Err("at"); 4]);
        assert_eq!(
            JobSchedule::at("2026-11-28T02:00:00Z", now)
                .unwrap_err()
                .to_string(),
            "at: 2026-11-28T02:00:00Z is in the past (now is 2026-11-28T02:30:00Z)"
        );
    }

    #[test]
    fn every_is_at_least_a_second_and_counts_from_the_anchor() {
        assert_eq!(
            JobSchedule::every("0").unwrap_err().to_string(),
            "every: \"0\" is under 1 second; the shortest interval is 1s"
        );
        assert_eq!(
            JobSchedule::every("half an hour").unwrap_err().to_string(),
            "every: \"half an hour\" is not an interval; use a number with s, m, h or d (30m, 1h30m, 90s)"
        );
        let every = JobSchedule::every("30m").unwrap();
        let anchor = at("2026-11-28T02:07:00Z");
        assert_eq!(
            every.next_after(anchor, anchor),
            Some(at("2026-11-28T02:37:00Z"))
        );
        assert_eq!(
            every.next_after(at("2026-11-28T03:10:00Z"), anchor),
            Some(at("2026-11-28T03:37:00Z"))
        );
        // Strictly after: the time just run is not next again.
        assert_eq!(
            every.next_after(at("2026-11-28T03:37:00Z"), anchor),
            Some(at("2026-11-28T04:07:00Z"))
        );
        assert_eq!(every.to_string(), "every 30m");
    }

    #[test]
    fn cron_expressions_are_read_in_their_time_zone() {
        let now = at("2026-11-28T10:00:00Z");
        let berlin = JobSchedule::cron("0 9 * * *", Some("Europe/Berlin"), now).unwrap();
        // 09:00 in Berlin is 08:00 UTC in winter: today's has passed.
        assert_eq!(
            berlin.next_after(now, now),
            Some(at("2026-11-29T08:00:00Z"))
        );
        // ... and 07:00 UTC in summer.
        assert_eq!(
            berlin.next_after(at("2026-07-01T00:00:00Z"), now),
            Some(at("2026-07-01T07:00:00Z"))
        );
        // Six fields: seconds first.
        let seconds = JobSchedule::cron("*/10 * * * * *", Some("UTC"), now).unwrap();
        assert_eq!(
            seconds.next_after(now, now),
            Some(at("2026-11-28T10:00:10Z"))
        );
        assert_eq!(berlin.to_string(), "cron 0 9 * * * (Europe/Berlin)");
        assert_eq!(
            JobSchedule::from_stored(berlin.kind(), &berlin.spec(), berlin.tz()),
            Ok(berlin)
        );
    }

    #[test]
    fn bad_cron_input_names_its_field() {
        let now = at("2026-11-28T10:00:00Z");
        let errors: Vec<_> = [
            ("0 9 * *", Some("UTC")),
            ("0 25 * * *", Some("UTC")),
            ("0 0 30 2 *", Some("UTC")),
            ("0 9 * * *", Some("Mars/Olympus")),
            ("0 0 1 1 * 2030", Some("UTC")),
        ]
        .iter()
        .map(|(expr, tz)| JobSchedule::cron(expr, *tz, now).map_err(|e| e.field))
        .collect();
        assert_eq!(
            errors,
            [
                Err("cron"),
                Err("cron"),
                Err("cron"),
                Err("tz"),
                Err("cron")
            ]
        );
        assert_eq!(
            JobSchedule::cron("0 0 30 2 *", Some("UTC"), now)
                .unwrap_err()
                .to_string(),
            "cron: \"0 0 30 2 *\" never matches a date to come"
        );
    }

    #[test]
    fn intervals_are_shown_as_they_are_written() {
        let shown: Vec<String> = [1, 90, 1_800, 5_400, 86_400, 90_061]
            .into_iter()
            .map(|s| format_interval(Duration::from_secs(s)))
            .collect();
        assert_eq!(shown, ["1s", "1m30s", "30m", "1h30m", "1d", "1d1h1m1s"]);
    }

    #[test]
    fn a_moment_passed_has_no_next_time() {
        let now = at("2026-11-28T10:00:00Z");
        let once = JobSchedule::at("+1m", now).unwrap();
        assert_eq!(once.next_after(now, now), Some(at("2026-11-28T10:01:00Z")));
        assert_eq!(once.next_after(at("2026-11-28T10:01:00Z"), now), None);
        assert!(once.is_once());
    }
}

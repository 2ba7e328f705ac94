//! `agents.defaults.heartbeat` (and `agents.entries.<id>.heartbeat`): how often the gateway
//! looks at an agent's `HEARTBEAT.md`, when, and where a reply goes; and the schedule those
//! settings make, in one place for the gateway and `nanocrab status`.
//!
//! Ticks fall on multiples of `every` counted from 00:00 UTC (every `30m`: at :00 and :30), so
//! the next one follows from the settings alone; one outside `activeHours` is skipped. Times of
//! day are read in the window's time zone (an IANA name, or the machine's own), daylight
//! saving included.

use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatConfig {
    /// How often the agent looks at HEARTBEAT.md: `30m`, `1h`, `90s`, `1h30m`, `1d`, or a
    /// number of seconds; `0` turns the heartbeat off. While the file holds no task a tick
    /// asks no model.
    #[serde(default = "default_every")]
    pub every: String,
    /// Where a reply that needs the user's attention goes: `last` (the direct chat the user
    /// last wrote from, remembered across restarts), `none` (logged only), or
    /// `<channel>:<chatId>` such as `telegram:123456789`.
    #[serde(default = "default_target")]
    pub target: String,
    /// Ticks only between these times of day; absent: at all hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_hours: Option<ActiveHours>,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            every: default_every(),
            target: default_target(),
            active_hours: None,
        }
    }
}

fn default_every() -> String {
    "30m".to_owned()
}
fn default_target() -> String {
    "last".to_owned()
}

/// A daily window, such as 08:00 to 22:00; one that ends before it starts runs past midnight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveHours {
    /// `HH:MM`, 24-hour clock, included.
    pub start: String,
    /// `HH:MM`, not included; `24:00` for midnight at the end of the day.
    pub end: String,
    /// An IANA time zone such as `Europe/Berlin`; absent: the machine's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// Where an autonomous run's reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryTarget {
    /// The direct chat the user last wrote from.
    Last,
    /// Nowhere: the reply is logged.
    None,
    /// One chat of a channel.
    Chat { channel: String, chat_id: String },
}

impl DeliveryTarget {
    /// `last`, `none` or `<channel>:<chatId>`; the error says what is allowed.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "last" => Ok(Self::Last),
            "none" => Ok(Self::None),
            other => match other.split_once(':') {
                Some((channel, chat_id))
                    if !channel.is_empty()
                        && !chat_id.is_empty()
                        && !other.contains(char::is_whitespace) =>
                {
                    Ok(Self::Chat {
                        channel: channel.to_owned(),
                        chat_id: chat_id.to_owned(),
                    })
                }
                Some(_) | None => Err(format!(
                    "{text:?} is not a target; allowed: last, none, or <channel>:<chatId> (e.g. telegram:123456789)"
                )),
            },
        }
    }
}

/// The settings made usable: when to tick (`None`: off) and where replies go.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatPlan {
    pub schedule: Option<Schedule>,
    pub target: DeliveryTarget,
}

/// Ticks every `every`, inside `window` when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub every: Duration,
    pub window: Option<ActiveWindow>,
}

/// [`ActiveHours`] parsed: minutes of the day in a time zone.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveWindow {
    /// Minutes after midnight, 0 to 1439.
    start: u16,
    /// Minutes after midnight, 1 to 1440.
    end: u16,
    tz: TimeZone,
}

/// Windows skipped in a row before [`Schedule::next_after`] gives up: with ticks that never
/// land inside the window (every `7h` in a ten-minute window may take weeks) there is no next.
const MAX_WINDOWS_SKIPPED: usize = 1_000;

impl HeartbeatConfig {
    /// The plan these settings make; an error is the field below `heartbeat`
    /// (`activeHours.timezone`) and why.
    pub fn plan(&self) -> Result<HeartbeatPlan, (String, String)> {
        let target = DeliveryTarget::parse(&self.target).map_err(|e| ("target".to_owned(), e))?;
        let every = parse_interval(&self.every).map_err(|e| ("every".to_owned(), e))?;
        let window = match &self.active_hours {
            Some(hours) => Some(hours.window()?),
            None => None,
        };
        Ok(HeartbeatPlan {
            schedule: every.map(|every| Schedule { every, window }),
            target,
        })
    }
}

impl ActiveHours {
    fn window(&self) -> Result<ActiveWindow, (String, String)> {
        let start =
            minutes_of_day(&self.start, false).map_err(|e| ("activeHours.start".to_owned(), e))?;
        let end = minutes_of_day(&self.end, true).map_err(|e| ("activeHours.end".to_owned(), e))?;
        if start == end {
            return Err((
                "activeHours.end".to_owned(),
                "equals start, which leaves no time; leave activeHours out to tick at all hours"
                    .to_owned(),
            ));
        }
        let tz = match &self.timezone {
            Some(name) => TimeZone::get(name).map_err(|_| {
                (
                    "activeHours.timezone".to_owned(),
                    format!("{name:?} is not a known time zone; use an IANA name such as Europe/Berlin or America/New_York"),
                )
            })?,
            None => TimeZone::system(),
        };
        Ok(ActiveWindow { start, end, tz })
    }
}

/// `HH:MM` as minutes after midnight; `24:00` only where `end_of_day` allows it.
fn minutes_of_day(text: &str, end_of_day: bool) -> Result<u16, String> {
    let wrong =
        || format!("{text:?} is not a time of day; use HH:MM (24-hour clock), such as 08:00");
    let (hours, minutes) = text.trim().split_once(':').ok_or_else(wrong)?;
    let two_digits = |part: &str| part.len() == 2 && part.chars().all(|c| c.is_ascii_digit());
    if !(two_digits(hours) && two_digits(minutes)) {
        return Err(wrong());
    }
    let hours: u16 = hours.parse().map_err(|_| wrong())?;
    let minutes: u16 = minutes.parse().map_err(|_| wrong())?;
    match (hours, minutes) {
        (24, 0) if end_of_day => Ok(1440),
        (0..=23, 0..=59) => Ok(hours * 60 + minutes),
        _ => Err(wrong()),
    }
}

/// An interval such as `30m`, `1h30m`, `90s`, `1d` or a number of seconds; `None` for `0`
/// (off). Less than a second is an error.
pub fn parse_interval(text: &str) -> Result<Option<Duration>, String> {
    let wrong = || {
        format!(
            "{text:?} is not an interval; use a number with s, m, h or d (30m, 1h30m, 90s), or 0 for off"
        )
    };
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.is_empty() {
        return Err(wrong());
    }
    let mut seconds: u64 = 0;
    if compact.chars().all(|c| c.is_ascii_digit()) {
        seconds = compact.parse().map_err(|_| wrong())?;
    } else {
        let mut rest = compact.as_str();
        while !rest.is_empty() {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return Err(wrong());
            }
            let number: u64 = rest[..digits].parse().map_err(|_| wrong())?;
            rest = &rest[digits..];
            let unit = rest.chars().next().ok_or_else(wrong)?;
            let scale = match unit {
                's' => 1,
                'm' => 60,
                'h' => 3_600,
                'd' => 86_400,
                _ => return Err(wrong()),
            };
            rest = &rest[1..];
            seconds = number
                .checked_mul(scale)
                .and_then(|s| seconds.checked_add(s))
                .ok_or_else(wrong)?;
        }
    }
    Ok((seconds > 0).then(|| Duration::from_secs(seconds)))
}

impl ActiveWindow {
    /// Whether `at` falls inside the window.
    pub fn contains(&self, at: Timestamp) -> bool {
        let local = at.to_zoned(self.tz.clone());
        let minute =
            u16::from(local.hour().unsigned_abs()) * 60 + u16::from(local.minute().unsigned_abs());
        if self.start < self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }

    /// The first moment after `at` when the window opens.
    fn next_opening(&self, at: Timestamp) -> Option<Timestamp> {
        let local: Zoned = at.to_zoned(self.tz.clone());
        let (hour, minute) = (
            i8::try_from(self.start / 60).ok()?,
            i8::try_from(self.start % 60).ok()?,
        );
        let mut date = local.date();
        // Today's opening, or tomorrow's when today's has passed; a day whose opening time
        // does not exist (a daylight-saving gap) opens at the moment after the gap.
        for _ in 0..3 {
            let opening = date.at(hour, minute, 0, 0).to_zoned(self.tz.clone()).ok()?;
            if opening.timestamp() > at {
                return Some(opening.timestamp());
            }
            date = date.tomorrow().ok()?;
        }
        None
    }
}

impl Schedule {
    /// The first tick strictly after `now`; `None` when no tick falls inside the window.
    pub fn next_after(&self, now: Timestamp) -> Option<Timestamp> {
        let every = i64::try_from(self.every.as_secs().max(1)).ok()?;
        // The first multiple of `every` at or after `from`.
        let aligned = |from: i64| -> Option<Timestamp> {
            let ticks = from.checked_add(every - 1)?.div_euclid(every);
            Timestamp::from_second(ticks.checked_mul(every)?).ok()
        };
        let mut tick = aligned(now.as_second().checked_add(1)?)?;
        let Some(window) = &self.window else {
            return Some(tick);
        };
        for _ in 0..MAX_WINDOWS_SKIPPED {
            if window.contains(tick) {
                return Some(tick);
            }
            tick = aligned(window.next_opening(tick)?.as_second())?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn schedule(every: &str, hours: Option<(&str, &str, &str)>) -> Schedule {
        HeartbeatConfig {
            every: every.to_owned(),
            target: "last".to_owned(),
            active_hours: hours.map(|(start, end, tz)| ActiveHours {
                start: start.to_owned(),
                end: end.to_owned(),
                timezone: Some(tz.to_owned()),
            }),
        }
        .plan()
        .unwrap()
        .schedule
        .unwrap()
    }

    #[test]
    fn intervals_read_as_written_and_zero_is_off() {
        let cases = [
            ("30m", Ok(Some(1_800))),
            ("1h30m", Ok(Some(5_400))),
            ("1h 30m", Ok(Some(5_400))),
            ("90s", Ok(Some(90))),
            ("1d", Ok(Some(86_400))),
            ("45", Ok(Some(45))),
            ("0", Ok(None)),
            ("0m", Ok(None)),
            ("", Err(())),
            ("30", Ok(Some(30))),
            ("30x", Err(())),
            ("m30", Err(())),
            ("1.5h", Err(())),
            ("-5m", Err(())),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(text, _)| {
                parse_interval(text)
                    .map(|d| d.map(|d| d.as_secs()))
                    .map_err(|_| ())
            })
            .collect();
        let wanted: Vec<_> = cases.iter().map(|(_, w)| *w).collect();
        assert_eq!(got, wanted);
    }

    #[test]
    fn targets_are_last_none_or_a_chat() {
        assert_eq!(DeliveryTarget::parse("last"), Ok(DeliveryTarget::Last));
        assert_eq!(DeliveryTarget::parse("none"), Ok(DeliveryTarget::None));
        assert_eq!(
            DeliveryTarget::parse("telegram:-100123"),
            Ok(DeliveryTarget::Chat {
                channel: "telegram".to_owned(),
                chat_id: "-100123".to_owned()
            })
        );
        for wrong in ["telegram", ":1", "telegram:", "tele gram:1", "lastt"] {
            assert!(DeliveryTarget::parse(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn ticks_fall_on_multiples_of_the_interval() {
        let every_30m = schedule("30m", None);
        assert_eq!(
            every_30m.next_after(at("2026-11-22T10:07:12Z")),
            Some(at("2026-11-22T10:30:00Z"))
        );
        // Strictly after: a tick at the very moment is the one just fired.
        assert_eq!(
            every_30m.next_after(at("2026-11-22T10:30:00Z")),
            Some(at("2026-11-22T11:00:00Z"))
        );
    }

    #[test]
    fn ticks_outside_active_hours_are_skipped_in_the_windows_time_zone() {
        let office = schedule("30m", Some(("08:00", "22:00", "Europe/Berlin")));
        // 21:45 in Berlin (UTC+1 in November): the next ticks at 22:00 and 22:30 are outside;
        // the first inside is 08:00 the next morning.
        assert_eq!(
            office.next_after(at("2026-11-22T20:45:00Z")),
            Some(at("2026-11-23T07:00:00Z"))
        );
        assert_eq!(
            office.next_after(at("2026-11-23T07:00:00Z")),
            Some(at("2026-11-23T07:30:00Z"))
        );
        // Across midnight: 22:00 to 06:00 in New York (UTC-5).
        let night = schedule("1h", Some(("22:00", "06:00", "America/New_York")));
        assert_eq!(
            night.next_after(at("2026-11-22T12:00:00Z")),
            Some(at("2026-11-23T03:00:00Z"))
        );
        assert_eq!(
            night.next_after(at("2026-11-23T10:30:00Z")),
            Some(at("2026-11-24T03:00:00Z"))
        );
        // Summer time: 08:00 in Berlin is 06:00 UTC.
        assert_eq!(
            office.next_after(at("2026-07-01T03:00:00Z")),
            Some(at("2026-07-01T06:00:00Z"))
        );
    }

    #[test]
    fn bad_settings_name_their_field() {
        let plan = |every: &str, start: &str, end: &str, tz: &str| {
            HeartbeatConfig {
                every: every.to_owned(),
                target: "last".to_owned(),
                active_hours: Some(ActiveHours {
                    start: start.to_owned(),
                    end: end.to_owned(),
                    timezone: Some(tz.to_owned()),
                }),
            }
            .plan()
            .map(|_| ())
            .map_err(|(field, _)| field)
        };
        let fields = [
            plan("soon", "08:00", "22:00", "UTC"),
            plan("30m", "8am", "22:00", "UTC"),
            plan("30m", "08:00", "24:01", "UTC"),
            plan("30m", "24:00", "22:00", "UTC"),
            plan("30m", "08:00", "08:00", "UTC"),
            plan("30m", "08:00", "22:00", "Mars/Olympus"),
            plan("30m", "22:00", "24:00", "Europe/Berlin"),
        ];
        assert_eq!(
            fields,
            [
                Err("every".to_owned()),
                Err("activeHours.start".to_owned()),
                Err("activeHours.end".to_owned()),
                Err("activeHours.start".to_owned()),
                Err("activeHours.end".to_owned()),
                Err("activeHours.timezone".to_owned()),
                Ok(()),
            ]
        );
    }
}

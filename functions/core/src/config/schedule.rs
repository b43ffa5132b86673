//! A pool's schedule for `min_idle` and `stopped`: on which days and between which times
//! of day the pool keeps them (`{ days: [mon, tue], from: "08:00", to: "18:00",
//! utc_offset: "+01:00" }`); outside it the pool keeps none. A fixed UTC offset, not a
//! time zone's name: the functions carry no time-zone database, so a zone with daylight
//! saving time needs its offset changed twice a year (docs/configuration.md says so).

use serde::Deserialize;
use time::{OffsetDateTime, Time, UtcOffset, Weekday};

/// When a pool keeps its `min_idle` or `stopped` instances.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// The days, in the schedule's offset: `mon` … `sun`.
    pub days: Vec<String>,
    /// The time of day it starts, `HH:MM`.
    pub from: String,
    /// The time of day it ends, `HH:MM`, after `from` (on the same day).
    pub to: String,
    /// The offset from UTC the days and times are in, `+HH:MM` or `-HH:MM`; UTC unless set.
    #[serde(default)]
    pub utc_offset: Option<String>,
}

const DAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Monday),
    ("tue", Weekday::Tuesday),
    ("wed", Weekday::Wednesday),
    ("thu", Weekday::Thursday),
    ("fri", Weekday::Friday),
    ("sat", Weekday::Saturday),
    ("sun", Weekday::Sunday),
];

impl Schedule {
    /// Whether `now` is inside the schedule. A schedule with a problem
    /// ([`Schedule::problems`]) is never on, so a bad one keeps nothing rather than
    /// everything.
    pub fn is_on(&self, now: OffsetDateTime) -> bool {
        let (Some(from), Some(to), Some(offset)) = (
            time_of_day(&self.from),
            time_of_day(&self.to),
            self.offset(),
        ) else {
            return false;
        };
        let local = now.to_offset(offset);
        let today = local.weekday();
        self.days.iter().any(|day| weekday(day) == Some(today))
            && from <= local.time()
            && local.time() < to
    }

    fn offset(&self) -> Option<UtcOffset> {
        self.utc_offset
            .as_deref()
            .map_or(Some(UtcOffset::UTC), utc_offset)
    }

    /// Problems of the schedule, as (field within it, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if self.days.is_empty() {
            problems.push(("days", "at least one day".to_owned()));
        }
        if let Some(bad) = self.days.iter().find(|day| weekday(day).is_none()) {
            let message = format!("{bad:?} is not a day: use mon, tue, wed, thu, fri, sat, sun");
            problems.push(("days", message));
        }
        let from = time_of_day(&self.from);
        let to = time_of_day(&self.to);
        for (field, text, parsed) in [("from", &self.from, from), ("to", &self.to, to)] {
            if parsed.is_none() {
                problems.push((
                    field,
                    format!("{text:?} is not a time of day HH:MM (00:00-23:59)"),
                ));
            }
        }
        if let (Some(from), Some(to)) = (from, to) {
            if to <= from {
                let message = format!(
                    "{:?} is not after from ({:?}): a schedule ends on the day it starts",
                    self.to, self.from
                );
                problems.push(("to", message));
            }
        }
        if let Some(text) = &self.utc_offset {
            if utc_offset(text).is_none() {
                let message =
                    format!("{text:?} is not an offset +HH:MM or -HH:MM (-23:59 to +23:59)");
                problems.push(("utc_offset", message));
            }
        }
        problems
    }
}

/// The amount a schedule allows at `now`: `count` when there is no schedule or it is on,
/// else none.
pub fn scheduled(count: u32, schedule: Option<&Schedule>, now: OffsetDateTime) -> u32 {
    match schedule {
        Some(schedule) if !schedule.is_on(now) => 0,
        _ => count,
    }
}

fn weekday(name: &str) -> Option<Weekday> {
    DAYS.iter()
        .find(|(short, _)| short.eq_ignore_ascii_case(name))
        .map(|(_, day)| *day)
}

/// `HH:MM`, two digits each.
fn time_of_day(text: &str) -> Option<Time> {
    let (hours, minutes) = two_numbers(text)?;
    Time::from_hms(hours, minutes, 0).ok()
}

/// `+HH:MM` or `-HH:MM`.
fn utc_offset(text: &str) -> Option<UtcOffset> {
    let sign: i8 = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (hours, minutes) = two_numbers(&text[1..])?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    UtcOffset::from_hms(sign * hours as i8, sign * minutes as i8, 0).ok()
}

fn two_numbers(text: &str) -> Option<(u8, u8)> {
    let (hours, minutes) = text.split_once(':')?;
    let number = |part: &str| {
        (part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<u8>().ok())
            .flatten()
    };
    Some((number(hours)?, number(minutes)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn office_hours() -> Schedule {
        Schedule {
            days: ["mon", "tue", "wed", "thu", "fri"]
                .map(String::from)
                .to_vec(),
            from: "08:00".into(),
            to: "18:00".into(),
            utc_offset: Some("+01:00".into()),
        }
    }

    #[test]
    fn a_schedule_is_on_inside_its_days_and_hours_in_its_offset() {
        let schedule = office_hours();
        // Friday 2026-11-27: 07:00 UTC is 08:00 at +01:00.
        assert!(schedule.is_on(datetime!(2026-11-27 07:00 UTC)));
        assert!(!schedule.is_on(datetime!(2026-11-27 06:59 UTC)));
        assert!(schedule.is_on(datetime!(2026-11-27 16:59 UTC)));
        assert!(!schedule.is_on(datetime!(2026-11-27 17:00 UTC)));
        // Saturday.
        assert!(!schedule.is_on(datetime!(2026-11-28 10:00 UTC)));
        // Sunday 23:30 UTC is Monday 00:30 at +01:00, before 08:00.
        assert!(!schedule.is_on(datetime!(2026-11-29 23:30 UTC)));
    }

    #[test]
    fn the_day_is_the_offsets_day() {
        let late = Schedule {
            days: vec!["sat".into()],
            from: "00:00".into(),
            to: "02:00".into(),
            utc_offset: Some("+02:00".into()),
        };
        // Friday 23:00 UTC is Saturday 01:00 at +02:00.
        assert!(late.is_on(datetime!(2026-11-27 23:00 UTC)));
    }

    #[test]
    fn without_a_schedule_the_count_holds_always_and_outside_one_it_is_none() {
        let saturday = datetime!(2026-11-28 10:00 UTC);
        assert_eq!(scheduled(3, None, saturday), 3);
        assert_eq!(scheduled(3, Some(&office_hours()), saturday), 0);
        assert_eq!(
            scheduled(3, Some(&office_hours()), datetime!(2026-11-27 10:00 UTC)),
            3
        );
    }

    #[test]
    fn each_bad_part_is_named() {
        let bad = Schedule {
            days: vec!["monday".into()],
            from: "8:00".into(),
            to: "24:00".into(),
            utc_offset: Some("Europe/Berlin".into()),
        };
        let fields: Vec<_> = bad.problems().into_iter().map(|(field, _)| field).collect();
        assert_eq!(fields, ["days", "from", "to", "utc_offset"]);
        assert!(!bad.is_on(datetime!(2026-11-27 10:00 UTC)));
        let backwards = Schedule {
            from: "18:00".into(),
            to: "08:00".into(),
            ..office_hours()
        };
        assert_eq!(backwards.problems()[0].0, "to");
        assert!(office_hours().problems().is_empty());
    }
}

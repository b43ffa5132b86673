//! The ranges every duration and number of the configuration must be in, so that no
//! value that parses can later overflow a timestamp or a counter (a `deleted_ttl` of
//! 3,000,000 days would put the record's expiry past the year 9999).
//!
//! Durations are written `90s`, `20m`, `1h` or `7d`; [`parse_duration`] reads them and
//! refuses what does not fit in a `u64` of seconds, and [`check_duration`] /
//! [`check_number`] give the message, naming the allowed range, that validation puts
//! under the field's name.

use std::time::Duration;

const MINUTE: u64 = 60;
const HOUR: u64 = 3600;
const DAY: u64 = 86400;

/// The allowed range of one duration field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationRange {
    pub min: Duration,
    pub max: Duration,
}

const fn secs(min: u64, max: u64) -> DurationRange {
    DurationRange {
        min: Duration::from_secs(min),
        max: Duration::from_secs(max),
    }
}

/// A pool's `bootstrap_timeout`: an instance has at most a day to come online.
pub const BOOTSTRAP_TIMEOUT: DurationRange = secs(1, DAY);
/// A pool's `idle_timeout`.
pub const IDLE_TIMEOUT: DurationRange = secs(1, 30 * DAY);
/// A pool's `stopped_max_age`: a stopped instance is replaced within a month at most.
pub const STOPPED_MAX_AGE: DurationRange = secs(HOUR, 30 * DAY);
/// `reaper.deleted_ttl`: how long a deleted record is kept, at most ten years.
pub const DELETED_TTL: DurationRange = secs(1, 3650 * DAY);
/// `reaper.stuck_deleting`.
pub const STUCK_DELETING: DurationRange = secs(1, DAY);
/// `reaper.orphan_grace`: at least twice the creation lease (60 s), so a creation that
/// died between launch and record is resumed or given up before its instance is taken
/// for an orphan.
pub const ORPHAN_GRACE: DurationRange = secs(2 * MINUTE, DAY);
/// `ephemera local --reaper-interval`.
pub const REAPER_INTERVAL: DurationRange = secs(1, DAY);

/// A pool's `max_runners`.
pub const MAX_RUNNERS: std::ops::RangeInclusive<u64> = 1..=100_000;

/// A pool's `max_vcpus`.
pub const MAX_VCPUS: std::ops::RangeInclusive<u64> = 1..=10_000_000;

/// Parses `90s`, `20m`, `1h`, `7d` (a whole number and a unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit (use s, m, h or d)"))?;
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(format!("{text:?} does not start with a whole number"));
    }
    let unit_seconds = match unit {
        "s" => 1,
        "m" => MINUTE,
        "h" => HOUR,
        "d" => DAY,
        _ => {
            return Err(format!(
                "{text:?} has unknown unit {unit:?} (use s, m, h or d)"
            ))
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_seconds))
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is far too long"))
}

/// Parses a duration and checks it against `range` (for command-line options).
pub fn parse_duration_in(text: &str, range: DurationRange) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    match check_duration(duration, range) {
        None => Ok(duration),
        Some(problem) => Err(format!("{text}: {problem}")),
    }
}

/// Why `duration` is outside `range`, if it is.
pub fn check_duration(duration: Duration, range: DurationRange) -> Option<String> {
    (duration < range.min || duration > range.max).then(|| {
        format!(
            "must be between {} and {}, not {}",
            format_duration(range.min),
            format_duration(range.max),
            format_duration(duration)
        )
    })
}

/// Why `value` is outside `range`, if it is.
pub fn check_number(value: u64, range: std::ops::RangeInclusive<u64>) -> Option<String> {
    if value < *range.start() {
        Some(format!("must be at least {}", range.start()))
    } else if value > *range.end() {
        Some(format!("must be at most {}, not {value}", range.end()))
    } else {
        None
    }
}

/// A duration in the configuration's own notation, in the largest unit that divides it
/// (`90s`, `20m`, `7d`).
pub fn format_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (value, unit) = [(DAY, "d"), (HOUR, "h"), (MINUTE, "m")]
        .into_iter()
        .find(|(size, _)| seconds > 0 && seconds.is_multiple_of(*size))
        .map_or((seconds, "s"), |(size, unit)| (seconds / size, unit));
    format!("{value}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_overflow_is_an_error() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 7d "), Ok(Duration::from_secs(7 * DAY)));
        let err = parse_duration("300000000000000d").expect_err("overflows u64 seconds");
        assert!(err.contains("far too long"), "{err}");
        let err = parse_duration("99999999999999999999999s").expect_err("not a u64");
        assert!(err.contains("far too long"), "{err}");
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1.5h").is_err());
    }

    #[test]
    fn ranges_name_their_bounds_in_the_files_notation() {
        let problem = check_duration(Duration::from_secs(3_000_000 * DAY), DELETED_TTL);
        assert_eq!(
            problem.as_deref(),
            Some("must be between 1s and 3650d, not 3000000d")
        );
        assert_eq!(check_duration(Duration::from_secs(DAY), DELETED_TTL), None);
        let zero = check_duration(Duration::ZERO, REAPER_INTERVAL);
        assert_eq!(zero.as_deref(), Some("must be between 1s and 1d, not 0s"));
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_secs(1200)), "20m");
        assert_eq!(
            check_number(0, MAX_RUNNERS).as_deref(),
            Some("must be at least 1")
        );
        let many = check_number(200_000, MAX_RUNNERS);
        assert_eq!(many.as_deref(), Some("must be at most 100000, not 200000"));
    }

    #[test]
    fn command_line_durations_are_checked_against_their_range() {
        let err = parse_duration_in("0s", REAPER_INTERVAL).expect_err("zero");
        assert_eq!(err, "0s: must be between 1s and 1d, not 0s");
        assert_eq!(
            parse_duration_in("10s", REAPER_INTERVAL),
            Ok(Duration::from_secs(10))
        );
    }
}

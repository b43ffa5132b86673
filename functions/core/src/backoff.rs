//! Exponential backoff for deletions that failed at the provider.

use std::time::Duration;

/// The first retry waits this long.
pub const FIRST_DELAY: Duration = Duration::from_secs(1);
/// No retry waits longer than this.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// How long to wait before attempt number `attempts + 1`, after `attempts` failures:
/// 1 s, doubling, at most 5 min.
pub fn delay_after(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(16);
    FIRST_DELAY.saturating_mul(1 << exponent).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_doubles_from_one_second_and_caps_at_five_minutes() {
        let secs: Vec<u64> = (1..=11).map(|n| delay_after(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(delay_after(1000), MAX_DELAY);
        assert_eq!(delay_after(0), FIRST_DELAY);
    }
}

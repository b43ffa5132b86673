//! The time a handler stamps on what it writes.
//!
//! A handler is given `now` when it starts; a [`Clock`] moves that on by the monotonic
//! time elapsed since, so each write carries the moment it happened (a launch takes a
//! while), while tests that pause tokio's time still see exact, repeatable stamps.

use time::OffsetDateTime;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: OffsetDateTime,
    started: Instant,
}

impl Clock {
    /// A clock that reads `base` now.
    pub fn starting_at(base: OffsetDateTime) -> Clock {
        Clock {
            base,
            started: Instant::now(),
        }
    }

    /// `base` plus the time elapsed since the clock was made.
    pub fn now(&self) -> OffsetDateTime {
        self.base + self.started.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn clock_moves_on_with_monotonic_time() {
        let base = time::macros::datetime!(2026-11-22 10:00:00 UTC);
        let clock = Clock::starting_at(base);
        assert_eq!(clock.now(), base);
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(clock.now(), base + Duration::from_millis(1500));
    }
}

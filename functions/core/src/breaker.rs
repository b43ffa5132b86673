//! The spot circuit breaker: a pool whose spot runners are interrupted more than
//! `spot_breaker.interruptions` times within `spot_breaker.within` launches on-demand for
//! `spot_breaker.cool_down`, then tries spot again. While EC2 reclaims a zone's spot
//! capacity, a job re-queued on spot is likely to be interrupted again; on-demand costs
//! more for a while and loses no more jobs.
//!
//! The reaper counts each interrupted instance once (EventBridge may deliver an event
//! twice) in the pool's [`SpotBreakerState`], kept by a
//! [`SpotBreakerStore`](crate::ports::SpotBreakerStore) (an item of the runners table),
//! and opens the breaker; the scaler reads the state before a spot launch of the pool
//! and asks for on-demand while it is open. The state is a record (it lives in
//! [`crate::model`]); what it means is decided here.

use crate::config::SpotBreaker;
pub use crate::model::SpotBreakerState;
use time::OffsetDateTime;

impl SpotBreakerState {
    /// Interruptions reported within `breaker.within` before `now`.
    pub fn recent(&self, breaker: &SpotBreaker, now: OffsetDateTime) -> usize {
        let since = now - breaker.within;
        self.interrupted.values().filter(|at| **at > since).count()
    }

    /// Whether spot launches are paused at `now`.
    pub fn paused(&self, now: OffsetDateTime) -> bool {
        self.paused_until.is_some_and(|until| until > now)
    }

    /// When the breaker should stay open until, if this state opens it now: more recent
    /// interruptions than the pool allows, and not open already.
    pub fn opens(&self, breaker: &SpotBreaker, now: OffsetDateTime) -> Option<OffsetDateTime> {
        let over = breaker.enabled() && self.recent(breaker, now) > breaker.interruptions as usize;
        (over && !self.paused(now)).then(|| now + breaker.cool_down)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-01-01 12:00 UTC);

    fn state(minutes_ago: &[i64]) -> SpotBreakerState {
        SpotBreakerState {
            interrupted: minutes_ago
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("i-{i}"), NOW - time::Duration::minutes(*m)))
                .collect(),
            paused_until: None,
        }
    }

    #[test]
    fn more_than_the_allowed_interruptions_within_the_window_open_it_for_the_cool_down() {
        let breaker = SpotBreaker::default();
        assert_eq!(
            state(&[0, 1, 2, 3, 4]).opens(&breaker, NOW),
            None,
            "5 is allowed"
        );
        let six = state(&[0, 1, 2, 3, 4, 9]);
        assert_eq!(
            six.opens(&breaker, NOW),
            Some(NOW + time::Duration::minutes(30))
        );
        // Spread over more than the window, they do not.
        assert_eq!(state(&[0, 1, 2, 3, 4, 11]).opens(&breaker, NOW), None);
        // Open already: nothing new; over once the cool-down passed.
        let open = SpotBreakerState {
            paused_until: Some(NOW + time::Duration::minutes(1)),
            ..six.clone()
        };
        assert!(open.paused(NOW));
        assert_eq!(open.opens(&breaker, NOW), None);
        assert!(!open.paused(NOW + time::Duration::minutes(1)));
        // Switched off.
        let off = SpotBreaker {
            interruptions: 0,
            ..breaker
        };
        assert_eq!(six.opens(&off, NOW), None);
        let tight = SpotBreaker {
            interruptions: 1,
            within: Duration::from_secs(60),
            cool_down: Duration::from_secs(120),
        };
        assert_eq!(
            state(&[0, 0]).opens(&tight, NOW),
            Some(NOW + time::Duration::minutes(2))
        );
    }
}

//! A pool's spot circuit breaker (`spot_breaker:`): when more than `interruptions` of its
//! spot runners are interrupted within `within`, its launches go on-demand for
//! `cool_down` ([`crate::breaker`]).

use super::duration;
use serde::Deserialize;
use std::time::Duration;

/// When a pool stops buying spot for a while.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SpotBreaker {
    /// More interruptions than this within `within` open the breaker; 0 never does.
    #[serde(default = "default_interruptions")]
    pub interruptions: u32,
    #[serde(default = "default_within", deserialize_with = "duration")]
    pub within: Duration,
    /// How long launches stay on-demand once it opened.
    #[serde(default = "default_cool_down", deserialize_with = "duration")]
    pub cool_down: Duration,
}

impl Default for SpotBreaker {
    fn default() -> Self {
        SpotBreaker {
            interruptions: default_interruptions(),
            within: default_within(),
            cool_down: default_cool_down(),
        }
    }
}

fn default_interruptions() -> u32 {
    5
}
fn default_within() -> Duration {
    Duration::from_secs(10 * 60)
}
fn default_cool_down() -> Duration {
    Duration::from_secs(30 * 60)
}

impl SpotBreaker {
    /// Whether it can open at all.
    pub fn enabled(&self) -> bool {
        self.interruptions > 0
    }

    /// What `config validate` refuses, by field under `spot_breaker`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if self.enabled() && self.within.is_zero() {
            problems.push(("spot_breaker.within", "must be more than 0s".to_owned()));
        }
        if self.enabled() && self.cool_down.is_zero() {
            problems.push(("spot_breaker.cool_down", "must be more than 0s".to_owned()));
        }
        problems
    }
}

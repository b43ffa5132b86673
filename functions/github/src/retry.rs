//! Retrying throttled and failed calls: exponential backoff with full jitter, inside a
//! time budget.
//!
//! A Lambda invocation cannot wait for an hour-long rate-limit reset, so a call never
//! sleeps past its budget: when the next wait (or GitHub's `retry-after`) would end
//! beyond it, the error is returned at once and the caller decides (the scaler lets the
//! SQS message come back; the reaper tries next minute).

use ephemera_core::ports::ForgeError;
use rand::Rng;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;
use tracing::debug;

/// How hard to retry one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The backoff ceiling before the first retry; it doubles with each retry.
    pub base_delay: Duration,
    /// Total time one call may take, waits included.
    pub budget: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(200),
            budget: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// How long to wait before retrying after `failures` failed attempts ending in
    /// `error`, `elapsed` into the call; `None` to give up. `jitter` draws a wait
    /// uniformly from zero to the ceiling it is given.
    pub(crate) fn wait_before_retry(
        &self,
        error: &ForgeError,
        failures: u32,
        elapsed: Duration,
        jitter: impl FnOnce(Duration) -> Duration,
    ) -> Option<Duration> {
        if failures >= self.max_attempts {
            return None;
        }
        let wait = match error {
            ForgeError::Throttled {
                retry_after: Some(wait),
            } => *wait,
            ForgeError::Throttled { retry_after: None } | ForgeError::Transient(_) => {
                let exponent = failures.saturating_sub(1).min(20);
                jitter(self.base_delay.saturating_mul(1 << exponent))
            }
            _ => return None,
        };
        (elapsed.saturating_add(wait) <= self.budget).then_some(wait)
    }

    /// Runs `attempt` until it succeeds, fails for good, or the policy gives up.
    pub(crate) async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, ForgeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ForgeError>>,
    {
        let started = Instant::now();
        let mut failures = 0;
        loop {
            let error = match attempt().await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            failures += 1;
            let Some(wait) =
                self.wait_before_retry(&error, failures, started.elapsed(), full_jitter)
            else {
                return Err(error);
            };
            debug!(failures, wait_ms = wait.as_millis() as u64, error = %error, "retrying GitHub call");
            tokio::time::sleep(wait).await;
        }
    }
}

fn full_jitter(ceiling: Duration) -> Duration {
    let millis = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::rng().random_range(0..=millis))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn transient() -> ForgeError {
        ForgeError::Transient("connection reset".into())
    }

    fn policy(max_attempts: u32, base_ms: u64, budget_s: u64) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            base_delay: Duration::from_millis(base_ms),
            budget: Duration::from_secs(budget_s),
        }
    }

    #[test]
    fn backoff_ceiling_doubles_from_base_delay() {
        let p = policy(10, 200, 1000);
        let ceilings: Vec<u128> = (1..=4)
            .filter_map(|n| p.wait_before_retry(&transient(), n, Duration::ZERO, |c| c))
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(ceilings, [200, 400, 800, 1600]);
    }

    #[test]
    fn gives_up_after_max_attempts() {
        let p = RetryPolicy::default();
        assert!(p
            .wait_before_retry(&transient(), 3, Duration::ZERO, |c| c)
            .is_some());
        assert!(p
            .wait_before_retry(&transient(), 4, Duration::ZERO, |c| c)
            .is_none());
    }

    #[test]
    fn retry_after_past_the_budget_is_returned_at_once() {
        let p = RetryPolicy::default();
        let slow = ForgeError::Throttled {
            retry_after: Some(Duration::from_secs(60)),
        };
        assert!(p
            .wait_before_retry(&slow, 1, Duration::ZERO, |c| c)
            .is_none());
        let soon = ForgeError::Throttled {
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(
            p.wait_before_retry(&soon, 1, Duration::ZERO, |c| c),
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn refusals_are_not_retried() {
        let p = RetryPolicy::default();
        for error in [
            ForgeError::Unauthorized,
            ForgeError::AlreadyExists("r".into()),
            ForgeError::Rejected {
                status: 400,
                message: String::new(),
            },
        ] {
            assert!(p
                .wait_before_retry(&error, 1, Duration::ZERO, |c| c)
                .is_none());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retry_stops_at_the_deadline() {
        let p = policy(1000, 1000, 10);
        let attempts = AtomicU32::new(0);
        let started = Instant::now();
        let result: Result<(), _> = p
            .run(|| async {
                attempts.fetch_add(1, Ordering::SeqCst);
                Err(transient())
            })
            .await;
        assert!(matches!(result, Err(ForgeError::Transient(_))));
        assert!(attempts.load(Ordering::SeqCst) > 1);
        assert!(started.elapsed() <= Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn throttled_call_that_must_wait_too_long_fails_without_sleeping() {
        let p = RetryPolicy::default();
        let attempts = AtomicU32::new(0);
        let started = Instant::now();
        let result: Result<(), _> = p
            .run(|| async {
                attempts.fetch_add(1, Ordering::SeqCst);
                Err(ForgeError::Throttled {
                    retry_after: Some(Duration::from_secs(3600)),
                })
            })
            .await;
        assert!(matches!(result, Err(ForgeError::Throttled { .. })));
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failure_then_success_is_retried() {
        let attempts = AtomicU32::new(0);
        let result = RetryPolicy::default()
            .run(|| async {
                match attempts.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(transient()),
                    _ => Ok(7),
                }
            })
            .await;
        assert_eq!(result.ok(), Some(7));
    }
}

//! Pacing of GitHub runner registrations, so a burst spends the App's quota evenly
//! instead of running into it.
//!
//! A registration (`generate-jitconfig`) spends two of GitHub's limits at once, and
//! nothing else ephemera calls spends them:
//! - the installation's primary bucket `actions_runner_registration` (10,000 an hour,
//!   apart from the `core` bucket of 5,000 an hour that every other call spends: token
//!   lookups, job lookups, runner lists and deletions);
//! - GitHub's secondary per-endpoint limit of 900 points a minute, at 5 points a POST.
//!
//! GitHub answers a burst above the minute's points with a secondary rate limit and a
//! `retry-after` of about a minute, and a spent hour with a wait until the bucket's
//! reset; both are longer than a scaler invocation may wait. Each scaler process holds
//! one [`RegistrationPace`]: a token bucket holding its share of the App's allowance (the
//! allowance divided by the number of scaler invocations that may run at once, so
//! together they stay under it), and starting no more than its share of the hour's
//! budget in any hour. A
//! queued job takes a registration before its instance is launched: at once, after a
//! short wait, or, when the wait would be long, never in this invocation — the job goes
//! back to the queue to come back when its turn is due, and no instance waits on GitHub
//! meanwhile. A throttled registration (the budget spent, or other callers sharing the
//! limit) pauses the pace until GitHub's `retry-after`.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

mod apps;
pub use apps::AppPaces;

/// Registrations a minute GitHub allows an App on one endpoint: 900 points a minute, at
/// 5 points for a request other than a GET (docs.github.com, "Rate limits for the REST
/// API", secondary rate limits).
pub const GITHUB_REGISTRATIONS_PER_MINUTE: f64 = 180.0;

/// Registrations an hour in an installation's `actions_runner_registration` bucket
/// (`GET /rate_limit` lists the bucket apart from `core`; the figure is
/// terraform-aws-github-runner's rate-limit guide's, docs/rate-limits-and-tuning.md).
pub const GITHUB_REGISTRATIONS_PER_HOUR: f64 = 10_000.0;

/// How long after its turn a burst's first registration reaches GitHub: the claim and
/// EC2's answer to the batch's launch (CreateFleet: seconds). GitHub's bucket is full
/// when a burst starts, so what it would refill until the first registrations arrive is
/// lost to its cap, while the processes' shares count it as spent later. Without this
/// much of the rate held back from the burst, the steady pace that follows runs a hair
/// ahead of GitHub's bucket, and now and then a registration meets a secondary limit and
/// its process pauses for GitHub's minute. Later registrations may lag their turn by
/// any amount: GitHub's bucket is not full then, and a late call only leaves it fuller.
pub const REGISTRATION_LAG: Duration = Duration::from_secs(5);

const HOUR: Duration = Duration::from_secs(3600);

/// The registrations one scaler process may start: `per_second` on average, `burst` at
/// once after a quiet spell.
#[derive(Debug)]
pub struct RegistrationPace {
    per_second: f64,
    burst: f64,
    /// Registrations in any hour at most (this process's share of the bucket's hour).
    per_hour: Option<usize>,
    state: Mutex<PaceState>,
}

#[derive(Debug)]
struct PaceState {
    /// Registrations available at `at`; below zero when some are reserved ahead.
    tokens: f64,
    at: Instant,
    /// No registration before this (GitHub said to wait).
    paused_until: Option<Instant>,
    /// When each registration of the last hour was due to start, in order.
    started: VecDeque<Instant>,
}

impl RegistrationPace {
    /// `per_minute` registrations a minute and GitHub's
    /// [`GITHUB_REGISTRATIONS_PER_HOUR`] for the whole App, shared by `processes` scaler
    /// invocations running at once ([`RegistrationPace::shared_within`]).
    pub fn shared(per_minute: f64, processes: u32) -> RegistrationPace {
        RegistrationPace::shared_within(per_minute, GITHUB_REGISTRATIONS_PER_HOUR, processes)
    }

    /// `per_minute` registrations a minute and `per_hour` an hour for the whole App,
    /// shared by `processes` scaler invocations running at once. The burst is a
    /// process's share of one minute's allowance (GitHub counts points per minute) less
    /// what the share would refill within [`REGISTRATION_LAG`], at the minute's rate;
    /// and in any hour a process starts no more than its share of `per_hour`. Any hour:
    /// GitHub's window starts at its first call, which no process knows, so the hour a
    /// process counts slides, and each of GitHub's windows holds at most its share.
    pub fn shared_within(per_minute: f64, per_hour: f64, processes: u32) -> RegistrationPace {
        let processes = f64::from(processes.max(1));
        let share = per_minute / processes;
        let burst = share - share / 60.0 * REGISTRATION_LAG.as_secs_f64();
        let mut pace = RegistrationPace::new(share / 60.0, burst);
        pace.per_hour = Some(((per_hour / processes).floor() as usize).max(1));
        pace
    }

    /// The pace of a scaler invocation from its environment's texts: the App's rate
    /// (`EPHEMERA_REGISTRATIONS_PER_MINUTE`, GitHub's limit when unset) shared by the
    /// invocations that may run at once (`EPHEMERA_SCALER_CONCURRENCY`, the event
    /// source's maximum concurrency; 1 when unset). An error names the variable.
    pub fn from_environment(
        per_minute: Option<&str>,
        concurrency: Option<&str>,
    ) -> Result<RegistrationPace, String> {
        let (per_minute, processes) = settings_from_environment(per_minute, concurrency)?;
        Ok(RegistrationPace::shared(per_minute, processes))
    }

    /// `per_second` on average, `burst` at once; the bucket starts full.
    pub fn new(per_second: f64, burst: f64) -> RegistrationPace {
        let burst = burst.max(1.0);
        RegistrationPace {
            per_second: per_second.max(f64::MIN_POSITIVE),
            burst,
            per_hour: None,
            state: Mutex::new(PaceState {
                tokens: burst,
                at: Instant::now(),
                paused_until: None,
                started: VecDeque::new(),
            }),
        }
    }

    /// Takes one registration if it is due within `max_wait`, and returns how long to
    /// wait before starting it; `Err` with the wait it would need otherwise (nothing is
    /// taken then).
    pub fn take(&self, max_wait: Duration) -> Result<Duration, Duration> {
        let mut state = self.lock();
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(state.at).as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.per_second).min(self.burst);
        state.at = now;
        let paused = state
            .paused_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        let owed = (1.0 - state.tokens).max(0.0);
        let wait = paused
            .max(Duration::from_secs_f64(owed / self.per_second))
            .max(self.hour_wait(&mut state, now));
        if wait > max_wait {
            return Err(wait);
        }
        state.tokens -= 1.0;
        if self.per_hour.is_some() {
            let start = now + wait;
            let at = state.started.partition_point(|t| *t <= start);
            state.started.insert(at, start);
        }
        Ok(wait)
    }

    /// How long until a registration fits in the hour: until the one that would be
    /// `per_hour` before it is an hour old.
    fn hour_wait(&self, state: &mut PaceState, now: Instant) -> Duration {
        let Some(per_hour) = self.per_hour else {
            return Duration::ZERO;
        };
        while state.started.front().is_some_and(|t| *t + HOUR <= now) {
            state.started.pop_front();
        }
        match state.started.len().checked_sub(per_hour) {
            Some(index) => (state.started[index] + HOUR).saturating_duration_since(now),
            None => Duration::ZERO,
        }
    }

    /// Returns a registration taken by a job that turned out to need none (another
    /// runner took it, or its runner was already up): the next job may have it.
    pub fn give_back(&self) {
        let mut state = self.lock();
        state.tokens = (state.tokens + 1.0).min(self.burst);
        state.started.pop_back();
    }

    /// GitHub refused a registration: none starts before `for_at_least` has passed.
    pub fn pause(&self, for_at_least: Duration) {
        let until = Instant::now() + for_at_least;
        let mut state = self.lock();
        if state.paused_until.is_none_or(|current| current < until) {
            state.paused_until = Some(until);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PaceState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// An App's registrations a minute (`EPHEMERA_REGISTRATIONS_PER_MINUTE`, GitHub's limit
/// when unset) and the scaler invocations that share them (`EPHEMERA_SCALER_CONCURRENCY`,
/// 1 when unset), from their texts; an error names the variable.
pub(crate) fn settings_from_environment(
    per_minute: Option<&str>,
    concurrency: Option<&str>,
) -> Result<(f64, u32), String> {
    let per_minute = match per_minute {
        None => GITHUB_REGISTRATIONS_PER_MINUTE,
        Some(text) => match text.trim().parse::<f64>() {
            Ok(value) if value >= 1.0 && value.is_finite() => value,
            _ => {
                return Err(format!(
                "EPHEMERA_REGISTRATIONS_PER_MINUTE must be a number of at least 1, not {text:?}"
            ))
            }
        },
    };
    let processes = match concurrency {
        None => 1,
        Some(text) => match text.trim().parse::<u32>() {
            Ok(value) if value >= 1 => value,
            _ => {
                return Err(format!(
                "EPHEMERA_SCALER_CONCURRENCY must be a whole number of at least 1, not {text:?}"
            ))
            }
        },
    };
    Ok((per_minute, processes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_then_the_rest_at_the_rate() {
        let pace = RegistrationPace::new(2.0, 3.0);
        for _ in 0..3 {
            assert_eq!(pace.take(LONG), Ok(Duration::ZERO));
        }
        assert_eq!(pace.take(LONG), Ok(Duration::from_millis(500)));
        assert_eq!(pace.take(LONG), Ok(Duration::from_millis(1000)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_beyond_the_bound_takes_nothing() {
        let pace = RegistrationPace::new(1.0, 1.0);
        assert_eq!(pace.take(LONG), Ok(Duration::ZERO));
        assert_eq!(pace.take(Duration::ZERO), Err(Duration::from_secs(1)));
        // Refused takes reserve nothing: the next is still one second away.
        assert_eq!(pace.take(LONG), Ok(Duration::from_secs(1)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_registration_given_back_goes_to_the_next_job() {
        let pace = RegistrationPace::new(1.0, 2.0);
        assert_eq!(pace.take(LONG), Ok(Duration::ZERO));
        assert_eq!(pace.take(LONG), Ok(Duration::ZERO));
        assert_eq!(pace.take(LONG), Ok(Duration::from_secs(1)));
        pace.give_back();
        assert_eq!(pace.take(LONG), Ok(Duration::from_secs(1)));
        // Never more than the burst, however many come back.
        for _ in 0..5 {
            pace.give_back();
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        let at_once = (0..10)
            .take_while(|_| pace.take(Duration::ZERO).is_ok())
            .count();
        assert_eq!(at_once, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn processes_share_the_app_allowance() {
        // 180 a minute for the App, 5 processes: 36 a minute each, 33 of them at once
        // (5 s of the share held back for the lag), then one per 1.67 s.
        let pace = RegistrationPace::shared(180.0, 5);
        for _ in 0..33 {
            assert_eq!(pace.take(Duration::ZERO), Ok(Duration::ZERO));
        }
        let wait = pace.take(LONG).expect("within the bound");
        assert!((wait.as_secs_f64() - 60.0 / 36.0).abs() < 1e-6, "{wait:?}");
        tokio::time::advance(Duration::from_secs(3600)).await;
        let at_once = (0..100)
            .take_while(|_| pace.take(Duration::ZERO).is_ok())
            .count();
        assert_eq!(at_once, 33, "a quiet spell refills the burst, no more");
    }

    #[tokio::test(start_paused = true)]
    async fn the_environment_sets_the_share_and_a_bad_value_is_named() {
        let pace = RegistrationPace::from_environment(None, Some("5")).expect("valid");
        for _ in 0..33 {
            assert_eq!(pace.take(Duration::ZERO), Ok(Duration::ZERO));
        }
        assert!(
            pace.take(Duration::ZERO).is_err(),
            "GitHub's 180 a minute over 5"
        );
        let error = RegistrationPace::from_environment(None, Some("five")).expect_err("bad");
        assert!(error.contains("EPHEMERA_SCALER_CONCURRENCY"), "{error}");
        let error = RegistrationPace::from_environment(Some("0"), None).expect_err("bad");
        assert!(
            error.contains("EPHEMERA_REGISTRATIONS_PER_MINUTE"),
            "{error}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_process_starts_more_than_its_share_of_the_hour_in_any_hour() {
        // 100 an hour for the App over 2 processes: 50 each, though the minute's share
        // (90, 82 at once) would allow more.
        let pace = RegistrationPace::shared_within(180.0, 100.0, 2);
        for _ in 0..50 {
            assert_eq!(pace.take(Duration::ZERO), Ok(Duration::ZERO));
        }
        assert_eq!(pace.take(Duration::ZERO), Err(HOUR));
        // One given back frees its place in the hour.
        pace.give_back();
        assert_eq!(pace.take(Duration::ZERO), Ok(Duration::ZERO));
        tokio::time::advance(Duration::from_secs(1800)).await;
        assert_eq!(pace.take(LONG), Ok(Duration::from_secs(1800)));
    }

    #[tokio::test(start_paused = true)]
    async fn github_limits_a_registration_burst_by_the_minute_and_the_hour() {
        // One process at GitHub's figures: 180 a minute, so 10,000 in 55.5 minutes;
        // then none until the hour since the first has passed.
        let pace = RegistrationPace::shared(GITHUB_REGISTRATIONS_PER_MINUTE, 1);
        let mut last = Duration::ZERO;
        for _ in 0..GITHUB_REGISTRATIONS_PER_HOUR as usize {
            last = pace.take(LONG).expect("within the bound");
        }
        assert!(last < Duration::from_secs(56 * 60), "{last:?}");
        assert_eq!(pace.take(LONG), Ok(HOUR));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_every_registration_back() {
        let pace = RegistrationPace::new(10.0, 10.0);
        pace.pause(Duration::from_secs(40));
        assert_eq!(
            pace.take(Duration::from_secs(10)),
            Err(Duration::from_secs(40))
        );
        tokio::time::advance(Duration::from_secs(40)).await;
        assert_eq!(pace.take(Duration::ZERO), Ok(Duration::ZERO));
    }
}

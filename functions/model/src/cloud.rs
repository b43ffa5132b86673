//! The account and the GitHub Apps as the model sees them: one place that holds every
//! bucket (GitHub's per App), draws every latency and tallies every call, throttle and
//! transaction conflict.

use crate::bucket::{BucketSpec, HourlyWindow, TokenBucket};
use crate::quotas::{Latencies, Latency, Quotas};
use ephemera_core::handlers::scaler::Jitter;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// Who made a call: the tallies are kept apart so that a job's cost is not mixed with
/// the reaper's or the runner instance's own reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Caller {
    Webhook,
    Scaler,
    Reaper,
    Instance,
}

/// GitHub's primary buckets, as its `x-ratelimit-resource` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitHubBucket {
    Core,
    Registration,
}

impl GitHubBucket {
    pub fn name(self) -> &'static str {
        match self {
            GitHubBucket::Core => "core",
            GitHubBucket::Registration => "actions_runner_registration",
        }
    }
}

/// Calls by (caller, service, operation).
pub type Tally = BTreeMap<(Caller, &'static str, &'static str), u64>;

#[derive(Default)]
struct State {
    buckets: HashMap<String, TokenBucket>,
    /// GitHub's hourly buckets by App and name (`core`, `actions_runner_registration`,
    /// `content_creation`).
    hourly: HashMap<(usize, &'static str), HourlyWindow>,
    /// GitHub requests under way, by App.
    github_in_flight: HashMap<usize, u32>,
    calls: Tally,
    throttled: BTreeMap<&'static str, u64>,
    /// GitHub's refusals by the limit that refused (`points`, `concurrent`, `core`,
    /// `actions_runner_registration`, `org_registrations`, `content_creation`,
    /// `runner_group_full`).
    github_refusals: BTreeMap<&'static str, u64>,
    /// Runners registered now in the one runner group every pool registers in.
    group_runners: u32,
    /// Calls that spent a `core` hour, every App's (a refused call spends none).
    core_spent: u64,
    conflicts: u64,
    /// Until when a transaction holds an item.
    held: HashMap<String, Instant>,
}

/// Construct with [`Cloud::new`]; shared by every metered port of a run.
pub struct Cloud {
    pub quotas: Quotas,
    pub latencies: Latencies,
    state: Mutex<State>,
    rng: Mutex<StdRng>,
}

impl Cloud {
    pub fn new(quotas: Quotas, latencies: Latencies, seed: u64) -> Cloud {
        Cloud {
            quotas,
            latencies,
            state: Mutex::new(State::default()),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one call.
    pub fn count(&self, caller: Caller, service: &'static str, operation: &'static str) {
        *self
            .state()
            .calls
            .entry((caller, service, operation))
            .or_default() += 1;
    }

    /// Counts one throttled call of `service`.
    pub fn throttled(&self, service: &'static str) {
        *self.state().throttled.entry(service).or_default() += 1;
    }

    /// Counts one GitHub refusal by the limit that refused it.
    pub fn github_refused(&self, limit: &'static str) {
        *self.state().github_refusals.entry(limit).or_default() += 1;
    }

    /// GitHub's refusals so far, by limit.
    pub fn github_refusals(&self) -> BTreeMap<&'static str, u64> {
        self.state().github_refusals.clone()
    }

    /// Puts `runners` in the runner group before a burst (another pool's, or runners
    /// left registered).
    pub fn fill_group(&self, runners: u32) {
        self.state().group_runners += runners;
    }

    /// Takes a place in the runner group for a runner being registered, or false (and a
    /// `runner_group_full` refusal counted) when the group holds
    /// [`Quotas::github_runners_per_group`] already.
    pub fn join_group(&self) -> bool {
        let mut state = self.state();
        if state.group_runners >= self.quotas.github_runners_per_group {
            *state
                .github_refusals
                .entry("runner_group_full")
                .or_default() += 1;
            return false;
        }
        state.group_runners += 1;
        true
    }

    /// Gives a runner's place in the group back (removed, or its registration failed).
    pub fn leave_group(&self) {
        let mut state = self.state();
        state.group_runners = state.group_runners.saturating_sub(1);
    }

    /// Calls that spent the installations' `core` hours so far.
    pub fn core_spent(&self) -> u64 {
        self.state().core_spent
    }

    /// Runners registered in the group now.
    pub fn group_runners(&self) -> u32 {
        self.state().group_runners
    }

    /// Takes `cost` from the bucket named `name` (made from `spec` on first use).
    pub fn take(&self, name: &str, spec: BucketSpec, cost: f64) -> Result<(), Duration> {
        let mut state = self.state();
        let bucket = state
            .buckets
            .entry(name.to_owned())
            .or_insert_with(|| TokenBucket::new(spec));
        bucket.take(cost)
    }

    /// Holds `item` for `hold` in a transaction; false (a conflict, counted) when another
    /// transaction holds it now.
    pub fn hold(&self, item: &str, hold: Duration) -> bool {
        let now = Instant::now();
        let mut state = self.state();
        if state.held.get(item).is_some_and(|until| *until > now) {
            state.conflicts += 1;
            return false;
        }
        state.held.insert(item.to_owned(), now + hold);
        true
    }

    /// Starts a GitHub request of App `app`: one of its concurrent ones, one call of
    /// its bucket's hour (`core` or `actions_runner_registration`; and of the
    /// content-creation limit's, when that applies to it); a registration also spends
    /// the organization's registrations, which every App shares. Or how long GitHub
    /// says to wait, the refusal counted by its limit. Each App has its own buckets.
    pub fn github_start(
        &self,
        app: usize,
        bucket: GitHubBucket,
        creates_content: bool,
    ) -> Result<(), Duration> {
        let mut state = self.state();
        let refused = |state: &mut State, limit: &'static str, wait: Duration| {
            *state.github_refusals.entry(limit).or_default() += 1;
            wait
        };
        if state.github_in_flight.get(&app).copied().unwrap_or(0) >= self.quotas.github_concurrent {
            return Err(refused(
                &mut state,
                "concurrent",
                self.quotas.github_retry_after,
            ));
        }
        if let (true, Some(limit)) = (creates_content, self.quotas.github_content_creation) {
            let minute = state
                .buckets
                .entry(format!("app{app}:github_content_creation_minute"))
                .or_insert_with(|| TokenBucket::new(limit.per_minute))
                .take(1.0);
            if minute.is_err() {
                return Err(refused(
                    &mut state,
                    "content_creation",
                    self.quotas.github_retry_after,
                ));
            }
            let hour = state
                .hourly
                .entry((app, "content_creation"))
                .or_insert_with(|| HourlyWindow::new(limit.per_hour))
                .spend();
            if let Err(wait) = hour {
                return Err(refused(&mut state, "content_creation", wait));
            }
        }
        if let (GitHubBucket::Registration, Some(org)) =
            (bucket, self.quotas.github_org_registrations)
        {
            let taken = state
                .buckets
                .entry("org:runner_registrations".to_owned())
                .or_insert_with(|| TokenBucket::new(org))
                .take(1.0);
            if let Err(wait) = taken {
                return Err(refused(&mut state, "org_registrations", wait));
            }
        }
        let limit = match bucket {
            GitHubBucket::Core => self.quotas.github_core_hourly,
            GitHubBucket::Registration => self.quotas.github_registration_hourly,
        };
        let spent = state
            .hourly
            .entry((app, bucket.name()))
            .or_insert_with(|| HourlyWindow::new(limit))
            .spend();
        if let Err(wait) = spent {
            return Err(refused(&mut state, bucket.name(), wait));
        }
        if bucket == GitHubBucket::Core {
            state.core_spent += 1;
        }
        *state.github_in_flight.entry(app).or_default() += 1;
        Ok(())
    }

    /// Ends a GitHub request of App `app` started with [`Cloud::github_start`].
    pub fn github_end(&self, app: usize) {
        let mut state = self.state();
        let in_flight = state.github_in_flight.entry(app).or_default();
        *in_flight = in_flight.saturating_sub(1);
    }

    /// A latency drawn from `latency` (log-normal through its median and p99).
    pub fn draw(&self, latency: Latency) -> Duration {
        let median = latency.median.as_secs_f64();
        if median <= 0.0 {
            return Duration::ZERO;
        }
        let sigma = (latency.p99.as_secs_f64() / median).max(1.0).ln() / 2.326;
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        // Box-Muller: one standard normal draw.
        let u1: f64 = rng.random_range(f64::EPSILON..1.0);
        let u2: f64 = rng.random();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        Duration::from_secs_f64(median * (sigma * z).exp())
    }

    /// Sleeps a latency drawn from `latency`.
    pub async fn wait(&self, latency: Latency) {
        tokio::time::sleep(self.draw(latency)).await;
    }

    /// A uniform draw in `0..1`.
    pub fn uniform(&self) -> f64 {
        self.rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .random()
    }

    /// The scaler's jitter, drawn from this run's one seeded RNG.
    pub fn jitter(self: &Arc<Self>) -> Arc<dyn Jitter> {
        Arc::new(CloudJitter(self.clone()))
    }

    pub fn calls(&self) -> Tally {
        self.state().calls.clone()
    }

    pub fn throttles(&self) -> BTreeMap<&'static str, u64> {
        self.state().throttled.clone()
    }

    pub fn conflicts(&self) -> u64 {
        self.state().conflicts
    }
}

/// The scaler's jitter source in the model: the run's seeded RNG, so that a seed gives
/// one run.
struct CloudJitter(Arc<Cloud>);

impl Jitter for CloudJitter {
    fn unit(&self) -> f64 {
        self.0.uniform()
    }
}

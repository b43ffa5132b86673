//! [`SeveralApps`]: one [`Forge`] over several GitHub Apps installed on the same
//! accounts, so that a deployment has the rate limits of all of them.
//!
//! GitHub keeps its buckets per App installation: each App brings its own
//! `actions_runner_registration` (10,000 an hour), its own `core` (5,000 an hour) and
//! its own 900 points a minute per endpoint. Each App here has its own
//! [`RegistrationPace`]; a registration goes to the next App, round-robin, whose pace
//! has room now, and when an App answers a rate limit it is set aside until GitHub's
//! wait is over while the others carry on (the refused call is made again by the
//! next). Every other call (runner removals, reads, job lookups) may go to any App,
//! since they share installations: those go round-robin too, skipping an App whose
//! `core` bucket GitHub said is spent.
//!
//! A deployment of one App does not use this: its one `GitHubApp` is the forge, with
//! exactly the calls it always made.
//!
//! This is no port but a forge built over the [`Forge`] port, so it sits with the
//! handlers, above the ports (see `lib.rs`, "Layers").

use crate::model::RunnerScope;
use crate::pace::RegistrationPace;
use crate::ports::{
    AppKeySource, Forge, ForgeError, ForgeJobState, ForgeRunner, JitConfig, JitRequest,
    RunnerRemoval,
};
use async_trait::async_trait;
use secrecy::SecretString;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;
use tracing::warn;

/// How long an App is set aside after a rate limit that named no wait (GitHub's
/// secondary limits last about a minute).
pub const RATE_LIMIT_PAUSE: Duration = Duration::from_secs(60);
/// How long a registration waits for an App's pace before it is refused as throttled.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(2);

/// The sooner of a wait so far (if any) and `wait`.
fn sooner(so_far: Option<Duration>, wait: Duration) -> Option<Duration> {
    Some(so_far.map_or(wait, |s| s.min(wait)))
}

/// One App of a deployment, to be built into a GitHub client: its id, its private key,
/// and where the key is kept.
pub struct AppSource {
    pub app_id: u64,
    pub key: SecretString,
    /// Where the key is kept (a secret's name or ARN, a file), for errors.
    pub kept_in: String,
    /// The key's store, read again when GitHub refuses the key; `None` for a file.
    pub key_source: Option<Arc<dyn AppKeySource>>,
}

/// One App of the deployment, with its own budgets.
struct AppLane {
    app_id: u64,
    forge: Arc<dyn Forge>,
    registrations: Arc<RegistrationPace>,
    /// No call but a registration before this (GitHub said the `core` bucket is spent).
    core_paused_until: Mutex<Option<Instant>>,
}

impl AppLane {
    fn core_wait(&self, now: Instant) -> Option<Duration> {
        let until = (*self
            .core_paused_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner))?;
        (until > now).then(|| until - now)
    }

    fn pause_core(&self, for_at_least: Duration) {
        let until = Instant::now() + for_at_least;
        let mut paused = self
            .core_paused_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if paused.is_none_or(|current| current < until) {
            *paused = Some(until);
        }
    }
}

/// Several GitHub Apps as one [`Forge`], each App with its own pace and budgets.
pub struct SeveralApps {
    lanes: Vec<AppLane>,
    next_registration: AtomicUsize,
    next_call: AtomicUsize,
    max_wait: Duration,
}

impl SeveralApps {
    /// `apps` as (App id, its forge), the App that sends webhooks first; each App's
    /// registrations are paced by its own pace, `pace(app_id)`.
    pub fn new(
        apps: Vec<(u64, Arc<dyn Forge>)>,
        pace: impl Fn(u64) -> Arc<RegistrationPace>,
    ) -> SeveralApps {
        let lanes = apps
            .into_iter()
            .map(|(app_id, forge)| AppLane {
                app_id,
                forge,
                registrations: pace(app_id),
                core_paused_until: Mutex::new(None),
            })
            .collect();
        SeveralApps {
            lanes,
            next_registration: AtomicUsize::new(0),
            next_call: AtomicUsize::new(0),
            max_wait: DEFAULT_MAX_WAIT,
        }
    }

    /// A registration waits at most `max_wait` for an App's pace to have room.
    pub fn with_max_wait(mut self, max_wait: Duration) -> SeveralApps {
        self.max_wait = max_wait;
        self
    }

    /// The Apps' ids, in the order given.
    pub fn app_ids(&self) -> Vec<u64> {
        self.lanes.iter().map(|lane| lane.app_id).collect()
    }

    /// The lanes' indexes, starting at the cursor's turn and moving it on one.
    fn order(&self, cursor: &AtomicUsize) -> Vec<usize> {
        let count = self.lanes.len();
        let start = cursor.fetch_add(1, Ordering::Relaxed) % count.max(1);
        (0..count).map(|k| (start + k) % count).collect()
    }

    /// The App to register with and how long to wait first: the first App in turn
    /// whose pace has room now, else the first whose pace has room within the longest
    /// wait; `Err` with the soonest any untried App has room, if any.
    fn pick_registration(&self, tried: &[bool]) -> Result<(usize, Duration), Option<Duration>> {
        let order: Vec<usize> = self
            .order(&self.next_registration)
            .into_iter()
            .filter(|&i| !tried[i])
            .collect();
        let mut soonest: Option<Duration> = None;
        for &i in &order {
            match self.lanes[i].registrations.take(Duration::ZERO) {
                Ok(wait) => return Ok((i, wait)),
                Err(wait) => soonest = Some(soonest.map_or(wait, |s| s.min(wait))),
            }
        }
        for &i in &order {
            if let Ok(wait) = self.lanes[i].registrations.take(self.max_wait) {
                return Ok((i, wait));
            }
        }
        Err(soonest)
    }

    /// `call` made with one App after another, in turn, until one answers other than
    /// with a rate limit; an App GitHub said is spent is skipped until its wait is over.
    async fn spread<T, Fut>(&self, call: impl Fn(Arc<dyn Forge>) -> Fut) -> Result<T, ForgeError>
    where
        Fut: Future<Output = Result<T, ForgeError>>,
    {
        let mut soonest: Option<Duration> = None;
        for i in self.order(&self.next_call) {
            let lane = &self.lanes[i];
            if let Some(wait) = lane.core_wait(Instant::now()) {
                soonest = sooner(soonest, wait);
                continue;
            }
            match call(lane.forge.clone()).await {
                Err(ForgeError::Throttled { retry_after }) => {
                    let wait = retry_after.unwrap_or(RATE_LIMIT_PAUSE);
                    lane.pause_core(wait);
                    warn!(app_id = lane.app_id, retry_in = ?wait, "GitHub rate-limited this App; the other Apps carry on");
                    soonest = sooner(soonest, wait);
                }
                answer => return answer,
            }
        }
        Err(ForgeError::Throttled {
            retry_after: soonest,
        })
    }
}

#[async_trait]
impl Forge for SeveralApps {
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request: &JitRequest,
    ) -> Result<JitConfig, ForgeError> {
        let mut tried = vec![false; self.lanes.len()];
        let mut soonest: Option<Duration> = None;
        loop {
            let (i, wait) = match self.pick_registration(&tried) {
                Ok(picked) => picked,
                Err(untried) => {
                    let retry_after = match untried {
                        Some(wait) => sooner(soonest, wait),
                        None => soonest,
                    };
                    return Err(ForgeError::Throttled { retry_after });
                }
            };
            tried[i] = true;
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let lane = &self.lanes[i];
            match lane.forge.generate_jit_config(scope, request).await {
                // Refused, so not registered: the next App may register the same name.
                Err(ForgeError::Throttled { retry_after }) => {
                    let wait = retry_after.unwrap_or(RATE_LIMIT_PAUSE);
                    lane.registrations.pause(wait);
                    warn!(app_id = lane.app_id, runner = %request.name, retry_in = ?wait, "GitHub rate-limited this App's registrations; the other Apps carry on");
                    soonest = sooner(soonest, wait);
                }
                answer => return answer,
            }
        }
    }

    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError> {
        self.spread(|forge| async move { forge.remove_runner(scope, runner_id).await })
            .await
    }

    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        self.spread(|forge| async move { forge.get_runner(scope, runner_id).await })
            .await
    }

    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError> {
        self.spread(|forge| async move { forge.list_runners(scope).await })
            .await
    }

    async fn find_runner(
        &self,
        scope: &RunnerScope,
        name: &str,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        self.spread(|forge| async move { forge.find_runner(scope, name).await })
            .await
    }

    async fn job_state(
        &self,
        installation_id: Option<u64>,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError> {
        self.spread(
            |forge| async move { forge.job_state(installation_id, owner, repo, job_id).await },
        )
        .await
    }
}

#[cfg(test)]
#[path = "apps_tests.rs"]
mod tests;

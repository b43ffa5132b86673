//! The simulator's world: runners, jobs, issued tokens and counters, behind one mutex.
//!
//! Every change GitHub would make atomically (register a runner, delete it unless busy,
//! hand a queued job to an idle runner) is one method here, called with the lock held,
//! so the HTTP routes and the runner agent never see each other half-way.

use super::deliveries::Delivery;
use serde::Serialize;
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// Where a runner is registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunnerScope {
    pub owner: String,
    /// `Some` for a repository-level runner, `None` for an organization runner.
    pub repo: Option<String>,
}

impl RunnerScope {
    fn same_as(&self, other: &RunnerScope) -> bool {
        self.owner.eq_ignore_ascii_case(&other.owner)
            && match (&self.repo, &other.repo) {
                (None, None) => true,
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                _ => false,
            }
    }

    /// Whether a runner registered here may run a job of `owner/repo`.
    fn serves(&self, owner: &str, repo: &str) -> bool {
        self.owner.eq_ignore_ascii_case(owner)
            && self
                .repo
                .as_deref()
                .is_none_or(|r| r.eq_ignore_ascii_case(repo))
    }
}

/// A self-hosted runner as GitHub knows it.
#[derive(Debug, Clone, Serialize)]
pub struct SimRunner {
    pub id: u64,
    pub name: String,
    pub labels: Vec<String>,
    pub os: String,
    /// `online` or `offline`.
    pub status: String,
    pub busy: bool,
    pub ephemeral: bool,
    pub runner_group_id: u64,
    pub scope: RunnerScope,
    /// The EC2 instance whose agent took this runner's JIT config.
    pub instance_id: Option<String>,
    /// The job it is running.
    pub job_id: Option<u64>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When the agent brought it online (tokio time, so tests may pause it).
    #[serde(skip)]
    pub online_since: Option<tokio::time::Instant>,
}

/// A workflow job.
#[derive(Debug, Clone, Serialize)]
pub struct SimJob {
    pub id: u64,
    pub run_id: u64,
    pub owner: String,
    pub repo: String,
    pub labels: Vec<String>,
    /// `queued`, `in_progress` or `completed`.
    pub status: String,
    /// `success`, `failure` or `cancelled` once completed.
    pub conclusion: Option<String>,
    /// The attempt of its workflow run: 1, and one more for each re-run.
    pub run_attempt: u32,
    /// Why a failed job failed, as its log's annotation says it.
    pub failure: Option<String>,
    pub runner_id: Option<u64>,
    pub runner_name: Option<String>,
    pub runner_group_id: Option<u64>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub started_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub completed_at: Option<OffsetDateTime>,
    /// How long it runs once a runner took it.
    #[serde(skip)]
    pub duration: std::time::Duration,
    #[serde(skip)]
    pub ends_at: Option<tokio::time::Instant>,
}

/// An installation access token the simulator issued.
#[derive(Debug, Clone, Serialize)]
pub struct IssuedToken {
    pub installation_id: u64,
    /// The App the token was issued to (GitHub keeps buckets per App installation).
    pub app_id: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

/// What happened, for the tests' assertions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counters {
    /// GitHub API calls by `METHOD /route/{template}`.
    pub api_calls: BTreeMap<String, u64>,
    /// Jobs whose runner's instance was terminated while the job ran: must stay 0.
    pub jobs_killed: u64,
    pub webhooks_sent: u64,
    pub webhooks_failed: u64,
    /// Deliveries dropped, sent twice, or held back by injected faults.
    pub webhooks_lost: u64,
    pub webhooks_duplicated: u64,
    pub webhooks_delayed: u64,
    pub runners_registered: u64,
    /// Runners removed with `DELETE …/runners/{id}`.
    pub runners_deleted: u64,
    /// Ephemeral runners that removed themselves after their job.
    pub runners_deregistered: u64,
    /// Instances the agent powered off when their runner exited.
    pub hosts_powered_off: u64,
    /// Stopped pool hosts that found `prepare` in their JIT item and powered off (to be
    /// stopped, as their shutdown behaviour says).
    pub hosts_prepared: u64,
    /// Instances left running when their runner exited (a hung host, injected).
    pub hosts_hung: u64,
    /// Jobs failed by a spot interruption of their runner's instance (EC2's doing, not
    /// ephemera's: not counted in `jobs_killed`).
    pub jobs_interrupted: u64,
    /// Jobs re-run with `POST …/actions/jobs/{job_id}/rerun`.
    pub jobs_rerun: u64,
    /// Redeliveries refused with a secondary rate limit (content creation).
    pub redeliveries_throttled: u64,
    /// Calls made with an installation token, by the App it was issued to, then by
    /// `METHOD /route/{template} STATUS` (`POST …/generate-jitconfig 201`: a runner
    /// registered by that App).
    pub app_calls: BTreeMap<u64, BTreeMap<String, u64>>,
}

impl Counters {
    /// Runners App `app_id` registered: its `POST …/actions/runners/generate-jitconfig`
    /// answered 201.
    pub fn registrations_by(&self, app_id: u64) -> u64 {
        self.app_answers(app_id, |call| {
            call.starts_with("POST ") && call.ends_with("/actions/runners/generate-jitconfig 201")
        })
    }

    /// App `app_id`'s calls GitHub refused with 403 or 429 (its rate limits, in a world
    /// without other refusals).
    pub fn refusals_of(&self, app_id: u64) -> u64 {
        self.app_answers(app_id, |call| {
            call.ends_with(" 403") || call.ends_with(" 429")
        })
    }

    fn app_answers(&self, app_id: u64, matches: impl Fn(&str) -> bool) -> u64 {
        self.app_calls
            .get(&app_id)
            .map(|calls| {
                calls
                    .iter()
                    .filter(|(call, _)| matches(call))
                    .map(|(_, count)| count)
                    .sum()
            })
            .unwrap_or(0)
    }
}

/// A copy of the whole world.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SimState {
    pub runners: BTreeMap<u64, SimRunner>,
    pub jobs: BTreeMap<u64, SimJob>,
    pub tokens: BTreeMap<String, IssuedToken>,
    /// The App's webhook delivery log, by delivery id.
    pub deliveries: BTreeMap<u64, Delivery>,
    pub counters: Counters,
    /// The App's permissions, events and where it is not installed.
    pub app: super::app::AppSettings,
    /// The same of each further App ([`super::SimConfig::more_apps`]) a test changed;
    /// an App not here has the defaults.
    pub more_apps: BTreeMap<u64, super::app::AppSettings>,
    /// Instances whose runner process exited (job done, or removed from GitHub) and
    /// that the agent has yet to power off.
    #[serde(skip)]
    pub hosts_to_power_off: Vec<String>,
    /// When each redelivery GitHub accepted in the last hour was asked for (its
    /// content-creation limits: [`super::deliveries::redeliver`]).
    #[serde(skip)]
    pub redelivery_asks: std::collections::VecDeque<tokio::time::Instant>,
    #[serde(skip)]
    next_id: u64,
}

/// Why a runner could not be registered or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerError {
    NameTaken,
    NotFound,
    Busy(String),
}

impl SimState {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Delivery ids are large and grow with time, as GitHub's do.
    pub(crate) fn next_delivery_id(&mut self) -> u64 {
        self.next_id() + 90_000_000_000
    }

    /// Counts one API call.
    /// The settings of App `app_id`: the first App's, or a further App's.
    pub fn app_settings(&self, app_id: u64, first_app_id: u64) -> super::app::AppSettings {
        if app_id == first_app_id {
            return self.app.clone();
        }
        self.more_apps.get(&app_id).cloned().unwrap_or_default()
    }

    pub fn hit(&mut self, route: &str) {
        *self.counters.api_calls.entry(route.to_owned()).or_default() += 1;
    }

    /// Registers an offline JIT runner; names are unique within a scope.
    pub fn register_runner(
        &mut self,
        scope: RunnerScope,
        name: &str,
        labels: Vec<String>,
        runner_group_id: u64,
    ) -> Result<SimRunner, RunnerError> {
        let taken = self
            .runners
            .values()
            .any(|r| r.scope.same_as(&scope) && r.name.eq_ignore_ascii_case(name));
        if taken {
            return Err(RunnerError::NameTaken);
        }
        let runner = SimRunner {
            id: self.next_id(),
            name: name.to_owned(),
            labels,
            os: "linux".to_owned(),
            status: "offline".to_owned(),
            busy: false,
            ephemeral: true,
            runner_group_id,
            scope,
            instance_id: None,
            job_id: None,
            created_at: OffsetDateTime::now_utc(),
            online_since: None,
        };
        self.runners.insert(runner.id, runner.clone());
        self.counters.runners_registered += 1;
        Ok(runner)
    }

    /// The runners registered in `scope`, by id.
    pub fn runners_in(&self, scope: &RunnerScope) -> Vec<&SimRunner> {
        self.runners
            .values()
            .filter(|r| r.scope.same_as(scope))
            .collect()
    }

    pub fn runner_in(&self, scope: &RunnerScope, id: u64) -> Option<&SimRunner> {
        self.runners.get(&id).filter(|r| r.scope.same_as(scope))
    }

    /// Removes a runner unless it is running a job (the check and the removal are one
    /// step, as on GitHub). An online runner's process learns it is gone and exits.
    pub fn delete_runner(&mut self, scope: &RunnerScope, id: u64) -> Result<(), RunnerError> {
        let runner = self.runner_in(scope, id).ok_or(RunnerError::NotFound)?;
        if runner.busy {
            return Err(RunnerError::Busy(runner.name.clone()));
        }
        if let Some(removed) = self.runners.remove(&id) {
            self.hosts_to_power_off.extend(removed.instance_id);
        }
        self.counters.runners_deleted += 1;
        Ok(())
    }

    /// Creates a queued job.
    pub fn create_job(
        &mut self,
        owner: &str,
        repo: &str,
        labels: Vec<String>,
        duration: std::time::Duration,
    ) -> SimJob {
        let id = self.next_id() + 40_000_000_000;
        let run_id = self.next_id() + 10_000_000_000;
        let job = SimJob {
            id,
            run_id,
            owner: owner.to_owned(),
            repo: repo.to_owned(),
            labels,
            status: "queued".to_owned(),
            conclusion: None,
            run_attempt: 1,
            failure: None,
            runner_id: None,
            runner_name: None,
            runner_group_id: None,
            created_at: OffsetDateTime::now_utc(),
            started_at: None,
            completed_at: None,
            duration,
            ends_at: None,
        };
        self.jobs.insert(id, job.clone());
        job
    }

    /// The agent of `instance_id` brought runner `runner_id` (named `name`) online.
    /// False when GitHub no longer knows that runner (deleted before it came up).
    pub fn bring_online(
        &mut self,
        runner_id: u64,
        name: &str,
        instance_id: &str,
        now: tokio::time::Instant,
    ) -> bool {
        match self.runners.get_mut(&runner_id) {
            Some(r) if r.name == name && r.instance_id.is_none() => {
                r.status = "online".to_owned();
                r.instance_id = Some(instance_id.to_owned());
                r.online_since = Some(now);
                true
            }
            _ => false,
        }
    }

    /// Hands the oldest fitting queued job to each idle runner online for `pickup_delay`.
    /// Returns the jobs started.
    pub fn assign_jobs(
        &mut self,
        now: tokio::time::Instant,
        pickup_delay: std::time::Duration,
    ) -> Vec<SimJob> {
        let idle: Vec<u64> = self
            .runners
            .values()
            .filter(|r| r.status == "online" && !r.busy)
            .filter(|r| r.online_since.is_some_and(|t| t + pickup_delay <= now))
            .map(|r| r.id)
            .collect();
        let mut started = Vec::new();
        for runner_id in idle {
            let runner = &self.runners[&runner_id];
            let job = self
                .jobs
                .values()
                .filter(|j| j.status == "queued" && runner.scope.serves(&j.owner, &j.repo))
                .filter(|j| labels_fit(&j.labels, &runner.labels))
                .min_by_key(|j| (j.created_at, j.id))
                .map(|j| j.id);
            let Some(job_id) = job else { continue };
            let runner = self.runners.get_mut(&runner_id).expect("listed above");
            runner.busy = true;
            runner.job_id = Some(job_id);
            let job = self.jobs.get_mut(&job_id).expect("listed above");
            job.status = "in_progress".to_owned();
            job.runner_id = Some(runner.id);
            job.runner_name = Some(runner.name.clone());
            job.runner_group_id = Some(runner.runner_group_id);
            job.started_at = Some(OffsetDateTime::now_utc());
            job.ends_at = Some(now + job.duration);
            started.push(job.clone());
        }
        started
    }

    /// Completes the jobs whose time is up; their ephemeral runners deregister and exit.
    pub fn finish_jobs(&mut self, now: tokio::time::Instant) -> Vec<SimJob> {
        let done: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.status == "in_progress" && j.ends_at.is_some_and(|t| t <= now))
            .map(|j| j.id)
            .collect();
        done.into_iter()
            .map(|job_id| {
                // A job told to fail (its `failure` set) fails; any other succeeds.
                let failed = self.jobs[&job_id].failure.is_some();
                let job = self.complete_job(job_id, if failed { "failure" } else { "success" });
                if let Some(runner_id) = job.runner_id {
                    if let Some(runner) = self.runners.remove(&runner_id) {
                        self.counters.runners_deregistered += 1;
                        self.hosts_to_power_off.extend(runner.instance_id);
                    }
                }
                job
            })
            .collect()
    }

    /// The instance of an online runner is gone: the runner goes offline, and a job it
    /// was running fails (and counts as killed). Returns that job.
    pub fn lose_instance(&mut self, instance_id: &str) -> Option<SimJob> {
        let runner = self
            .runners
            .values_mut()
            .find(|r| r.status == "online" && r.instance_id.as_deref() == Some(instance_id))?;
        runner.status = "offline".to_owned();
        runner.busy = false;
        let job_id = runner.job_id.take()?;
        self.counters.jobs_killed += 1;
        Some(self.complete_job(job_id, "failure"))
    }

    /// Instances whose runners are online.
    pub fn online_instances(&self) -> Vec<String> {
        self.runners
            .values()
            .filter(|r| r.status == "online")
            .filter_map(|r| r.instance_id.clone())
            .collect()
    }

    fn complete_job(&mut self, job_id: u64, conclusion: &str) -> SimJob {
        let job = self.jobs.get_mut(&job_id).expect("job of a runner exists");
        job.status = "completed".to_owned();
        job.conclusion = Some(conclusion.to_owned());
        job.completed_at = Some(OffsetDateTime::now_utc());
        job.ends_at = None;
        if let Some(runner) = job.runner_id.and_then(|id| self.runners.get_mut(&id)) {
            runner.busy = false;
            runner.job_id = None;
        }
        job.clone()
    }
}

mod runs;
pub use runs::{RerunRefused, RunView, SHUTDOWN_SIGNAL};

/// Whether every label of a job is among the runner's, case-insensitively. A JIT runner
/// carries exactly the labels it was registered with: nothing (not `self-hosted`, the OS
/// or the architecture) is implied.
pub fn labels_fit(job: &[String], runner: &[String]) -> bool {
    job.iter()
        .all(|wanted| runner.iter().any(|have| have.eq_ignore_ascii_case(wanted)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn labels_fit_case_insensitively_and_nothing_is_implied() {
        let runner = strings(&["Linux", "x64"]);
        assert!(labels_fit(&strings(&["linux", "X64"]), &runner));
        assert!(!labels_fit(&strings(&["self-hosted", "linux"]), &runner));
        assert!(!labels_fit(&strings(&["gpu"]), &runner));
        let registered = strings(&["self-hosted", "linux", "x64"]);
        assert!(labels_fit(&strings(&["SELF-HOSTED", "linux"]), &registered));
    }

    #[test]
    fn busy_runner_cannot_be_deleted() {
        let mut state = SimState::default();
        let scope = RunnerScope {
            owner: "acme".into(),
            repo: None,
        };
        let runner = state
            .register_runner(scope.clone(), "r1", strings(&["linux"]), 1)
            .unwrap();
        state.runners.get_mut(&runner.id).unwrap().busy = true;
        assert_eq!(
            state.delete_runner(&scope, runner.id),
            Err(RunnerError::Busy("r1".into()))
        );
    }
}

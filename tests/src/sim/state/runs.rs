//! Workflow runs as GitHub derives them from their jobs, the re-run of one job, and a
//! spot runner's interruption in the middle of its job.
//!
//! A run's state is that of its latest attempt's jobs: `in_progress` while one of them
//! is not completed, then `completed`, `failure` if one failed. GitHub refuses a job's
//! re-run while its run is in progress; a re-run makes a new `queued` job (a new id) in
//! the same run, at the next attempt.

use super::{SimJob, SimState};
use time::OffsetDateTime;

/// The annotation of a job whose runner was shut down under it (actions/runner's
/// message, as GitHub shows it on the failed job).
pub const SHUTDOWN_SIGNAL: &str = "The runner has received a shutdown signal. This can happen when the runner service is stopped, or a manually started runner is canceled.";

/// A workflow run, as its latest attempt's jobs make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunView {
    pub run_id: u64,
    pub owner: String,
    pub repo: String,
    pub run_attempt: u32,
    /// `queued`, `in_progress` or `completed`.
    pub status: &'static str,
    pub conclusion: Option<&'static str>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// Why GitHub refused a job's re-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerunRefused {
    NotFound,
    /// The job's run is still in progress (or the job is not of its latest attempt).
    InProgress,
}

impl SimState {
    /// The run `run_id` of `owner/repo`, if it has jobs.
    pub fn run(&self, owner: &str, repo: &str, run_id: u64) -> Option<RunView> {
        let jobs: Vec<&SimJob> = self
            .jobs
            .values()
            .filter(|j| j.run_id == run_id)
            .filter(|j| j.owner.eq_ignore_ascii_case(owner) && j.repo.eq_ignore_ascii_case(repo))
            .collect();
        let run_attempt = jobs.iter().map(|j| j.run_attempt).max()?;
        let latest: Vec<&&SimJob> = jobs
            .iter()
            .filter(|j| j.run_attempt == run_attempt)
            .collect();
        let done = latest.iter().all(|j| j.status == "completed");
        let started = latest.iter().any(|j| j.status != "queued");
        let failed = latest
            .iter()
            .any(|j| matches!(j.conclusion.as_deref(), Some("failure" | "cancelled")));
        let first = jobs.iter().map(|j| j.created_at).min()?;
        let last = latest
            .iter()
            .filter_map(|j| j.completed_at.or(j.started_at))
            .max()
            .unwrap_or(first);
        Some(RunView {
            run_id,
            owner: jobs[0].owner.clone(),
            repo: jobs[0].repo.clone(),
            run_attempt,
            status: match (done, started) {
                (true, _) => "completed",
                (false, true) => "in_progress",
                (false, false) => "queued",
            },
            conclusion: done.then_some(if failed { "failure" } else { "success" }),
            created_at: first,
            updated_at: last,
        })
    }

    /// Re-runs job `job_id`: a new queued job of its run, at the next attempt, running
    /// for `duration`. Refused while the run is in progress.
    pub fn rerun_job(
        &mut self,
        job_id: u64,
        duration: std::time::Duration,
    ) -> Result<SimJob, RerunRefused> {
        let old = self
            .jobs
            .get(&job_id)
            .cloned()
            .ok_or(RerunRefused::NotFound)?;
        let run = self
            .run(&old.owner, &old.repo, old.run_id)
            .ok_or(RerunRefused::NotFound)?;
        if run.status != "completed" || run.run_attempt != old.run_attempt {
            return Err(RerunRefused::InProgress);
        }
        let job = SimJob {
            id: self.next_id() + 40_000_000_000,
            status: "queued".to_owned(),
            conclusion: None,
            run_attempt: old.run_attempt + 1,
            failure: None,
            runner_id: None,
            runner_name: None,
            runner_group_id: None,
            created_at: OffsetDateTime::now_utc(),
            started_at: None,
            completed_at: None,
            duration,
            ends_at: None,
            ..old
        };
        self.jobs.insert(job.id, job.clone());
        self.counters.jobs_rerun += 1;
        Ok(job)
    }

    /// The instance of the runner running job `job_id`, while it runs.
    pub fn instance_running(&self, job_id: u64) -> Option<String> {
        let job = self
            .jobs
            .get(&job_id)
            .filter(|j| j.status == "in_progress")?;
        let runner = self.runners.get(&job.runner_id?)?;
        runner.instance_id.clone()
    }

    /// EC2 reclaimed the instance of the runner running `job_id`: the runner goes offline
    /// (GitHub keeps its registration until it is removed) and the job fails with
    /// [`SHUTDOWN_SIGNAL`]. Returns the failed job.
    pub fn interrupt_job(&mut self, job_id: u64) -> Option<SimJob> {
        let instance_id = self.instance_running(job_id)?;
        let runner = self
            .runners
            .values_mut()
            .find(|r| r.instance_id.as_deref() == Some(instance_id.as_str()))?;
        runner.status = "offline".to_owned();
        self.counters.jobs_interrupted += 1;
        let mut job = self.complete_job(job_id, "failure");
        job.failure = Some(SHUTDOWN_SIGNAL.to_owned());
        self.jobs.insert(job_id, job.clone());
        Some(job)
    }
}

//! The re-run of a job that failed because its spot runner was interrupted: once, and on
//! on-demand.
//!
//! GitHub fails the job of a reclaimed spot instance ("The runner has received a shutdown
//! signal"). When that job's `completed` reaches the scaler with conclusion `failure` or
//! `cancelled` and its runner's record says it was interrupted, the scaler records the
//! wanted re-run ([`RerunStore::want_rerun`], keyed by the job's workflow run). Nothing
//! else is ever re-run.
//!
//! GitHub refuses a job re-run (403) while the job's workflow run is still in progress,
//! and a run stays in progress until its other jobs end. So the re-run is not asked at
//! once: the reaper's run reads the workflow run ([`WorkflowRuns::run_state`]) and asks
//! for the re-run only once the run is `completed` ([`next_step`]). Exactly once: the
//! entry is marked asked by a conditional write *before* the POST, so of two reapers (or
//! a retry) only one ever asks; a refusal that certainly did nothing (a 4xx) puts the
//! entry back to wait, an answer that may have done something leaves it asked. A run
//! that does not complete within [`RERUN_PATIENCE`] is given up, with a log line and a
//! note on the runner's record.
//!
//! The re-run arrives as a new `queued` job of the same run, `run_attempt` one more. The
//! scaler looks the run's entry up for a job of a later attempt in a pool that would
//! launch spot (no read for any other job), and launches it on-demand.

use crate::ports::{ForgeError, StoreError};
use async_trait::async_trait;
use std::time::Duration;
use time::OffsetDateTime;

/// How long a wanted re-run waits for its workflow run to complete before it is given up.
pub const RERUN_PATIENCE: Duration = Duration::from_secs(24 * 3600);
/// How often the reaper reads a workflow run that is still in progress.
pub const RUN_CHECK: Duration = Duration::from_secs(60);
/// How long an asked (or given up) entry is kept, so the re-run's jobs find it.
pub const RERUN_KEPT: Duration = Duration::from_secs(24 * 3600);

/// Which workflow run a re-run belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    pub owner: String,
    pub repo: String,
    pub run_id: u64,
}

impl std::fmt::Display for RunKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}#{}", self.owner, self.repo, self.run_id)
    }
}

/// Where a re-run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerunState {
    /// Waiting for its workflow run to complete.
    Wanted,
    /// GitHub was asked at this time (or the asking was started then).
    Asked(OffsetDateTime),
    /// Not asked, and never will be: the run did not complete in time, or it was re-run
    /// by someone else.
    GaveUp(OffsetDateTime),
}

/// A wanted re-run of an interrupted job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerun {
    pub run: RunKey,
    /// The failed job (of attempt `run_attempt`).
    pub job_id: u64,
    pub run_attempt: u32,
    pub installation_id: Option<u64>,
    pub pool: String,
    /// The interrupted runner, for the notes on its record.
    pub runner: String,
    pub wanted_at: OffsetDateTime,
    pub state: RerunState,
    /// When the reaper looks at it next.
    pub next_check_at: OffsetDateTime,
}

/// GitHub's view of a workflow run (the fields of its `workflow-run` schema read here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunState {
    /// `status` is `completed`.
    pub completed: bool,
    pub run_attempt: u32,
}

/// The wanted re-runs, kept in the deployment's table.
#[async_trait]
pub trait RerunStore: Send + Sync {
    /// Records `rerun` unless its run has an entry already (conditional put; idempotent):
    /// true if recorded now.
    async fn want_rerun(&self, rerun: &Rerun) -> Result<bool, StoreError>;

    /// Every entry. Read-only.
    async fn reruns(&self) -> Result<Vec<Rerun>, StoreError>;

    /// The entry of `run`, if any. Read-only, strongly consistent.
    async fn rerun_of(&self, run: &RunKey) -> Result<Option<Rerun>, StoreError>;

    /// Moves `run`'s entry from exactly `from` to `to`, to be looked at again at
    /// `next_check_at`. Conditional: false (and nothing written) when the entry is not in
    /// `from` (another reaper moved it) or is gone.
    async fn move_rerun(
        &self,
        run: &RunKey,
        from: RerunState,
        to: RerunState,
        next_check_at: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// Forgets `run`'s entry. Idempotent.
    async fn forget_rerun(&self, run: &RunKey) -> Result<(), StoreError>;
}

/// Workflow runs on GitHub (needs the App's `actions: write` to re-run).
#[async_trait]
pub trait WorkflowRuns: Send + Sync {
    /// `GET /repos/{owner}/{repo}/actions/runs/{run_id}`; `None` if GitHub does not know
    /// it. Read-only.
    async fn run_state(
        &self,
        installation_id: Option<u64>,
        run: &RunKey,
    ) -> Result<Option<RunState>, ForgeError>;

    /// `POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun`. Not idempotent: each
    /// call GitHub accepts is one more attempt of the run; a 403 (the run is still in
    /// progress) is [`ForgeError::Rejected`].
    async fn rerun_job(
        &self,
        installation_id: Option<u64>,
        run: &RunKey,
        job_id: u64,
    ) -> Result<(), ForgeError>;
}

/// What the reaper does next with a wanted re-run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not due yet, or done: nothing.
    Wait,
    /// Read the workflow run.
    ReadRun,
    /// Asked or given up long enough ago: forget the entry.
    Forget,
    /// Waited [`RERUN_PATIENCE`] for the run: give up.
    GiveUp,
}

/// What to do with `rerun` at `now`, before reading its run.
pub fn next_step(rerun: &Rerun, now: OffsetDateTime) -> Step {
    match rerun.state {
        RerunState::Asked(at) | RerunState::GaveUp(at) if now - at >= RERUN_KEPT => Step::Forget,
        RerunState::Asked(_) | RerunState::GaveUp(_) => Step::Wait,
        RerunState::Wanted if now - rerun.wanted_at >= RERUN_PATIENCE => Step::GiveUp,
        RerunState::Wanted if rerun.next_check_at > now => Step::Wait,
        RerunState::Wanted => Step::ReadRun,
    }
}

/// What the workflow run's state means for a wanted re-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunVerdict {
    /// The run is done and still at the failed job's attempt: ask.
    Ask,
    /// Still in progress: wait.
    Wait,
    /// Re-run already (by someone else), or gone: never ask.
    Never(&'static str),
}

/// Whether the re-run of a job of attempt `attempt` may be asked, from its run's state.
pub fn verdict(attempt: u32, run: Option<&RunState>) -> RunVerdict {
    match run {
        None => RunVerdict::Never("GitHub does not know the workflow run"),
        Some(run) if run.run_attempt > attempt => {
            RunVerdict::Never("the workflow run was re-run already")
        }
        Some(run) if run.completed => RunVerdict::Ask,
        Some(_) => RunVerdict::Wait,
    }
}

/// Whether GitHub's refusal certainly did nothing, so the re-run may be asked again:
/// any 4xx answer, a throttle or refused credentials. A failure of transport or a 5xx
/// may have re-run the job, so it is never asked again.
pub fn refusal_did_nothing(err: &ForgeError) -> bool {
    matches!(
        err,
        ForgeError::Rejected { .. } | ForgeError::Throttled { .. } | ForgeError::Unauthorized
    )
}

#[cfg(test)]
mod tests;

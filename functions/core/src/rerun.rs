//! The re-run of a job that failed because its spot runner was interrupted: once, and on
//! on-demand.
//!
//! GitHub fails the job of a reclaimed spot instance ("The runner has received a shutdown
//! signal"). When that job's `completed` reaches the scaler with conclusion `failure` or
//! `cancelled` and its runner's record says it was interrupted, the scaler records the
//! wanted re-run ([`crate::ports::RerunStore::want_rerun`], keyed by the job's workflow run). Nothing
//! else is ever re-run.
//!
//! GitHub refuses a job re-run (403) while the job's workflow run is still in progress,
//! and a run stays in progress until its other jobs end. So the re-run is not asked at
//! once: the reaper's run reads the workflow run ([`crate::ports::WorkflowRuns::run_state`]) and asks
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

pub use crate::model::{Rerun, RerunState, RunKey, RunState};
use std::time::Duration;
use time::OffsetDateTime;

/// How long a wanted re-run waits for its workflow run to complete before it is given up.
pub const RERUN_PATIENCE: Duration = Duration::from_secs(24 * 3600);
/// How often the reaper reads a workflow run that is still in progress.
pub const RUN_CHECK: Duration = Duration::from_secs(60);
/// How long an asked (or given up) entry is kept, so the re-run's jobs find it.
pub const RERUN_KEPT: Duration = Duration::from_secs(24 * 3600);

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

#[cfg(test)]
mod tests;

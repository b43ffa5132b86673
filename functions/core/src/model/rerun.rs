//! A wanted re-run of a job its spot runner's interruption failed, as the table keeps
//! it, and GitHub's view of its workflow run; what is done with them is
//! [`crate::rerun`]'s.

use time::OffsetDateTime;

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

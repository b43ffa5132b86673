//! The job's status: GitHub's view of a workflow job, as far as ephemera tracks it. It
//! only moves forward ([`JobStatus::earlier`]), so webhooks that come late, twice or out
//! of order never undo progress.

use serde::{Deserialize, Serialize};

/// What GitHub says a job is doing, as far as ephemera tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    InProgress,
    Completed,
}

impl JobStatus {
    pub const ALL: [JobStatus; 3] = [
        JobStatus::Queued,
        JobStatus::InProgress,
        JobStatus::Completed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::InProgress => "in_progress",
            JobStatus::Completed => "completed",
        }
    }

    /// Statuses a job may move forward from to reach `self` (never backwards, so
    /// webhooks that arrive out of order cannot undo progress): the job's transition
    /// table, read by destination; the store writes `IF status IN (earlier(to))`.
    pub fn earlier(self) -> &'static [JobStatus] {
        match self {
            JobStatus::Queued => &[],
            JobStatus::InProgress => &[JobStatus::Queued],
            JobStatus::Completed => &[JobStatus::Queued, JobStatus::InProgress],
        }
    }
}

status_names!(JobStatus);

impl JobStatus {
    /// Whether the table allows moving from `self` to `to`.
    pub fn can_move_to(self, to: JobStatus) -> bool {
        to.earlier().contains(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::JobStatus::*;
    use super::*;

    #[test]
    fn a_job_only_moves_forward() {
        let allowed: &[(JobStatus, &[JobStatus])] = &[
            (Queued, &[InProgress, Completed]),
            (InProgress, &[Completed]),
            (Completed, &[]),
        ];
        super::super::assert_moves(allowed, &JobStatus::ALL, JobStatus::can_move_to);
    }
}

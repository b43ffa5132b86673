//! The job's claim, and with it the runner's binding to a job. A queued job's
//! `runner_name` is its claim: the one runner record that may be created, launched and
//! registered for it. That runner's record names the job (`job_id`) from the claim on;
//! once the job is past `queued`, `runner_name` names the runner that runs it, and that
//! runner's record is `active` on it (see [`super::RunnerStatus`]).
//!
//! [`ClaimMove::allowed_from`] is the table; the store checks every claim write against
//! it (the memory store by name, the DynamoDB store in the write's condition), and a
//! hand-over writes the two runner records in the same transaction as the claim, so no
//! crash leaves two records naming one queued job.

use super::JobStatus;
use crate::model::JobRecord;
use std::fmt;

/// Where a job's claim stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimState {
    /// Queued, and no runner claims it: the next `queued` delivery claims it.
    Unclaimed,
    /// Queued, and claimed by the runner it names.
    Claimed,
    /// Past `queued`: it names the runner that runs or ran it, if any webhook said.
    Bound,
}

impl ClaimState {
    pub const ALL: [ClaimState; 3] = [
        ClaimState::Unclaimed,
        ClaimState::Claimed,
        ClaimState::Bound,
    ];

    pub fn of(job: &JobRecord) -> ClaimState {
        match (job.status, &job.runner_name) {
            (JobStatus::Queued, None) => ClaimState::Unclaimed,
            (JobStatus::Queued, Some(_)) => ClaimState::Claimed,
            _ => ClaimState::Bound,
        }
    }
}

impl fmt::Display for ClaimState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A write to a job's claim, with who makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimMove {
    /// The scaler claims the job for a new runner record, with a pool slot
    /// (`RunnerStore::claim_job`): → `Claimed`.
    Claim,
    /// The runner launched for the job took another; the claim passes to the runner
    /// launched for the job taken (`RunnerStore::hand_over_claim`): `Claimed` → `Claimed`.
    HandOver,
    /// The claim is dropped so that a new runner may be claimed: a failed creation, or a
    /// taken runner whose job found no free runner (`unclaim_job`, `hand_over_claim`):
    /// → `Unclaimed`.
    Drop,
    /// A webhook or the reaper moves the job past `queued`, naming the runner that runs
    /// it when known (`advance_job`): → `Bound`.
    Bind,
}

impl ClaimMove {
    pub const ALL: [ClaimMove; 4] = [
        ClaimMove::Claim,
        ClaimMove::HandOver,
        ClaimMove::Drop,
        ClaimMove::Bind,
    ];

    /// The claim states this move may be made from.
    pub fn allowed_from(self) -> &'static [ClaimState] {
        use ClaimState::*;
        match self {
            ClaimMove::Claim => &[Unclaimed],
            ClaimMove::HandOver | ClaimMove::Drop => &[Claimed],
            ClaimMove::Bind => &[Unclaimed, Claimed, Bound],
        }
    }

    /// Whether the table allows this move on `job` as it is.
    pub fn allowed_on(self, job: &JobRecord) -> bool {
        self.allowed_from().contains(&ClaimState::of(job))
    }
}

#[cfg(test)]
mod tests {
    use super::ClaimState::*;
    use super::*;

    #[test]
    fn claim_table_is_as_documented() {
        let allowed: &[(ClaimMove, &[ClaimState])] = &[
            (ClaimMove::Claim, &[Unclaimed]),
            (ClaimMove::HandOver, &[Claimed]),
            (ClaimMove::Drop, &[Claimed]),
            (ClaimMove::Bind, &[Unclaimed, Claimed, Bound]),
        ];
        for (movement, from) in allowed {
            for state in ClaimState::ALL {
                assert_eq!(
                    movement.allowed_from().contains(&state),
                    from.contains(&state),
                    "{movement:?} from {state}"
                );
            }
        }
    }
}

//! The state machines of ephemera's records, each one table of allowed moves that the
//! store enforces, so a writer can never move a record along an edge that is not in it:
//!
//! - [`InstanceStatus`] (`instance.rs`): the runner instance, as GARM names it; the
//!   DynamoDB store turns the table into the condition of every status update, and a test
//!   keeps docs/design.md in step with it.
//! - [`RunnerStatus`] (`runner.rs`): GitHub's view of the runner's registration.
//! - [`JobStatus`] (`job.rs`): GitHub's view of the job, forward only.
//! - [`ClaimMove`] (`claim.rs`): a queued job's claim by one runner, its hand-over and its
//!   binding to the runner that runs it.
//!
//! docs/design.md's "Job × runner events" table says which event makes which move.

mod claim;
mod instance;
mod job;
mod runner;

pub use claim::{ClaimMove, ClaimState};
pub use instance::{InstanceStatus, CREATE_LEASE};
pub use job::JobStatus;
pub use runner::RunnerStatus;

/// A status string that names no [`InstanceStatus`], [`RunnerStatus`] or [`JobStatus`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown status {0:?}")]
pub struct UnknownStatus(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_through_strings() {
        for status in RunnerStatus::ALL {
            assert_eq!(status.as_str().parse::<RunnerStatus>(), Ok(status));
        }
        for status in JobStatus::ALL {
            assert_eq!(status.as_str().parse::<JobStatus>(), Ok(status));
        }
        assert!("runnning".parse::<RunnerStatus>().is_err());
    }
}

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

/// `Display` and `FromStr` of a status through its `ALL` and `as_str`, the same for every
/// table; `old => status` lets a spelling that items were once written with still read.
macro_rules! status_names {
    ($status:ident $(, $old:literal => $alias:expr)?) => {
        impl std::fmt::Display for $status {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $status {
            type Err = super::UnknownStatus;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $(if s == $old {
                    return Ok($alias);
                })?
                $status::ALL
                    .into_iter()
                    .find(|status| status.as_str() == s)
                    .ok_or_else(|| super::UnknownStatus(s.to_owned()))
            }
        }
    };
}

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

/// Asserts that `can_move` allows exactly the moves of `allowed`, from each status to any.
#[cfg(test)]
fn assert_moves<S: Copy + PartialEq + std::fmt::Display>(
    allowed: &[(S, &[S])],
    all: &[S],
    can_move: fn(S, S) -> bool,
) {
    for (from, tos) in allowed {
        for &to in all {
            assert_eq!(can_move(*from, to), tos.contains(&to), "{from} -> {to}");
        }
    }
}

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

//! The lifecycle of a runner instance and of its GitHub registration.
//!
//! [`InstanceStatus`] follows GARM's instance lifecycle; [`RunnerStatus`] is GitHub's view
//! of the runner. [`InstanceStatus::allowed_predecessors`] is the one transition table:
//! the DynamoDB store turns it into the condition of every status update, so a writer can
//! never move a record along an edge that is not in this table.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where a runner instance is in its life, as GARM names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceStatus {
    PendingCreate,
    Creating,
    Running,
    Error,
    PendingDelete,
    PendingForceDelete,
    Deleting,
    Deleted,
}

impl InstanceStatus {
    pub const ALL: [InstanceStatus; 8] = [
        InstanceStatus::PendingCreate,
        InstanceStatus::Creating,
        InstanceStatus::Running,
        InstanceStatus::Error,
        InstanceStatus::PendingDelete,
        InstanceStatus::PendingForceDelete,
        InstanceStatus::Deleting,
        InstanceStatus::Deleted,
    ];

    /// The statuses a record may be in for a move to `self` to be allowed.
    ///
    /// This is the transition table of docs/design.md, read by destination: the store writes
    /// `SET status = :to IF status IN (allowed_predecessors(to))`.
    pub fn allowed_predecessors(self) -> &'static [InstanceStatus] {
        use InstanceStatus::*;
        match self {
            PendingCreate => &[],
            Creating => &[PendingCreate],
            Running => &[Creating],
            Error => &[Creating],
            PendingDelete => &[PendingCreate, Creating, Running, Error, Deleting],
            PendingForceDelete => &[PendingCreate, Creating, Running, Error, PendingDelete],
            Deleting => &[PendingDelete, PendingForceDelete],
            Deleted => &[Deleting],
        }
    }

    /// Whether the table allows moving from `self` to `to`.
    pub fn can_move_to(self, to: InstanceStatus) -> bool {
        to.allowed_predecessors().contains(&self)
    }

    /// Whether a record in this status still stands for something that may exist
    /// (an instance, a GitHub registration, a pool slot).
    pub fn is_live(self) -> bool {
        self != InstanceStatus::Deleted
    }

    pub fn as_str(self) -> &'static str {
        use InstanceStatus::*;
        match self {
            PendingCreate => "pending_create",
            Creating => "creating",
            Running => "running",
            Error => "error",
            PendingDelete => "pending_delete",
            PendingForceDelete => "pending_force_delete",
            Deleting => "deleting",
            Deleted => "deleted",
        }
    }
}

impl fmt::Display for InstanceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status string that names no [`InstanceStatus`] or [`RunnerStatus`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown status {0:?}")]
pub struct UnknownStatus(pub String);

impl FromStr for InstanceStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        InstanceStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

/// GitHub's view of a runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerStatus {
    /// Registered (JIT config issued) but not yet online.
    Pending,
    /// Online and waiting for a job.
    Idle,
    /// Running a job.
    Active,
    /// Was online, no longer is.
    Offline,
    /// Removed from GitHub.
    Terminated,
}

impl RunnerStatus {
    pub const ALL: [RunnerStatus; 5] = [
        RunnerStatus::Pending,
        RunnerStatus::Idle,
        RunnerStatus::Active,
        RunnerStatus::Offline,
        RunnerStatus::Terminated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunnerStatus::Pending => "pending",
            RunnerStatus::Idle => "idle",
            RunnerStatus::Active => "active",
            RunnerStatus::Offline => "offline",
            RunnerStatus::Terminated => "terminated",
        }
    }
}

impl fmt::Display for RunnerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunnerStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunnerStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::InstanceStatus::*;
    use super::*;

    #[test]
    fn table_matches_design() {
        let allowed: &[(InstanceStatus, &[InstanceStatus])] = &[
            (
                PendingCreate,
                &[Creating, PendingDelete, PendingForceDelete],
            ),
            (
                Creating,
                &[Running, Error, PendingDelete, PendingForceDelete],
            ),
            (Running, &[PendingDelete, PendingForceDelete]),
            (Error, &[PendingDelete, PendingForceDelete]),
            (PendingDelete, &[Deleting, PendingForceDelete]),
            (PendingForceDelete, &[Deleting]),
            (Deleting, &[Deleted, PendingDelete]),
            (Deleted, &[]),
        ];
        for (from, tos) in allowed {
            for to in InstanceStatus::ALL {
                assert_eq!(from.can_move_to(to), tos.contains(&to), "{from} -> {to}");
            }
        }
    }

    #[test]
    fn deleted_is_terminal() {
        assert!(InstanceStatus::ALL
            .iter()
            .all(|to| !Deleted.can_move_to(*to)));
    }

    #[test]
    fn statuses_round_trip_through_strings() {
        for status in InstanceStatus::ALL {
            assert_eq!(status.as_str().parse::<InstanceStatus>(), Ok(status));
        }
        for status in RunnerStatus::ALL {
            assert_eq!(status.as_str().parse::<RunnerStatus>(), Ok(status));
        }
        assert!("runnning".parse::<InstanceStatus>().is_err());
    }
}

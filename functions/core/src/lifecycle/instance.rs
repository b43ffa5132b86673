//! The runner instance's status, as GARM names it. [`InstanceStatus::allowed_predecessors`]
//! is its transition table: the DynamoDB store turns it into the condition of every
//! status update, so a writer can never move a record along an edge that is not in it.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long a `creating` record belongs to the delivery that touched it last. A
/// retried delivery resumes it only after that, so two deliveries of one job never
/// create twice; a delivery that died mid-way is resumed once the lease is over (the
/// scaler's resume and the reaper's stalled-creation rule both wait for it).
pub const CREATE_LEASE: Duration = Duration::from_secs(60);

/// Where a runner instance is in its life, as GARM names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceStatus {
    PendingCreate,
    Creating,
    /// A stopped pool's instance, launched with the stop behaviour, preparing to power off.
    Preparing,
    /// A stopped pool's instance, powered off and ready to be taken by one job.
    Stopped,
    /// Taken by a job (one conditional write): its JIT config is stored, then it is started.
    Starting,
    Running,
    Error,
    PendingDelete,
    PendingForceDelete,
    Deleting,
    Deleted,
}

impl InstanceStatus {
    pub const ALL: [InstanceStatus; 11] = [
        InstanceStatus::PendingCreate,
        InstanceStatus::Creating,
        InstanceStatus::Preparing,
        InstanceStatus::Stopped,
        InstanceStatus::Starting,
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
            Preparing => &[Creating],
            Stopped => &[Preparing],
            Starting => &[Stopped],
            Running => &[Creating, Starting],
            Error => &[Creating],
            PendingDelete => &[
                PendingCreate,
                Creating,
                Preparing,
                Stopped,
                Starting,
                Running,
                Error,
                Deleting,
            ],
            PendingForceDelete => &[
                PendingCreate,
                Creating,
                Preparing,
                Stopped,
                Starting,
                Running,
                Error,
                PendingDelete,
            ],
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
            Preparing => "preparing",
            Stopped => "stopped",
            Starting => "starting",
            Running => "running",
            Error => "error",
            PendingDelete => "pending_delete",
            PendingForceDelete => "pending_force_delete",
            Deleting => "deleting",
            Deleted => "deleted",
        }
    }
}

status_names!(InstanceStatus);

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
                &[Running, Preparing, Error, PendingDelete, PendingForceDelete],
            ),
            (Preparing, &[Stopped, PendingDelete, PendingForceDelete]),
            (Stopped, &[Starting, PendingDelete, PendingForceDelete]),
            (Starting, &[Running, PendingDelete, PendingForceDelete]),
            (Running, &[PendingDelete, PendingForceDelete]),
            (Error, &[PendingDelete, PendingForceDelete]),
            (PendingDelete, &[Deleting, PendingForceDelete]),
            (PendingForceDelete, &[Deleting]),
            (Deleting, &[Deleted, PendingDelete]),
            (Deleted, &[]),
        ];
        super::super::assert_moves(allowed, &InstanceStatus::ALL, InstanceStatus::can_move_to);
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
        assert!("runnning".parse::<InstanceStatus>().is_err());
    }
}

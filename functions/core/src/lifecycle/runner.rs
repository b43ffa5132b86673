//! The runner's status: GitHub's view of its registration. A record is written `pending`
//! (registered, not yet online); its job's webhooks and the reaper's look at GitHub move
//! it between `idle` and `active` (bound to the job its record names); an operator's
//! removal from GitHub ends it. [`RunnerStatus::allowed_predecessors`] is its table:
//! the store refuses a runner-status update whose record is not in a status it allows.

use serde::{Deserialize, Serialize};

/// GitHub's view of a runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerStatus {
    /// Registered (JIT config issued) but not yet online.
    Pending,
    /// Online and waiting for a job. (An item written as `offline`, a status nothing
    /// ever wrote and that is gone, reads as idle: the reaper's idle rules then judge it.)
    #[serde(alias = "offline")]
    Idle,
    /// Running a job: bound to the job its record names.
    Active,
    /// Removed from GitHub (by an operator, `ephemera runners remove`).
    Terminated,
}

impl RunnerStatus {
    pub const ALL: [RunnerStatus; 4] = [
        RunnerStatus::Pending,
        RunnerStatus::Idle,
        RunnerStatus::Active,
        RunnerStatus::Terminated,
    ];

    /// The runner statuses a record may be in for a move to `self` to be allowed.
    ///
    /// `pending` is only ever written with the record itself; `active` again binds a
    /// static runner to its next job (or a runner once more to the one it runs); `idle`
    /// again is a repeated `completed`; nothing leaves `terminated`.
    pub fn allowed_predecessors(self) -> &'static [RunnerStatus] {
        use RunnerStatus::*;
        match self {
            Pending => &[],
            Idle => &[Pending, Idle, Active],
            Active => &[Pending, Idle, Active],
            Terminated => &[Pending, Idle, Active],
        }
    }

    /// Whether the table allows moving from `self` to `to`.
    pub fn can_move_to(self, to: RunnerStatus) -> bool {
        to.allowed_predecessors().contains(&self)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunnerStatus::Pending => "pending",
            RunnerStatus::Idle => "idle",
            RunnerStatus::Active => "active",
            RunnerStatus::Terminated => "terminated",
        }
    }
}

status_names!(RunnerStatus, "offline" => RunnerStatus::Idle);

#[cfg(test)]
mod tests {
    use super::RunnerStatus::*;
    use super::*;

    #[test]
    fn runner_table_is_as_documented() {
        let allowed: &[(RunnerStatus, &[RunnerStatus])] = &[
            (Pending, &[Idle, Active, Terminated]),
            (Idle, &[Idle, Active, Terminated]),
            (Active, &[Idle, Active, Terminated]),
            (Terminated, &[]),
        ];
        super::super::assert_moves(allowed, &RunnerStatus::ALL, RunnerStatus::can_move_to);
    }

    #[test]
    fn an_item_written_offline_still_reads() {
        assert_eq!("offline".parse::<RunnerStatus>(), Ok(Idle));
        let read: RunnerStatus = serde_json::from_str("\"offline\"").expect("reads");
        assert_eq!(read, Idle);
    }
}

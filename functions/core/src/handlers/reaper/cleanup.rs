//! Why the reaper sends a live record to `pending_delete`: each record rule's stable
//! name (in its log lines and the docs) and the reason written on the record.

#[cfg(doc)]
use super::decide::WARM_STALL;

/// Why a live record is sent to `pending_delete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// `never_online`: the runner never came online.
    BootstrapTimeout,
    /// `delete_interrupted`: a reaper died in the middle of deleting it.
    StuckDeleting,
    /// `creation_failed`: creation failed; what was made is cleaned.
    CreationFailed,
    /// `instance_gone`: the `running` record's instance is gone, terminated or stopped.
    InstanceGone,
    /// `static_idle`: a static runner idle past `idle_timeout`, above the pool's
    /// `min_idle`.
    IdleStatic,
    /// `ephemeral_idle`: an ephemeral runner idle past `idle_timeout` with no queued job
    /// left in its pool (its job was cancelled or taken by another runner), above `min_idle`.
    IdleNoWork,
    /// `warm_stalled`: a warm runner (no job) whose creation made no progress for
    /// [`WARM_STALL`].
    WarmStalled,
    /// `prepare_timeout`: a stopped pool's instance not stopped within the pool's
    /// `bootstrap_timeout` of its launch (its prepare phase failed and left it up).
    PrepareTimeout,
    /// `stopped_stale`: a stopped instance launched longer ago than the pool's
    /// `stopped_max_age`, replaced so that no job starts on an old kernel.
    StoppedStale,
    /// `stopped_outdated`: a stopped instance of another image than its pool launches
    /// now (a bake moved the image since it was prepared), replaced so that a job starts
    /// on the current image.
    StoppedOutdated,
    /// `stopped_surplus`: a stopped instance above its pool's `stopped` target (a
    /// `stopped_schedule` window ended, or the target was lowered).
    StoppedSurplus,
}

impl Cleanup {
    /// The rule's stable name, in its log lines and the docs.
    pub fn rule(self) -> &'static str {
        match self {
            Cleanup::BootstrapTimeout => "never_online",
            Cleanup::StuckDeleting => "delete_interrupted",
            Cleanup::CreationFailed => "creation_failed",
            Cleanup::InstanceGone => "instance_gone",
            Cleanup::IdleStatic => "static_idle",
            Cleanup::IdleNoWork => "ephemeral_idle",
            Cleanup::WarmStalled => "warm_stalled",
            Cleanup::PrepareTimeout => "prepare_timeout",
            Cleanup::StoppedStale => "stopped_stale",
            Cleanup::StoppedOutdated => "stopped_outdated",
            Cleanup::StoppedSurplus => "stopped_surplus",
        }
    }

    /// The reason written on the record.
    pub fn reason(self) -> &'static str {
        match self {
            Cleanup::BootstrapTimeout => "bootstrap timeout: runner never came online",
            Cleanup::StuckDeleting => "stuck deleting: retrying",
            Cleanup::CreationFailed => "creation failed: cleaning up",
            Cleanup::InstanceGone => "instance gone",
            Cleanup::IdleStatic => "idle past idle_timeout",
            Cleanup::IdleNoWork => "idle past idle_timeout with no queued job left",
            Cleanup::WarmStalled => "warm runner creation stalled",
            Cleanup::PrepareTimeout => {
                "stopped pool: instance not stopped within bootstrap_timeout"
            }
            Cleanup::StoppedStale => "stopped pool: instance older than stopped_max_age",
            Cleanup::StoppedOutdated => {
                "stopped pool: instance of another image than the pool launches now"
            }
            Cleanup::StoppedSurplus => "stopped pool: above the pool's stopped target",
        }
    }
}

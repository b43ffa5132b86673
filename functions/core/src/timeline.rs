//! A job's timeline: when each stage of its wait happened, from the job's record and the
//! record of the runner that ran it, and the gaps between them (`ephemera jobs show`).
//!
//! Every stamp rides on a write the handlers make anyway, so a job costs no extra call:
//! - queued, started, completed: GitHub's `created_at`, `started_at`, `completed_at`,
//!   read from the `workflow_job` bodies and kept on the job item by the scaler's
//!   `record_job` (queued) and `advance_job` (started, completed) writes;
//! - received: the webhook's clock, carried in the queue message, on the same writes;
//! - claimed: the claim transaction's own write of the job item;
//! - launch requested, JIT config stored, terminated: the runner's history entries of
//!   its moves to `creating` (just before the launch request), `running` (after the JIT
//!   config is stored for its instance) and `deleted` (after the instance is terminated);
//! - instance launched: EC2's `LaunchTime` (when the instance entered `pending`,
//!   <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Instance.html>), from
//!   the reaper's one describe of its run, kept by the reaper's final write of the
//!   deleted runner (`finish_deletion`);
//! - JIT config read: the instance's own clock, which its bootstrap writes on its JIT
//!   item as it removes the config (an `UpdateItem` in place of the `DeleteItem` it made
//!   before); the reaper's delete of that item returns it and the same final write keeps
//!   it;
//! - runner update: the start phase's replacement of an image's runner that was behind
//!   the newest by the deployment's copy, which the bootstrap measures and writes with
//!   the read (`runner_swap_ms`); its stamp is the read's time less the swap, and only a
//!   runner that swapped has the stage;
//! - online: the runner-status update of the reaper that saw it online, or of the
//!   scaler's binding to its job (then GitHub's `started_at`: it was online by then;
//!   GitHub gives it to the second, so it is never put before the JIT config was stored).
//!
//! So those two are known once the runner is deleted, not while it runs. GitHub's, EC2's
//! and the instance's clocks give whole seconds: a stage from one of them is ordered
//! against another stage to the second.

use crate::lifecycle::InstanceStatus;
use crate::model::{JobRecord, RunnerRecord};
use time::{Duration, OffsetDateTime};

/// One stage of a job's wait and run, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    Queued,
    Received,
    Claimed,
    LaunchRequested,
    InstanceLaunched,
    JitStored,
    RunnerUpdate,
    JitRead,
    Online,
    Started,
    Completed,
    Terminated,
}

impl Stage {
    pub const ALL: [Stage; 12] = [
        Stage::Queued,
        Stage::Received,
        Stage::Claimed,
        Stage::LaunchRequested,
        Stage::InstanceLaunched,
        Stage::JitStored,
        Stage::RunnerUpdate,
        Stage::JitRead,
        Stage::Online,
        Stage::Started,
        Stage::Completed,
        Stage::Terminated,
    ];

    /// The stage's name in `jobs show` and its JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Queued => "queued",
            Stage::Received => "received",
            Stage::Claimed => "claimed",
            Stage::LaunchRequested => "launch_requested",
            Stage::InstanceLaunched => "instance_launched",
            Stage::JitStored => "jit_stored",
            Stage::RunnerUpdate => "runner_update",
            Stage::JitRead => "jit_read",
            Stage::Online => "online",
            Stage::Started => "started",
            Stage::Completed => "completed",
            Stage::Terminated => "terminated",
        }
    }

    /// What happened, in words (`jobs show`'s WHAT column).
    pub fn label(self) -> &'static str {
        match self {
            Stage::Queued => "job queued",
            Stage::Received => "webhook received",
            Stage::Claimed => "job claimed",
            Stage::LaunchRequested => "launch requested",
            Stage::InstanceLaunched => "instance launched (EC2)",
            Stage::JitStored => "JIT config stored",
            Stage::RunnerUpdate => "runner update (image behind)",
            Stage::JitRead => "JIT config read (instance)",
            Stage::Online => "runner online",
            Stage::Started => "job started",
            Stage::Completed => "job completed",
            Stage::Terminated => "instance terminated",
        }
    }

    /// Whether only the reaper's deletion of the runner learns it.
    pub fn learnt_at_deletion(self) -> bool {
        matches!(
            self,
            Stage::InstanceLaunched | Stage::RunnerUpdate | Stage::JitRead
        )
    }

    /// Whether a timeline shows the stage only when it happened: a runner update happens
    /// only on a host whose image's runner was behind.
    pub fn only_when_present(self) -> bool {
        matches!(self, Stage::RunnerUpdate)
    }

    /// Whose clock says it: GitHub's, EC2's, the instance's or ephemera's.
    pub fn source(self) -> &'static str {
        match self {
            Stage::Queued | Stage::Started | Stage::Completed => "github",
            Stage::InstanceLaunched => "ec2",
            Stage::RunnerUpdate | Stage::JitRead => "instance",
            _ => "ephemera",
        }
    }

    /// Whether its clock gives whole seconds (GitHub's, EC2's and the instance's do).
    fn whole_seconds(self) -> bool {
        self.source() != "ephemera"
    }
}

/// The stamps of the stages that must come in this order, as (earlier, later) pairs.
/// A runner launched for another job (a hand-over, a warm runner) may have been launched
/// before this job was even queued, so its own stages are ordered among themselves, not
/// against the job's claim. "Online" is when ephemera first knew it, which may be after
/// GitHub's start (a reaper's look between the start and its `in_progress`), and the
/// instance may read its JIT config before the scaler records `running`: neither is
/// ordered against those. The instance is launched after the request, reads its config
/// after it boots, and its runner starts a job only after that read; "online" is not
/// ordered against the read either, as the reaper stamps it with its run's clock, which
/// may be a little earlier than its look.
const ORDER: [(Stage, Stage); 12] = [
    (Stage::Queued, Stage::Received),
    (Stage::Received, Stage::Claimed),
    (Stage::LaunchRequested, Stage::InstanceLaunched),
    (Stage::LaunchRequested, Stage::JitStored),
    (Stage::LaunchRequested, Stage::Online),
    (Stage::InstanceLaunched, Stage::JitRead),
    (Stage::InstanceLaunched, Stage::RunnerUpdate),
    (Stage::RunnerUpdate, Stage::JitRead),
    (Stage::JitRead, Stage::Started),
    (Stage::Queued, Stage::Started),
    (Stage::Started, Stage::Completed),
    (Stage::Completed, Stage::Terminated),
];

/// From `earlier` to `later`; to the second when either stage's clock gives whole
/// seconds, so a stamp rounded down shows no gap that did not happen.
fn gap_between(earlier: (Stage, OffsetDateTime), later: (Stage, OffsetDateTime)) -> Duration {
    if earlier.0.whole_seconds() || later.0.whole_seconds() {
        Duration::seconds(later.1.unix_timestamp() - earlier.1.unix_timestamp())
    } else {
        later.1 - earlier.1
    }
}

/// Whether `later` contradicts `earlier`; to the second when either stage's clock gives
/// whole seconds (its stamp is the true time rounded down, and so is the other's then).
fn before(earlier: (Stage, OffsetDateTime), later: (Stage, OffsetDateTime)) -> bool {
    if earlier.0.whole_seconds() || later.0.whole_seconds() {
        later.1.unix_timestamp() < earlier.1.unix_timestamp()
    } else {
        later.1 < earlier.1
    }
}

/// One stage and when it happened, if known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub stage: Stage,
    pub at: Option<OffsetDateTime>,
    /// Since the closest earlier stage that has a time (to the second when either
    /// stamp comes from a clock that gives whole seconds).
    pub gap: Option<Duration>,
}

/// A job's stamps, every stage in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    pub stamps: Vec<Stamp>,
    /// Whether the runner was launched for this job (false: handed over, or warm).
    pub own_runner: bool,
}

/// The first time the runner's history records a move to `status`.
/// How long a stopped pool's instance was recorded `stopped`: from its move to `stopped`
/// until a job took it (`starting`), or until `until` when none did; `None` for a record
/// never `stopped`. (The record moves a reaper run after the host powers off, so the
/// span errs short by up to a run, never long.)
pub fn stopped_span(runner: &RunnerRecord, until: OffsetDateTime) -> Option<time::Duration> {
    let stopped = first_move(runner, InstanceStatus::Stopped)?;
    let ended = first_move(runner, InstanceStatus::Starting).unwrap_or(until);
    Some((ended - stopped).max(time::Duration::ZERO))
}

fn first_move(runner: &RunnerRecord, status: InstanceStatus) -> Option<OffsetDateTime> {
    runner
        .history
        .iter()
        .find(|entry| entry.status == Some(status))
        .map(|entry| entry.at)
}

/// When the runner's JIT config was stored for its instance: its record's move to
/// `running`.
pub fn jit_stored_at(runner: &RunnerRecord) -> Option<OffsetDateTime> {
    first_move(runner, InstanceStatus::Running)
}

/// When the host began replacing its image's runner: its JIT read less the swap's
/// milliseconds (the start phase swaps the runner before it reads the config).
pub fn runner_update_at(runner: &RunnerRecord) -> Option<OffsetDateTime> {
    let swap = runner.host_runner.runner_swap_ms?;
    let swap = Duration::milliseconds(i64::try_from(swap).ok()?);
    Some(runner.jit_read_at? - swap)
}

/// When the runner's launch was requested: its record's move to `creating`.
pub fn launch_requested_at(runner: &RunnerRecord) -> Option<OffsetDateTime> {
    first_move(runner, InstanceStatus::Creating)
}

impl Timeline {
    /// The timeline of `job`, with the stages of `runner` (the one that ran it, or the
    /// one launched for it while it waits).
    pub fn of(job: &JobRecord, runner: Option<&RunnerRecord>) -> Timeline {
        let at = |stage| match stage {
            Stage::Queued => job.github.created_at,
            Stage::Received => Some(job.received_at),
            Stage::Claimed => job.claimed_at,
            Stage::LaunchRequested => runner.and_then(launch_requested_at),
            Stage::InstanceLaunched => runner.and_then(|r| r.instance_launched_at),
            Stage::JitStored => runner.and_then(jit_stored_at),
            Stage::RunnerUpdate => runner.and_then(runner_update_at),
            Stage::JitRead => runner.and_then(|r| r.jit_read_at),
            Stage::Online => runner.and_then(|r| r.online_at),
            Stage::Started => job.github.started_at,
            Stage::Completed => job.github.completed_at,
            Stage::Terminated => runner.and_then(|r| first_move(r, InstanceStatus::Deleted)),
        };
        let mut last: Option<(Stage, OffsetDateTime)> = None;
        let stamps = Stage::ALL
            .into_iter()
            .filter(|&stage| !stage.only_when_present() || at(stage).is_some())
            .map(|stage| {
                let at = at(stage);
                let gap = at
                    .zip(last)
                    .map(|(at, last)| gap_between(last, (stage, at)));
                last = at.map(|at| (stage, at)).or(last);
                Stamp { stage, at, gap }
            })
            .collect();
        let own_runner = match runner {
            Some(runner) => job.launched_runner.as_deref() == Some(runner.name.as_str()),
            None => false,
        };
        Timeline { stamps, own_runner }
    }

    /// When `stage` happened, if known.
    pub fn at(&self, stage: Stage) -> Option<OffsetDateTime> {
        self.stamps.iter().find(|s| s.stage == stage)?.at
    }

    /// The stages without a time.
    pub fn missing(&self) -> Vec<Stage> {
        self.stamps
            .iter()
            .filter(|s| s.at.is_none())
            .map(|s| s.stage)
            .collect()
    }

    /// The pairs of stages whose times contradict the order they must happen in (both
    /// known, the later one earlier); claimed → launch requested counts only for a
    /// runner launched for this job.
    pub fn out_of_order(&self) -> Vec<(Stage, Stage)> {
        let own = self
            .own_runner
            .then_some((Stage::Claimed, Stage::LaunchRequested));
        ORDER
            .into_iter()
            .chain(own)
            .filter(
                |&(earlier, later)| match (self.at(earlier), self.at(later)) {
                    (Some(e), Some(l)) => before((earlier, e), (later, l)),
                    _ => false,
                },
            )
            .collect()
    }

    /// Queued → started, or queued → `now` while the job waits; GitHub's queued time,
    /// or the webhook's receipt when GitHub's is not known. `None` once the job ended
    /// without a known start.
    pub fn wait(job: &JobRecord, now: OffsetDateTime) -> Option<Duration> {
        let queued = job.github.created_at.unwrap_or(job.received_at);
        match (job.github.started_at, job.status) {
            (Some(started), _) => Some(started - queued),
            (None, crate::model::JobStatus::Queued) => Some(now - queued),
            (None, _) => None,
        }
    }
}

#[cfg(test)]
#[path = "timeline_tests.rs"]
mod tests;

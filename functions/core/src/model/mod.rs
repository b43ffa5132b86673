//! The records ephemera keeps: runners, jobs and pools, and the plain values the
//! decisions and the ports share (a market, a launch request, a price, a re-run, a
//! pool's spot breaker).
//!
//! These are plain data; how they map onto DynamoDB items is the store adapter's business.
//! Records import no other layer of the crate (see `lib.rs`, "Layers"): what a value
//! means for a decision is written beside that decision (`impl Price` in
//! [`crate::prices`], `impl SpotBreakerState` in [`crate::breaker`]).

pub use crate::lifecycle::JobStatus;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::message::QueueMessage;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

mod breaker;
mod launch;
mod prices;
mod rerun;

pub use breaker::SpotBreakerState;
pub use launch::{FleetRequest, Market, RootVolume, Shape, SpotAllocation, TemplateVersion};
pub use prices::{JobCost, Price};
pub use rerun::{Rerun, RerunState, RunKey, RunState};

/// One runner: an EC2 instance and its GitHub registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerRecord {
    pub name: String,
    pub pool: String,
    pub status: InstanceStatus,
    pub runner_status: RunnerStatus,
    pub instance_id: Option<String>,
    pub github_runner_id: Option<u64>,
    /// The job this runner was launched for, then the job it runs.
    pub job_id: Option<u64>,
    /// When the webhook for the job it was launched for arrived (for the queued→launched
    /// and queued→online timings).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub job_queued_at: Option<OffsetDateTime>,
    pub labels: Vec<String>,
    pub ephemeral: bool,
    /// Where the runner is registered: the installation, the owner (org or user) and,
    /// for repository-scoped runners, the repository.
    pub installation_id: Option<u64>,
    pub owner: String,
    pub repo: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// Why the record is in its status (`job completed`, `busy`, `operator`...).
    pub reason: Option<String>,
    /// Whether the record holds one of its pool's slots (from its creation until it is
    /// deleted, or until a failed launch gives the slot back).
    #[serde(default = "holds_slot")]
    pub slot_held: bool,
    /// Failed deletion attempts so far.
    pub attempts: u32,
    /// When the reaper should next act on this record (the GSI's sort key).
    #[serde(with = "time::serde::rfc3339")]
    pub next_attempt_at: OffsetDateTime,
    /// The last error met while acting on this record.
    pub last_error: Option<String>,
    /// When the table may forget the record (set once `deleted`).
    #[serde(with = "time::serde::rfc3339::option")]
    pub ttl: Option<OffsetDateTime>,
    /// The last [`HISTORY_CAP`] status changes, oldest first, written by the store with
    /// every transition and runner-status change.
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
    /// When the runner was first known online: the reaper saw it online on GitHub, or a
    /// job's `in_progress` named it (then GitHub's `started_at`, by which it was online).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub online_at: Option<OffsetDateTime>,
    /// The instance's type and market, from the launch's answer (none for a record
    /// written before they were kept).
    #[serde(default)]
    pub instance_type: Option<String>,
    #[serde(default)]
    pub market: Option<Market>,
    /// What its instance cost, written with the move to `deleted` (see [`crate::prices`]).
    #[serde(default)]
    pub cost: Option<JobCost>,
    /// EC2's launch time of the instance (when it entered `pending`), kept by the reaper
    /// when it deletes the runner.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub instance_launched_at: Option<OffsetDateTime>,
    /// When the instance read its JIT config (its own clock, to the second), kept by the
    /// reaper from the tombstone the bootstrap left.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub jit_read_at: Option<OffsetDateTime>,
    /// The runner its host ran, as the host wrote it in the same tombstone (see
    /// [`HostRunner`]); empty for a host that wrote none.
    #[serde(default, flatten)]
    pub host_runner: HostRunner,
    /// When EC2 warned that it reclaims the runner's spot instance (the warning's own
    /// time; the first warning stands); `None` for a runner no warning named. A job this
    /// runner fails is then the interruption's doing, and may be re-run.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub interrupted_at: Option<OffsetDateTime>,
    /// A stopped pool's instance: launched for no job, to prepare and power off
    /// (docs/design.md, "Stopped pool"), then kept `stopped` until a job takes it.
    #[serde(default)]
    pub prepare: bool,
    /// The root volume its instance was launched with (size in GiB, EBS type), from the
    /// launch's answer, when it said: what a stopped instance costs while it waits.
    #[serde(default)]
    pub root_volume_gib: Option<u32>,
    #[serde(default)]
    pub root_volume_type: Option<String>,
}

impl RunnerRecord {
    /// Appends to the history, dropping the oldest entries past [`HISTORY_CAP`].
    pub fn note(&mut self, entry: HistoryEntry) {
        self.history.push(entry);
        let excess = self.history.len().saturating_sub(HISTORY_CAP);
        self.history.drain(..excess);
    }
}

/// What a runner's host reported of the runner it ran, written in its JIT item's
/// tombstone as it read its config (`runner_version`, `runner_image_version`,
/// `runner_swap_ms`) and kept on the record by the reaper; `None` where the host wrote
/// nothing (a host of an earlier bootstrap).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRunner {
    /// The runner version that ran the job, e.g. `2.337.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_version: Option<String>,
    /// The runner version the image had baked in; none on a stock image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_image_version: Option<String>,
    /// Milliseconds the start phase spent replacing the image's runner with the newest
    /// (download, sum check, unpack); none when the image's runner was current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_swap_ms: Option<u64>,
}

impl HostRunner {
    /// Whether the host reported anything.
    pub fn is_empty(&self) -> bool {
        *self == HostRunner::default()
    }

    /// Whether the image's baked runner was behind the one that ran: `None` when the host
    /// did not say (no runner version) or ran a stock image (no baked version).
    pub fn image_behind(&self) -> Option<bool> {
        let ran = self.runner_version.as_deref()?;
        let baked = self.runner_image_version.as_deref()?;
        Some(baked != ran)
    }

    /// `self`, with what it lacks taken from `earlier`.
    pub fn or(self, earlier: &HostRunner) -> HostRunner {
        HostRunner {
            runner_version: self.runner_version.or(earlier.runner_version.clone()),
            runner_image_version: self
                .runner_image_version
                .or(earlier.runner_image_version.clone()),
            runner_swap_ms: self.runner_swap_ms.or(earlier.runner_swap_ms),
        }
    }
}

/// How the history note of a spot interruption warning begins. Records written before
/// [`RunnerRecord::interrupted_at`] was kept say so only in this note, and builds before
/// it look for the note alone: the warning still leaves it, and a store reading an older
/// record takes the note's time for `interrupted_at` (the one place that reads the note).
pub const INTERRUPTION_NOTE: &str = "spot interruption warning";

/// How many history entries a record keeps; older ones are dropped.
pub const HISTORY_CAP: usize = 32;

/// One step of a runner's life: a status change or a runner-status change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub status: Option<InstanceStatus>,
    pub runner_status: Option<RunnerStatus>,
    pub reason: Option<String>,
}

impl HistoryEntry {
    /// A move to `status`.
    pub fn status(
        at: OffsetDateTime,
        status: InstanceStatus,
        reason: Option<String>,
    ) -> HistoryEntry {
        HistoryEntry {
            at,
            status: Some(status),
            runner_status: None,
            reason,
        }
    }

    /// GitHub's view of the runner changed to `runner_status`.
    pub fn runner_status(at: OffsetDateTime, runner_status: RunnerStatus) -> HistoryEntry {
        HistoryEntry {
            at,
            status: None,
            runner_status: Some(runner_status),
            reason: None,
        }
    }
}

impl HistoryEntry {
    /// The history entry of a change that is not a status change: a runner-status
    /// change (with its note), or a note alone (a job handed over); `None` when the
    /// change is neither.
    pub fn of_update(
        at: OffsetDateTime,
        runner_status: Option<RunnerStatus>,
        note: Option<&str>,
    ) -> Option<HistoryEntry> {
        if runner_status.is_none() && note.is_none() {
            return None;
        }
        Some(HistoryEntry {
            at,
            status: None,
            runner_status,
            reason: note.map(str::to_owned),
        })
    }
}

impl RunnerRecord {
    /// A record for a runner about to be created.
    pub fn new(name: String, pool: String, at: OffsetDateTime) -> RunnerRecord {
        RunnerRecord {
            name,
            pool,
            status: InstanceStatus::PendingCreate,
            runner_status: RunnerStatus::Pending,
            instance_id: None,
            github_runner_id: None,
            job_id: None,
            job_queued_at: None,
            labels: Vec::new(),
            ephemeral: true,
            installation_id: None,
            owner: String::new(),
            repo: None,
            created_at: at,
            updated_at: at,
            reason: None,
            slot_held: true,
            attempts: 0,
            next_attempt_at: at,
            last_error: None,
            ttl: None,
            history: vec![HistoryEntry::status(
                at,
                InstanceStatus::PendingCreate,
                None,
            )],
            online_at: None,
            instance_type: None,
            market: None,
            cost: None,
            instance_launched_at: None,
            jit_read_at: None,
            host_runner: HostRunner::default(),
            interrupted_at: None,
            prepare: false,
            root_volume_gib: None,
            root_volume_type: None,
        }
    }
}

fn holds_slot() -> bool {
    true
}

/// When GitHub says a job was created (queued), started and completed, from the
/// `workflow_job` bodies; `None` when no body said (or said it in a form that is not RFC
/// 3339: a job is never refused for a time it carries). In a queue message and on a job
/// record these are the fields `created_at`, `started_at` and `completed_at`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitHubTimes {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub created_at: Option<OffsetDateTime>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub started_at: Option<OffsetDateTime>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub completed_at: Option<OffsetDateTime>,
}

impl GitHubTimes {
    /// These times, with any that `self` lacks taken from `other` (a job's first record
    /// keeps what its first body said; a later body fills in what it adds).
    pub fn or(self, other: GitHubTimes) -> GitHubTimes {
        GitHubTimes {
            created_at: self.created_at.or(other.created_at),
            started_at: self.started_at.or(other.started_at),
            completed_at: self.completed_at.or(other.completed_at),
        }
    }
}

/// One workflow job, as ephemera has seen it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: u64,
    pub status: JobStatus,
    pub pool: String,
    pub owner: String,
    pub repo: String,
    pub run_id: u64,
    pub installation_id: Option<u64>,
    pub labels: Vec<String>,
    /// The runner launched for this job (a claim: at most one per job); once the job
    /// runs, the runner that runs it.
    pub runner_name: Option<String>,
    /// The runner launched (or handed over) for this job, kept when another runner
    /// takes the job: where a hand-over looks for the runner that is now free.
    #[serde(default)]
    pub launched_runner: Option<String>,
    /// When the webhook received the job's first delivery (`queued`, or the first one
    /// seen when that was lost).
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// GitHub's times for the job, each kept from the first body that carried it.
    #[serde(default, flatten)]
    pub github: GitHubTimes,
    /// When the job was last claimed for a runner (the claim's own write).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub claimed_at: Option<OffsetDateTime>,
}

impl JobRecord {
    /// The job `message` tells of, in `status`, as the scaler sees it at `now`: no runner
    /// claims it yet (the claim is its own write), and GitHub's times are those the
    /// message carries (the store keeps the first body's).
    pub fn from_message(
        message: &QueueMessage,
        status: JobStatus,
        now: OffsetDateTime,
    ) -> JobRecord {
        JobRecord {
            job_id: message.job_id,
            status,
            pool: message.pool.clone(),
            owner: message.owner.clone(),
            repo: message.repo.clone(),
            run_id: message.run_id,
            installation_id: message.installation_id,
            labels: message.labels.clone(),
            runner_name: None,
            launched_runner: None,
            received_at: message.received_at,
            updated_at: now,
            github: message.github,
            claimed_at: None,
        }
    }

    /// Whether the job is queued and claimed by runner `name`: it waits for that runner.
    pub fn waits_for(&self, name: &str) -> bool {
        self.status == JobStatus::Queued && self.runner_name.as_deref() == Some(name)
    }
}

/// The pool's counter of slots taken by live runners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRecord {
    pub name: String,
    pub slots_used: u32,
}

/// Where a runner is registered on GitHub.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunnerScope {
    pub installation_id: Option<u64>,
    /// The organization, or the repository owner for repository-scoped runners.
    pub owner: String,
    /// `Some` for repository-scoped runners.
    pub repo: Option<String>,
}

/// Where the runner is registered on GitHub: the scaler registers it there, the reaper
/// removes it from there.
pub fn scope_of(runner: &RunnerRecord) -> RunnerScope {
    RunnerScope {
        installation_id: runner.installation_id,
        owner: runner.owner.clone(),
        repo: runner.repo.clone(),
    }
}

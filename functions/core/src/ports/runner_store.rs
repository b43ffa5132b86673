//! [`RunnerStore`]: the table of runners, jobs and pools, the one place their status
//! changes, each change conditional on the transition tables of [`crate::lifecycle`].
//!
//! Fake: `memory::MemoryStore`. Adapter: `ephemera_aws::DynamoRunnerStore`.

use super::Cause;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::model::{
    HostRunner, JobCost, JobRecord, JobStatus, Market, PoolRecord, RootVolume, RunnerRecord,
};
use async_trait::async_trait;
use time::OffsetDateTime;

/// A status change of a runner record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub to: InstanceStatus,
    /// Also require the record to be in exactly this status (optimistic concurrency).
    pub expect: Option<InstanceStatus>,
    pub at: OffsetDateTime,
    /// When the reaper should next look at the record.
    pub next_attempt_at: OffsetDateTime,
    pub reason: Option<String>,
    /// `Some` sets the failed-attempt count.
    pub attempts: Option<u32>,
    /// `Some` records the last error.
    pub error: Option<String>,
    /// `Some` sets the record's expiry.
    pub ttl: Option<OffsetDateTime>,
}

impl Transition {
    /// A move to `to` from exactly `from`, due for the reaper at once.
    pub fn new(from: InstanceStatus, to: InstanceStatus, at: OffsetDateTime) -> Transition {
        Transition {
            to,
            expect: Some(from),
            at,
            next_attempt_at: at,
            reason: None,
            attempts: None,
            error: None,
            ttl: None,
        }
    }

    pub fn because(mut self, reason: impl Into<String>) -> Transition {
        self.reason = Some(reason.into());
        self
    }
}

/// Fields of a runner record that change without a status change; `None` leaves a
/// field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerUpdate {
    pub instance_id: Option<String>,
    pub github_runner_id: Option<u64>,
    pub runner_status: Option<RunnerStatus>,
    pub job_id: Option<u64>,
    /// Why the runner status changed, kept in the history entry of that change; or, with
    /// no runner-status change, a history entry of its own (a job handed over).
    pub note: Option<String>,
    /// `Some` makes the update conditional on the record's `updated_at` still being this
    /// (a lease on a record read earlier); [`StoreError::Conflict`] otherwise.
    pub unchanged_since: Option<OffsetDateTime>,
    /// `Some(None)` makes the update conditional on the record naming no instance yet,
    /// `Some(Some(id))` on it naming instance `id`; [`StoreError::Conflict`] otherwise.
    /// A creation records its instance, then its GitHub runner, under this guard: of two
    /// deliveries that both launched, only one instance is recorded and only that one
    /// gets a JIT config, while unrelated changes to the record (a job handed over, the
    /// runner seen online) do not stop the creation.
    pub expect_instance: Option<Option<String>>,
    /// `Some` records when the runner was first known online, unless a time is recorded
    /// already (the first sighting stands).
    pub online_at: Option<OffsetDateTime>,
    /// `Some` records the instance's type, as the launch answer named it.
    pub instance_type: Option<String>,
    /// `Some` records the market the instance was bought in.
    pub market: Option<Market>,
    /// `Some` records the root volume the launch gave the instance.
    pub root_volume: Option<RootVolume>,
    /// `Some` records when EC2 warned of the instance's interruption, unless a time is
    /// recorded already (the first warning stands).
    pub interrupted_at: Option<OffsetDateTime>,
}

/// What the reaper learnt of a runner's host while deleting it, kept on the record by
/// [`RunnerStore::finish_deletion`] for the job's timeline; `None` leaves a field unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostStamps {
    /// EC2's `LaunchTime` of the instance, from the reaper's describe of that run.
    pub instance_launched_at: Option<OffsetDateTime>,
    /// When the instance read its JIT config, from the tombstone its bootstrap left.
    pub jit_read_at: Option<OffsetDateTime>,
    /// The runner the host ran, from the same tombstone.
    pub runner: HostRunner,
}

/// A queued job's claim moving off the runner launched for it, which GitHub gave
/// another job (see [`RunnerStore::hand_over_claim`]): no crash between these writes can
/// leave two records naming the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimHandOver {
    /// The queued job, claimed by `taker`.
    pub job_id: u64,
    /// The runner that took another job, and its update: bound to the job it took.
    pub taker: (String, RunnerUpdate),
    /// The runner the claim passes to, and its update naming the job; `None` drops the
    /// claim, for a new runner.
    pub to: Option<(String, RunnerUpdate)>,
}

/// A pool's slot counter as the table holds it, with when it last changed: the reaper
/// repairs a drifted counter only once it has stood still (see
/// [`RunnerStore::repair_pool_counter`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCounter {
    pub slots_used: u32,
    /// When a claim, a release or a repair last wrote the counter; `None` if never.
    pub updated_at: Option<OffsetDateTime>,
}

/// The result of [`RunnerStore::claim_job`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The job is ours, the runner record exists and a slot is taken.
    Claimed,
    /// Another delivery of this job got there first, with this runner.
    AlreadyClaimed { runner_name: String },
    /// The job is no longer queued.
    NotQueued(JobStatus),
    /// The pool has no free slot.
    PoolFull,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The table refused the status change: the record is not in a status from which
    /// the transition table (and the caller's expectation) allows it.
    #[error("runner {name}: transition to {to} refused (status is {actual})")]
    TransitionRefused {
        name: String,
        to: InstanceStatus,
        actual: String,
    },
    #[error("{0} not found")]
    NotFound(String),
    /// A concurrent writer changed the item; reading again and retrying is safe.
    #[error("concurrent update of {0}")]
    Conflict(String),
    #[error("table throttled the request")]
    Throttled(#[source] Cause),
    #[error("item {key} cannot be read: {message}")]
    Corrupt { key: String, message: String },
    #[error("table request failed")]
    Transient(#[source] Cause),
}

/// The table of runners, jobs and pools.
#[async_trait]
pub trait RunnerStore: Send + Sync {
    /// Records a newly seen job unless it is already known (conditional put; idempotent).
    /// Returns the stored record: `job` itself, or the one already there.
    async fn record_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError>;

    /// Reads a job.
    async fn get_job(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError>;

    /// Moves a job forward to `status` (creating a minimal record if none exists) and
    /// names its runner; a job already past `status` is left as it is, and one already at
    /// `status` only gets its runner named (when `runner_name` is given). Conditional.
    async fn advance_job(
        &self,
        job: &JobRecord,
        status: JobStatus,
        runner_name: Option<&str>,
    ) -> Result<(), StoreError>;

    /// In one transaction: claims the queued job `job_id` for `runner`, writes the runner
    /// record, and takes a slot in the runner's pool if fewer than `max_runners` are
    /// taken. Nothing is written unless all three hold.
    async fn claim_job(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<Claim, StoreError>;

    /// In one transaction: writes a new runner record that no job claims (a warm runner,
    /// see the reaper) and takes a slot in its pool if fewer than `max_runners` are
    /// taken. False, and nothing written, when the pool is full; [`StoreError::Conflict`]
    /// when another transaction held the pool item (retrying is safe). Conditional.
    async fn reserve_runner(
        &self,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<bool, StoreError>;

    /// Drops a job's claim by `runner_name`, so a retry may launch another runner.
    /// Conditional on the job still being queued and claimed by that runner (the runner
    /// of a job in progress or completed is never dropped); idempotent.
    async fn unclaim_job(&self, job_id: u64, runner_name: &str) -> Result<(), StoreError>;

    /// In one transaction: moves queued job `job_id`'s claim from the runner that took
    /// another job to the free runner (or drops it, with no free runner) and applies
    /// both runners' updates, each conditional on its guards
    /// ([`RunnerUpdate::unchanged_since`]). Nothing is written unless all hold: false
    /// when the job is no longer queued or no longer the taker's, [`StoreError::Conflict`]
    /// when a record changed since it was read (or another transaction held an item).
    async fn hand_over_claim(
        &self,
        hand_over: &ClaimHandOver,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// In one transaction: moves the stopped runner `runner_name` (a stopped pool's, with
    /// no job) to `starting` for the queued job `job_id`, and claims the job for it. False,
    /// and nothing written, when the runner is no longer stopped and free or the job no
    /// longer queued and unclaimed; [`StoreError::Conflict`] when another transaction held
    /// an item (retrying is safe). Conditional: two jobs never take one instance.
    async fn take_stopped(
        &self,
        job_id: u64,
        runner_name: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// Reads a runner record.
    async fn get_runner(&self, name: &str) -> Result<Option<RunnerRecord>, StoreError>;

    /// Sets fields that are not the status. Conditional on the record existing (and, with
    /// [`RunnerUpdate::unchanged_since`], on it not having changed since).
    async fn update_runner(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<RunnerRecord, StoreError>;

    /// Changes a record's status, conditional on the transition table (and on
    /// `transition.expect`); a refused change is [`StoreError::TransitionRefused`].
    async fn transition(
        &self,
        name: &str,
        transition: &Transition,
    ) -> Result<RunnerRecord, StoreError>;

    /// In one transaction: `creating` → `error` with `error` kept on the record, and the
    /// runner's pool slot given back at once (the record then holds none), so a failed
    /// launch never keeps capacity from the jobs behind it.
    async fn fail_creation(
        &self,
        name: &str,
        at: OffsetDateTime,
        error: &str,
    ) -> Result<RunnerRecord, StoreError>;

    /// In one transaction: `deleting` → `deleted` with `ttl`, the `host` stamps the
    /// deletion learnt and what its instance `cost`, and the runner's pool slot given
    /// back if it still holds one. Refused (and nothing released) unless the record is
    /// `deleting`.
    async fn finish_deletion(
        &self,
        name: &str,
        at: OffsetDateTime,
        ttl: OffsetDateTime,
        host: &HostStamps,
        cost: Option<&JobCost>,
    ) -> Result<(), StoreError>;

    /// Runner records in `status` due by `due` (`next_attempt_at <= due`), earliest
    /// first, at most `limit`. Reads the status index, never the whole table.
    async fn runners_in_status(
        &self,
        status: InstanceStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<RunnerRecord>, StoreError>;

    /// The runner records naming the EC2 instance `instance_id`, in any status (one, or
    /// none for an instance no runner was launched on). Reads the instance index and
    /// the records it points to, never the live records status by status.
    async fn runners_on_instance(&self, instance_id: &str)
        -> Result<Vec<RunnerRecord>, StoreError>;

    /// Reads a pool's counter (zero slots for a pool never used).
    async fn get_pool(&self, name: &str) -> Result<PoolRecord, StoreError>;

    /// Job records in `status` due by `due` (`next_attempt_at <= due`; a job is first due
    /// when it was received), earliest first, at most `limit`. Reads the status index.
    async fn jobs_in_status(
        &self,
        status: JobStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError>;

    /// Sets when the reaper next looks at a queued job. Conditional on the job still
    /// being `queued`; false (and nothing written) otherwise. Idempotent.
    async fn recheck_job_at(&self, job_id: u64, at: OffsetDateTime) -> Result<bool, StoreError>;

    /// Sets when the reaper next looks at a runner record, leaving every other field
    /// (`updated_at` included) as it is. Conditional on the record being in `status`;
    /// false (and nothing written) otherwise. Idempotent.
    async fn recheck_runner_at(
        &self,
        name: &str,
        status: InstanceStatus,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// Reads a pool's counter and when it last changed, strongly consistent.
    async fn pool_counter(&self, name: &str) -> Result<PoolCounter, StoreError>;

    /// Sets a pool's counter to `slots_used`, conditional on it still holding exactly
    /// what was `observed` (value and time of the last change), so a claim or release
    /// made since is never overwritten; false (and nothing written) otherwise.
    async fn repair_pool_counter(
        &self,
        name: &str,
        observed: &PoolCounter,
        slots_used: u32,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;
}

//! The narrow traits through which handlers reach the outside world.
//!
//! Each handler takes only the ports it needs: the webhook can only send to the queue,
//! the reaper can terminate but not launch (for the warm pool it reserves a runner and
//! asks the scaler, through the queue, to create it). No SDK or HTTP type appears here; adapters in
//! `ephemera-aws` and `ephemera-github` implement these, and `memory` has fakes (feature `fakes`).

use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::message::QueueMessage;
use crate::model::{JobRecord, JobStatus, PoolRecord, RunnerRecord};
use crate::prices::{JobCost, Price};
use async_trait::async_trait;
use secrecy::SecretString;
use std::time::Duration;
use time::OffsetDateTime;

mod apps;
mod tokens;
pub use apps::{AppSource, SeveralApps};
pub use tokens::{fingerprint_of, SharedToken, TokenShelf};

/// An error from below that callers do not branch on, kept with its cause.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

// ----------------------------------------------------------------------------- store

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
}

/// What the reaper learnt of a runner's host while deleting it, kept on the record by
/// [`RunnerStore::finish_deletion`] for the job's timeline; `None` leaves a field unset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostStamps {
    /// EC2's `LaunchTime` of the instance, from the reaper's describe of that run.
    pub instance_launched_at: Option<OffsetDateTime>,
    /// When the instance read its JIT config, from the tombstone its bootstrap left.
    pub jit_read_at: Option<OffsetDateTime>,
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

// ----------------------------------------------------------------------------- queue

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue throttled the request")]
    Throttled(#[source] Cause),
    #[error("queue request failed")]
    Transient(#[source] Cause),
}

/// The jobs queue between webhook and scaler.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Sends one message. Not idempotent: the scaler copes with duplicates.
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError>;

    /// Sends one message that becomes visible only after `delay` (at most 15 minutes):
    /// a job waiting for capacity goes back in line as a fresh message, so waiting never
    /// counts against the queue's maxReceiveCount.
    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError>;
}

// ----------------------------------------------------------------------------- prices

/// Why a price list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("price list throttled the request")]
    Throttled(#[source] Cause),
    #[error("price list request failed")]
    Transient(#[source] Cause),
}

/// The providers' price lists (AWS: the Price List Query API for on-demand, the spot
/// price history for spot), read by the reaper at most daily per type.
#[async_trait]
pub trait PriceList: Send + Sync {
    /// The region whose prices are read.
    fn region(&self) -> &str;

    /// The current price of an hour of `instance_type` in `market`, in millionths of a
    /// USD; `None` when the region does not offer it. Read-only.
    async fn hourly_price(
        &self,
        instance_type: &str,
        market: Market,
    ) -> Result<Option<u64>, PriceError>;
}

/// The cached prices, kept in the deployment's table.
#[async_trait]
pub trait PriceBook: Send + Sync {
    /// Every cached price (none before the first read). Read-only.
    async fn read_prices(&self) -> Result<Vec<Price>, StoreError>;

    /// Replaces the cached prices with `prices`. Idempotent; one writer (the reaper,
    /// under its lease).
    async fn write_prices(&self, prices: &[Price]) -> Result<(), StoreError>;
}

// ----------------------------------------------------------------------------- fleet

/// Which market instances are bought in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Market {
    Spot,
    OnDemand,
}

impl Market {
    pub fn as_str(self) -> &'static str {
        match self {
            Market::Spot => "spot",
            Market::OnDemand => "on_demand",
        }
    }
}

/// Instances for one pool, launched in one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetRequest {
    pub pool: String,
    pub count: u32,
    /// The launch template (EC2 CreateFleet): the pool's, or the deployment's for a
    /// pool that names only an image.
    pub launch_template: String,
    /// Which version of `launch_template` the instances are built from.
    pub template_version: TemplateVersion,
    /// An image that overrides the template's (its root volume follows the image).
    pub ami: Option<String>,
    /// Every combination of type and subnet is offered to EC2.
    pub instance_types: Vec<String>,
    pub subnets: Vec<String>,
    pub market: Market,
    /// How EC2 allocates spot capacity among the types and zones offered (the pool's
    /// `spot_allocation_strategy`).
    pub spot_allocation: crate::config::SpotAllocation,
    /// For a sized job ([`crate::sizing`]): the shape its instance must have, which
    /// replaces `instance_types` by the types that match it.
    pub shape: Option<Shape>,
    /// The root volume a sized job asks for, on the root device of the image launched.
    pub root_volume: Option<RootVolume>,
}

/// The instance a sized job asks for, within its pool's policy: every instance type
/// whose vCPUs and memory fall in these ranges (and, when given, of these families and
/// this architecture) may be launched for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    pub vcpus_min: u32,
    pub vcpus_max: u32,
    pub memory_mib_min: u64,
    /// No upper bound when `None`.
    pub memory_mib_max: Option<u64>,
    /// Instance families (`m7i`, `m7i-flex`); empty: any family.
    pub families: Vec<String>,
    /// EC2's name of the architecture (`x86_64`, `arm64`), when the job names one.
    pub architecture: Option<String>,
}

/// A root volume's size and, when given, its EBS type (`gp3`, `io2`...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootVolume {
    pub gib: u32,
    pub volume_type: Option<String>,
}

/// Which version of its launch template a launch uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateVersion {
    /// The deployment's own template: the version its stack last wrote, which the
    /// launcher is told. CloudFormation adds a version on every update and never moves
    /// the default one, so `$Default` would stay the stack's first forever.
    Stack,
    /// A version as EC2 names it, `$Default`, `$Latest` or a number: what the pool
    /// configures for a template of its own (see [`crate::config::PoolConfig`]).
    Named(String),
}

/// What one launch request made.
#[derive(Debug)]
pub struct FleetLaunch {
    pub instance_ids: Vec<String>,
    /// Why fewer instances than asked came up, when that happened.
    pub shortfall: Option<FleetError>,
    /// The type each instance was launched as, when the answer said (EC2's CreateFleet
    /// names it per group of instances): which of the pool's types the runner got.
    pub instance_types: std::collections::HashMap<String, String>,
}

/// EC2's view of an instance's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

/// An instance tagged for this deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub id: String,
    pub state: InstanceState,
    pub pool: Option<String>,
    pub launched_at: Option<OffsetDateTime>,
}

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// No capacity for what was asked (spot or on-demand); another type or later may work.
    #[error("no capacity: {0}")]
    CapacityUnavailable(String),
    #[error("EC2 throttled the request")]
    Throttled(#[source] Cause),
    /// EC2 refused the request as asked (bad AMI, subnet, template, permissions).
    #[error("EC2 refused the request: {code}: {message}")]
    Rejected { code: String, message: String },
    #[error("EC2 request failed")]
    Transient(#[source] Cause),
}

/// Launching runner instances (the scaler's capability).
#[async_trait]
pub trait Launcher: Send + Sync {
    /// Launches up to `request.count` instances in one request, tagged with this
    /// deployment and the pool. An error means none came up; fewer than asked is a
    /// [`FleetLaunch::shortfall`]. Not idempotent: the runner records say which instance
    /// is whose, and the reaper ends instances that no record claims.
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError>;
}

/// Seeing and ending runner instances (the reaper's capability).
#[async_trait]
pub trait Fleet: Send + Sync {
    /// Terminates an instance. One that no longer exists counts as terminated.
    async fn terminate(&self, instance_id: &str) -> Result<(), FleetError>;

    /// Every instance tagged for this deployment, whatever its state.
    async fn describe(&self) -> Result<Vec<Instance>, FleetError>;

    /// The deployment's instances that are not shutting down or terminated (what the
    /// reaper reconciles against); an adapter may filter on the provider's side, so the
    /// answer stays small however many instances came and went.
    async fn describe_live(&self) -> Result<Vec<Instance>, FleetError> {
        Ok(self
            .describe()
            .await?
            .into_iter()
            .filter(|i| {
                !matches!(
                    i.state,
                    InstanceState::ShuttingDown | InstanceState::Terminated
                )
            })
            .collect())
    }
}

// ---------------------------------------------------------------------------- JIT store

#[derive(Debug, thiserror::Error)]
pub enum JitStoreError {
    #[error("JIT config store throttled the request")]
    Throttled(#[source] Cause),
    #[error("JIT config store request failed")]
    Transient(#[source] Cause),
    /// The store holds a config of a later registration for this instance: a try that
    /// lost its lease came back late. Nothing was written.
    #[error("a later JIT config (runner id {stored}) is already waiting for the instance")]
    Superseded { stored: u64 },
    /// The store refuses the request as it is (too large, no such table): retrying the
    /// same request cannot succeed.
    #[error("JIT config store refused the request")]
    Rejected(#[source] Cause),
}

/// Where a runner's JIT config waits for its instance (never user data or tags).
#[async_trait]
pub trait JitConfigStore: Send + Sync {
    /// Stores the JIT config that only `instance_id` may read. Conditional: replaces a
    /// config of the same or an earlier registration (a lower GitHub runner id), refuses
    /// one of a later registration with [`JitStoreError::Superseded`]; idempotent.
    async fn put(
        &self,
        instance_id: &str,
        runner_name: &str,
        jit: &JitConfig,
    ) -> Result<(), JitStoreError>;

    /// Deletes the item of `instance_id`, config or tombstone; one already gone counts
    /// as deleted. Returns when the instance read its config, if it left the tombstone
    /// that says so (the bootstrap removes the config and stamps the read); never the
    /// config itself.
    async fn delete(&self, instance_id: &str) -> Result<Option<OffsetDateTime>, JitStoreError>;
}

// ----------------------------------------------------------------------------- forge

/// Where a runner is registered on GitHub.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunnerScope {
    pub installation_id: Option<u64>,
    /// The organization, or the repository owner for repository-scoped runners.
    pub owner: String,
    /// `Some` for repository-scoped runners.
    pub repo: Option<String>,
}

/// What a just-in-time runner is registered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitRequest {
    pub name: String,
    pub labels: Vec<String>,
    pub runner_group: String,
    pub work_folder: String,
}

/// A registered just-in-time runner.
#[derive(Debug, Clone)]
pub struct JitConfig {
    pub runner_id: u64,
    pub encoded: SecretString,
}

/// The answer to removing a runner from GitHub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerRemoval {
    Removed,
    /// GitHub does not know it (already gone).
    NotFound,
    /// GitHub refused: the runner is running a job (422).
    Busy,
}

/// GitHub's view of a runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeRunner {
    pub id: u64,
    pub name: String,
    pub online: bool,
    pub busy: bool,
}

/// GitHub's view of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeJobState {
    Queued,
    InProgress,
    Completed,
    /// waiting, requested, pending...
    Other,
}

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// A runner with that name is already registered.
    #[error("a runner named {0} already exists")]
    AlreadyExists(String),
    #[error("GitHub refused the credentials")]
    Unauthorized,
    #[error("GitHub rate limit hit")]
    Throttled { retry_after: Option<Duration> },
    #[error("GitHub refused the request: {status}: {message}")]
    Rejected { status: u16, message: String },
    #[error("GitHub request failed")]
    Transient(#[source] Cause),
}

/// GitHub, as a GitHub App installation sees it.
#[async_trait]
pub trait Forge: Send + Sync {
    /// Registers a just-in-time runner. Not idempotent: a second call with the same name
    /// is [`ForgeError::AlreadyExists`].
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request: &JitRequest,
    ) -> Result<JitConfig, ForgeError>;

    /// Removes a runner. The DELETE is itself the "is it busy?" check: 422 → `Busy`.
    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError>;

    /// Reads a runner; `None` if GitHub does not know it.
    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError>;

    /// Every runner registered in `scope`, read page by page; a snapshot (a runner
    /// registered or removed meanwhile may be missed). Read-only.
    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError>;

    /// The runner registered in `scope` under `name`, if any. GitHub's list endpoint
    /// filters by name, so a client asks once instead of reading every page; this
    /// default reads the list.
    async fn find_runner(
        &self,
        scope: &RunnerScope,
        name: &str,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        let listed = self.list_runners(scope).await?;
        Ok(listed.into_iter().find(|r| r.name == name))
    }

    /// Reads a job's state; `None` if GitHub does not know it.
    async fn job_state(
        &self,
        installation_id: Option<u64>,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError>;
}

// ----------------------------------------------------------------------------- deliveries

/// One delivery of the App's webhook, as GitHub lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookDelivery {
    pub id: u64,
    /// The same for every attempt at one event (`X-GitHub-Delivery`).
    pub guid: String,
    pub event: String,
    pub action: Option<String>,
    /// The HTTP status the webhook endpoint answered (0 when it could not be reached).
    pub status_code: u16,
    /// When GitHub made the attempt (whole seconds, GitHub's clock). With `redelivery`,
    /// the sweep reads from these how often and since when an event was asked for.
    pub delivered_at: OffsetDateTime,
    /// Whether this was itself a redelivery (asked for by anyone).
    pub redelivery: bool,
}

impl HookDelivery {
    /// Whether the endpoint took it (any 2xx answer).
    pub fn delivered(&self) -> bool {
        (200..300).contains(&self.status_code)
    }
}

/// One page of deliveries, newest first, and where the next (older) page starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryPage {
    pub deliveries: Vec<HookDelivery>,
    pub next_cursor: Option<String>,
}

/// The App's webhook deliveries (the reaper's redelivery sweep): GitHub does not
/// redeliver a failed delivery by itself, but lists them and redelivers one on request.
#[async_trait]
pub trait HookDeliveries: Send + Sync {
    /// One page of the App's recent deliveries, newest first, from `cursor` (the newest
    /// when `None`). Read-only.
    async fn list_deliveries(&self, cursor: Option<&str>) -> Result<DeliveryPage, ForgeError>;

    /// Asks GitHub to deliver delivery `id` again. Not idempotent: each call is one more
    /// attempt (the webhook handles a repeated event idempotently).
    async fn redeliver(&self, id: u64) -> Result<(), ForgeError>;
}

// ----------------------------------------------------------------------------- app key

/// Why the App's private key could not be read again.
#[derive(Debug, thiserror::Error)]
pub enum AppKeyError {
    /// The store could not be read; its own error says why.
    #[error("{0}")]
    Unreadable(Cause),
    /// The store holds something that is not a PEM private key (a new stack's
    /// placeholder). `place` names it, as [`AppKeySource::name`] does.
    #[error("{place} does not hold a PEM private key")]
    NotAKey { place: String },
}

/// Where the App's private key is kept (a secret store), read again when GitHub
/// refuses the key in use. The GitHub client takes one; the mains wire the store.
#[async_trait]
pub trait AppKeySource: Send + Sync {
    /// The key as it is there now, PEM. Read-only; every call reads the store.
    async fn current_key(&self) -> Result<SecretString, AppKeyError>;
    /// Where the key is kept, for the log.
    fn name(&self) -> String;
}

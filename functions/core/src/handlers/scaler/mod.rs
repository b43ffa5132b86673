//! The scaler handler: one runner per queued job, never above a pool's `max_runners`.
//!
//! A batch goes through three phases. **Prepare**, each message on its own: the job item
//! is recorded (idempotent), then one transaction claims the job, writes the runner
//! record and takes a pool slot. **Launch**: the runners of one pool that need an
//! instance get one EC2 request together (spot first when the pool asks for it, then
//! on-demand for what spot could not give). **Finish**, each runner on its own: GitHub
//! registration, JIT config into the instance's JIT item, `running`.
//!
//! The record is written before anything exists outside the table, and each step is
//! written back to it, so a retried message resumes where the last try stopped and every
//! crash leaves a record the reaper can clean from. A record another delivery is working
//! on (`creating`, touched within [`CREATE_LEASE`]) is left to it. A job over capacity
//! goes back to the queue as a fresh delayed message, so waiting never drops it (one
//! the table knows is over is dropped).
//! `in_progress` binds the runner to the job; `completed` sends the runner to be reaped.
//! `warm` (from the reaper) creates a job-less runner whose record the reaper reserved,
//! through the same launch and finish phases.

mod create;
mod jitter;
pub use create::fleet_request;
pub use jitter::{Jitter, ThreadJitter};

use crate::clock::Clock;
use crate::config::{Config, PoolConfig, Scope};
use crate::handlers::error_chain;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::message::{MessageError, MessageKind, QueueMessage};
use crate::metrics::{Dimension, Metric, Metrics};
use crate::model::{HistoryEntry, JobRecord, JobStatus, RunnerRecord};
use crate::names;
use crate::pace::RegistrationPace;
use crate::ports::*;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tracing::{error, info, warn, Instrument};

/// How long a `creating` record belongs to the delivery that touched it last. A
/// retried delivery resumes it only after that, so two deliveries of one job never
/// create twice; a delivery that died mid-way is resumed once the lease is over.
pub const CREATE_LEASE: Duration = Duration::from_secs(60);

/// How often a claim that lost a race on the pool item (DynamoDB's
/// `TransactionConflict`: every claim of a pool writes its one pool item) is tried within
/// one delivery. Waits are drawn at random below a bound doubling from
/// [`CLAIM_FIRST_WAIT`] up to [`CLAIM_MAX_WAIT`] (full jitter), so the claims of a burst
/// spread out instead of meeting again: at most about 4.6 s in all.
const CLAIM_TRIES: u32 = 10;
const CLAIM_FIRST_WAIT: Duration = Duration::from_millis(25);
const CLAIM_MAX_WAIT: Duration = Duration::from_secs(1);
/// A job whose claim kept losing races goes back in line this long (up to twice), as a
/// fresh message: a conflict is never the message's fault, so it never counts as a
/// failed receive.
const CONTENDED_RETRY: Duration = Duration::from_secs(2);

/// How long a job waits before trying a full pool again, by default.
pub const CAPACITY_RETRY: Duration = Duration::from_secs(15);

/// How long a queued job may wait in an invocation for its registration's turn (see
/// [`RegistrationPace`]); a job whose turn is further off goes back to the queue.
pub const PACE_WAIT: Duration = Duration::from_secs(10);

/// The longest delay SQS allows on a message.
const MAX_QUEUE_DELAY: Duration = Duration::from_secs(15 * 60);

/// How far a hand-over follows a chain of taken jobs (runner A took B's job, B took C's,
/// ...) to the runner at its end that no job waits for.
const HANDOVER_HOPS: usize = 16;

/// How often binding a runner to the job it runs is tried again when its record changed
/// between the read and the conditional write.
const ACTIVATION_TRIES: usize = 5;

/// Why a job whose runner took another job is queued again (see [`QueueMessage::queued_again`]).
const REHOME: &str = "rehome";

/// What became of one hand-over attempt.
enum HandOver {
    Done,
    /// Not to this runner (gone, claimed again, labels that do not cover the job).
    Refused,
    /// This runner ran, runs or was handed job `.0`, not the one it was launched for: the
    /// runner launched for job `.0` may be the free one.
    TookAnother(u64),
    /// A record changed between the read and the transaction: read it again.
    Changed,
}

/// Why a message could not be handled; the message is then retried by the queue.
#[derive(Debug, thiserror::Error)]
pub enum ScalerError {
    #[error(transparent)]
    Message(#[from] MessageError),
    #[error("pool {0} is not in the configuration")]
    UnknownPool(String),
    #[error("creating runner {runner} failed")]
    Creation {
        runner: String,
        #[source]
        cause: Cause,
    },
    #[error("re-queueing a job that waits for capacity failed")]
    Requeue(#[source] QueueError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("handling the message panicked")]
    Panicked,
}

/// What handling a message did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// A runner is up for the job (launched now, or by an earlier delivery).
    RunnerUp(String),
    /// The pool is full: the job went back to the queue, delayed.
    Deferred,
    /// The job needed nothing (already running or finished, or not ours).
    NothingToDo,
    /// The runner was bound to its job.
    Bound,
    /// The runner was sent to be reaped.
    Released,
}

/// One queue message of a batch.
#[derive(Debug, Clone)]
pub struct BatchItem {
    pub message_id: String,
    pub body: String,
}

/// Where a message stands after the prepare phase.
enum Step {
    Done(Handled),
    /// The runner (in `creating`) needs an instance.
    Launch(RunnerRecord),
    /// The runner (in `creating`) has its instance; register it and hand over its config.
    Finish(RunnerRecord),
}

type Outcome = Result<Handled, ScalerError>;

/// Creates runners for queued jobs and follows them through their job.
pub struct Scaler {
    config: Arc<Config>,
    store: Arc<dyn RunnerStore>,
    launcher: Arc<dyn Launcher>,
    forge: Arc<dyn Forge>,
    jit_store: Arc<dyn JitConfigStore>,
    queue: Arc<dyn JobQueue>,
    capacity_retry: Duration,
    pace: Option<Arc<RegistrationPace>>,
    jitter: Arc<dyn Jitter>,
    /// Held while claiming: the claims of one batch take the pool item one after
    /// another, instead of all at once to conflict with each other.
    claim_turn: tokio::sync::Mutex<()>,
    metrics: Metrics,
}

impl Scaler {
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn RunnerStore>,
        launcher: Arc<dyn Launcher>,
        forge: Arc<dyn Forge>,
        jit_store: Arc<dyn JitConfigStore>,
        queue: Arc<dyn JobQueue>,
    ) -> Scaler {
        Scaler {
            config,
            store,
            launcher,
            forge,
            jit_store,
            queue,
            capacity_retry: CAPACITY_RETRY,
            pace: None,
            jitter: Arc::new(ThreadJitter),
            claim_turn: tokio::sync::Mutex::new(()),
            metrics: Metrics::disabled(),
        }
    }

    /// Where launches, failures, fallbacks and deferrals are counted; flushed after
    /// every batch.
    pub fn with_metrics(mut self, metrics: Metrics) -> Scaler {
        self.metrics = metrics;
        self
    }

    /// How long a job over capacity waits before it is tried again.
    pub fn with_capacity_retry(mut self, delay: Duration) -> Scaler {
        self.capacity_retry = delay;
        self
    }

    /// Paces GitHub registrations: a queued job is launched for only once its
    /// registration is due (see [`RegistrationPace`]), and a throttled registration gives
    /// its slot back and pauses the pace (its instance is reaped), so that the job waits
    /// in the queue, not on a launched instance, and is never dead-lettered for waiting.
    pub fn with_registration_pace(mut self, pace: Arc<RegistrationPace>) -> Scaler {
        self.pace = Some(pace);
        self
    }

    /// Where retry waits, requeue delays and runner names draw their randomness (the
    /// thread's RNG unless set).
    pub fn with_jitter(mut self, jitter: Arc<dyn Jitter>) -> Scaler {
        self.jitter = jitter;
        self
    }

    /// Handles a batch; a bad body or a panic fails that message only. Returns the ids
    /// of the messages that failed (to be retried by the queue).
    pub async fn handle_batch(
        self: &Arc<Self>,
        items: Vec<BatchItem>,
        now: OffsetDateTime,
    ) -> Vec<String> {
        let mut decoded = Vec::new();
        let mut failed = Vec::new();
        for item in items {
            match QueueMessage::decode(&item.body) {
                Ok(message) => decoded.push((item.message_id, message)),
                Err(err) => {
                    warn!(message_id = %item.message_id, error = %err, "unreadable message; it will be retried, then dead-lettered");
                    failed.push(item.message_id);
                }
            }
        }
        for (message_id, outcome) in self.process(decoded, Clock::starting_at(now)).await {
            if let Err(err) = outcome {
                warn!(%message_id, error = %error_chain(&err), "message failed; it will be retried");
                failed.push(message_id);
            }
        }
        self.metrics.flush();
        failed
    }

    /// Handles one message, through the same phases as a batch.
    pub async fn handle(self: &Arc<Self>, message: &QueueMessage, now: OffsetDateTime) -> Outcome {
        let mut outcomes = self
            .process(
                vec![(String::new(), message.clone())],
                Clock::starting_at(now),
            )
            .await;
        outcomes
            .pop()
            .map_or(Err(ScalerError::Panicked), |(_, outcome)| outcome)
    }

    async fn process(
        self: &Arc<Self>,
        messages: Vec<(String, QueueMessage)>,
        clock: Clock,
    ) -> Vec<(String, Outcome)> {
        let full = Arc::new(self.full_pools(&messages).await);
        let prepared = spawn_each(
            messages,
            |scaler: Arc<Scaler>, message: QueueMessage| {
                let full = Arc::clone(&full);
                async move { scaler.prepare(&message, &clock, &full).await }
            },
            self,
        )
        .await;
        let mut outcomes = Vec::new();
        let mut to_launch: BTreeMap<String, Vec<(String, RunnerRecord)>> = BTreeMap::new();
        let mut to_finish = Vec::new();
        for (message_id, step) in prepared {
            match step {
                Ok(Step::Done(handled)) => outcomes.push((message_id, Ok(handled))),
                Ok(Step::Launch(runner)) => to_launch
                    .entry(runner.pool.clone())
                    .or_default()
                    .push((message_id, runner)),
                Ok(Step::Finish(runner)) => to_finish.push((message_id, runner)),
                Err(err) => outcomes.push((message_id, Err(err))),
            }
        }
        for (pool, runners) in to_launch {
            let (launched, failed) = self.launch_pool(&pool, runners, &clock).await;
            to_finish.extend(launched);
            outcomes.extend(failed);
        }
        let finished = spawn_each(
            to_finish,
            |scaler: Arc<Scaler>, runner: RunnerRecord| async move {
                scaler.finish(runner, &clock).await
            },
            self,
        )
        .await;
        outcomes.extend(finished);
        outcomes
    }

    /// The pools of the batch's queued jobs that are at `max_runners`: one read per pool
    /// per batch decides the common case of a burst, before any job is claimed (the claim
    /// itself still checks, atomically; a job of a full pool costs one read of its own, to
    /// see whether it is over). A pool that cannot be read is taken as not full.
    async fn full_pools(&self, messages: &[(String, QueueMessage)]) -> HashSet<String> {
        let pools: HashSet<&str> = messages
            .iter()
            .filter(|(_, m)| m.kind == MessageKind::Queued)
            .map(|(_, m)| m.pool.as_str())
            .collect();
        let mut full = HashSet::new();
        for name in pools {
            let Some(pool) = self.config.pool(name) else {
                continue;
            };
            match self.store.get_pool(name).await {
                Ok(record) if record.slots_used >= pool.max_runners => {
                    full.insert(name.to_owned());
                }
                Ok(_) => {}
                Err(err) => {
                    warn!(pool = %name, error = %error_chain(&err), "cannot read the pool; its jobs try to claim")
                }
            }
        }
        full
    }

    async fn prepare(
        &self,
        message: &QueueMessage,
        clock: &Clock,
        full: &HashSet<String>,
    ) -> Result<Step, ScalerError> {
        match message.kind {
            MessageKind::Queued => self.prepare_queued(message, clock, full).await,
            MessageKind::InProgress => self.on_in_progress(message, clock).await.map(Step::Done),
            MessageKind::Completed => self.on_completed(message, clock).await.map(Step::Done),
            MessageKind::Warm => self.prepare_warm(message, clock).await,
        }
    }

    async fn prepare_queued(
        &self,
        message: &QueueMessage,
        clock: &Clock,
        full: &HashSet<String>,
    ) -> Result<Step, ScalerError> {
        let pool = self.pool(&message.pool)?;
        if full.contains(&pool.name) {
            return self.defer_unless_over(message, clock).await;
        }
        // Before the job is recorded: a job waiting for its turn costs the table nothing
        // and the reaper's lost-job rule never asks GitHub about it meanwhile.
        if let Some(step) = self.wait_for_registration(message).await? {
            return Ok(step);
        }
        let step = self.prepare_paced(message, pool, clock).await;
        // The registration taken above is spent only by a runner about to be launched or
        // registered; any other outcome (the job was taken by a runner launched for
        // another, its runner is up, the pool filled) gives it back to the next job.
        if !matches!(step, Ok(Step::Launch(_) | Step::Finish(_))) {
            if let Some(pace) = &self.pace {
                pace.give_back();
            }
        }
        step
    }

    /// [`Self::prepare_queued`] once the job has its registration turn.
    async fn prepare_paced(
        &self,
        message: &QueueMessage,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Step, ScalerError> {
        let job = self
            .store
            .record_job(&job_record(message, JobStatus::Queued, clock.now()))
            .await?;
        if job.status != JobStatus::Queued {
            return Ok(Step::Done(Handled::NothingToDo));
        }
        // A job queued again because its runner took another may have been given a runner
        // whose webhooks have not come yet: GitHub is asked before a runner is added.
        if job.runner_name.is_none()
            && (pool.check_queued || message.queued_again_by(REHOME))
            && !self.still_queued(message, clock).await?
        {
            return Ok(Step::Done(Handled::NothingToDo));
        }
        let runner_name = match job.runner_name {
            Some(name) => name,
            None => match self.claim(message, pool, clock).await? {
                Reservation::Runner(name) => name,
                Reservation::NotQueued => return Ok(Step::Done(Handled::NothingToDo)),
                Reservation::PoolFull => return self.defer(message).await,
                Reservation::Contended => return self.retry_contended(message).await,
            },
        };
        self.resume_claimed(&runner_name, message, clock).await
    }

    /// The next step of the runner that holds the job's claim.
    async fn resume_claimed(
        &self,
        runner_name: &str,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Step, ScalerError> {
        let runner = self
            .store
            .get_runner(runner_name)
            .await?
            .ok_or_else(|| StoreError::NotFound(runner_name.to_owned()))?;
        let why = format!("launching for job {}", message.job_id);
        self.next_step(runner, message, clock, why).await
    }

    /// A warm runner the reaper has reserved (record and slot): created from its record
    /// like a job's runner, resumed like one when a delivery is retried.
    async fn prepare_warm(
        &self,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Step, ScalerError> {
        let Some(name) = message.runner_name.as_deref() else {
            warn!(pool = %message.pool, "warm message names no runner; ignored");
            return Ok(Step::Done(Handled::NothingToDo));
        };
        match self.store.get_runner(name).await? {
            Some(runner) => {
                let why = "launching warm runner".to_owned();
                self.next_step(runner, message, clock, why).await
            }
            // Already reaped (a creation that stalled): nothing left to create.
            None => Ok(Step::Done(Handled::NothingToDo)),
        }
    }

    /// What a runner record in creation needs next: an instance, or registration; or
    /// nothing while another delivery holds its creation lease, or once it is created.
    async fn next_step(
        &self,
        runner: RunnerRecord,
        message: &QueueMessage,
        clock: &Clock,
        why: String,
    ) -> Result<Step, ScalerError> {
        match runner.status {
            InstanceStatus::PendingCreate => {
                let to_creating =
                    Transition::new(runner.status, InstanceStatus::Creating, clock.now())
                        .because(why);
                match self.store.transition(&runner.name, &to_creating).await {
                    Ok(runner) => Ok(Step::Launch(runner)),
                    // Another delivery moved it first and is creating it now.
                    Err(StoreError::TransitionRefused { .. }) => {
                        self.wait_for_other(message, CREATE_LEASE).await
                    }
                    Err(err) => Err(err.into()),
                }
            }
            InstanceStatus::Creating if clock.now() - runner.updated_at < CREATE_LEASE => {
                let left = CREATE_LEASE - (clock.now() - runner.updated_at);
                self.wait_for_other(message, left.unsigned_abs()).await
            }
            InstanceStatus::Creating => self.take_over(runner, message, clock).await,
            _ => Ok(Step::Done(Handled::RunnerUp(runner.name))),
        }
    }

    /// Resumes a `creating` record whose lease is over, taking the lease with a write
    /// conditional on the record not having changed since it was read: of two deliveries
    /// resuming it at once only one goes on (two would launch two instances and hand the
    /// JIT config to one the record no longer names); the other checks again later.
    async fn take_over(
        &self,
        runner: RunnerRecord,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Step, ScalerError> {
        let lease = RunnerUpdate {
            unchanged_since: Some(runner.updated_at),
            ..RunnerUpdate::default()
        };
        match self
            .store
            .update_runner(&runner.name, &lease, clock.now())
            .await
        {
            Ok(runner) if runner.instance_id.is_none() => Ok(Step::Launch(runner)),
            Ok(runner) => Ok(Step::Finish(runner)),
            Err(StoreError::Conflict(_)) => self.wait_for_other(message, CREATE_LEASE).await,
            Err(err) => Err(err.into()),
        }
    }

    /// The pool's optional queued check: whether GitHub still shows the job queued. A job
    /// GitHub has moved on is recorded as such; one GitHub does not know is dropped.
    async fn still_queued(
        &self,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<bool, ScalerError> {
        let state = self
            .forge
            .job_state(
                message.installation_id,
                &message.owner,
                &message.repo,
                message.job_id,
            )
            .await
            .map_err(|err| ScalerError::Creation {
                runner: format!("for job {}", message.job_id),
                cause: Box::new(err),
            })?;
        let moved_on = match state {
            Some(ForgeJobState::Queued | ForgeJobState::Other) => return Ok(true),
            Some(ForgeJobState::InProgress) => Some(JobStatus::InProgress),
            Some(ForgeJobState::Completed) => Some(JobStatus::Completed),
            None => None,
        };
        if let Some(status) = moved_on {
            let job = job_record(message, status, clock.now());
            self.store.advance_job(&job, status, None).await?;
        }
        info!(job_id = message.job_id, state = ?state, "job no longer queued on GitHub; no runner launched");
        Ok(false)
    }

    /// Claims the job for a new runner record (or finds the runner that claimed it).
    async fn claim(
        &self,
        message: &QueueMessage,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Reservation, ScalerError> {
        let now = clock.now();
        let mut runner = RunnerRecord::new(
            names::runner_name_drawn(&self.config.deployment, &pool.name, || self.jitter.unit()),
            pool.name.clone(),
            now,
        );
        runner.labels = crate::routing::registered_labels(pool);
        runner.ephemeral = pool.ephemeral;
        runner.job_id = Some(message.job_id);
        runner.job_queued_at = Some(message.received_at);
        runner.installation_id = message.installation_id;
        runner.owner = message.owner.clone();
        runner.repo = (self.config.github.scope == Scope::Repo).then(|| message.repo.clone());
        runner.reason = Some(format!("job {} queued", message.job_id));
        runner.history = vec![HistoryEntry::status(
            now,
            InstanceStatus::PendingCreate,
            runner.reason.clone(),
        )];
        let mut tries = 0;
        let turn = self.claim_turn.lock().await;
        let claim = loop {
            tries += 1;
            match self
                .store
                .claim_job(message.job_id, &runner, pool.max_runners)
                .await
            {
                Err(StoreError::Conflict(_)) if tries < CLAIM_TRIES => {
                    tokio::time::sleep(claim_wait(tries, self.jitter.unit())).await;
                }
                Err(StoreError::Conflict(what)) => {
                    warn!(job_id = message.job_id, pool = %pool.name, tries, conflict = %what, "claim kept losing races on the pool; job goes back in line");
                    return Ok(Reservation::Contended);
                }
                other => break other?,
            }
        };
        drop(turn);
        Ok(match claim {
            Claim::Claimed => {
                info!(job_id = message.job_id, runner = %runner.name, pool = %pool.name, "runner reserved");
                Reservation::Runner(runner.name)
            }
            Claim::AlreadyClaimed { runner_name } => Reservation::Runner(runner_name),
            Claim::NotQueued(_) => Reservation::NotQueued,
            Claim::PoolFull => Reservation::PoolFull,
        })
    }

    /// Another delivery of this job holds the runner's creation lease: this one comes
    /// back as a fresh message once the lease is over (by then the runner is up, or the
    /// other delivery died and this one resumes its work), so it is never dead-lettered
    /// for waiting.
    async fn wait_for_other(
        &self,
        message: &QueueMessage,
        left: Duration,
    ) -> Result<Step, ScalerError> {
        let delay = left + Duration::from_secs(1);
        self.send_back(message, delay).await?;
        info!(job_id = message.job_id, retry_in = ?delay, "runner being created by another delivery; checking again later");
        Ok(Step::Done(Handled::Deferred))
    }

    /// The pool is full: a job the table knows is over is done with, any other goes back
    /// in line. A pool can stay full for good (its `min_idle` warm runners hold every
    /// slot, and one is replaced as soon as it takes a job and goes), and its runners
    /// take jobs whose `queued` never got a slot: without this read such a message would
    /// come back for ever. A job never seen is recorded first, so that if its `completed`
    /// is lost the reaper's lost-job rule can find it over on GitHub.
    async fn defer_unless_over(
        &self,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Step, ScalerError> {
        let job = match self.store.get_job(message.job_id).await? {
            Some(job) => job,
            None => {
                let seen = job_record(message, JobStatus::Queued, clock.now());
                self.store.record_job(&seen).await?
            }
        };
        if job.status != JobStatus::Queued {
            return Ok(Step::Done(Handled::NothingToDo));
        }
        // Its runner already holds a slot (a creation to resume, a job handed over).
        if let Some(runner_name) = &job.runner_name {
            return self.resume_claimed(runner_name, message, clock).await;
        }
        self.defer(message).await
    }

    /// With a registration pace: waits for this job's turn when it is near, or sends the
    /// job back to the queue, to come back when its turn is due (`Some` step then).
    async fn wait_for_registration(
        &self,
        message: &QueueMessage,
    ) -> Result<Option<Step>, ScalerError> {
        let Some(pace) = &self.pace else {
            return Ok(None);
        };
        match pace.take(PACE_WAIT) {
            Ok(wait) => {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                Ok(None)
            }
            Err(wait) => {
                let delay = spread(wait, self.jitter.unit()).min(MAX_QUEUE_DELAY);
                self.send_back(message, delay).await?;
                info!(job_id = message.job_id, retry_in = ?delay, "registrations paced; job waits for its turn");
                Ok(Some(Step::Done(Handled::Deferred)))
            }
        }
    }

    /// The job goes back to the queue as a fresh message, due after `delay`.
    async fn send_back(&self, message: &QueueMessage, delay: Duration) -> Result<(), ScalerError> {
        self.queue
            .send_after(message, delay)
            .await
            .map_err(ScalerError::Requeue)
    }

    /// The claim kept losing races on the pool item: the job goes back in line as a
    /// fresh message, soon, so a burst's conflicts never dead-letter it.
    async fn retry_contended(&self, message: &QueueMessage) -> Result<Step, ScalerError> {
        let delay = CONTENDED_RETRY.mul_f64(1.0 + self.jitter.unit());
        self.send_back(message, delay).await?;
        Ok(Step::Done(Handled::Deferred))
    }

    /// The pool is full: the job goes back in line as a fresh, delayed message.
    async fn defer(&self, message: &QueueMessage) -> Result<Step, ScalerError> {
        let delay = spread(self.capacity_retry, self.jitter.unit());
        self.send_back(message, delay).await?;
        self.metrics.record(
            Metric::CapacityDeferrals,
            &[(Dimension::Pool, message.pool.as_str())],
            1.0,
        );
        info!(job_id = message.job_id, pool = %message.pool, retry_in = ?delay, "pool at max_runners; job waits");
        Ok(Step::Done(Handled::Deferred))
    }

    fn pool(&self, name: &str) -> Result<&PoolConfig, ScalerError> {
        self.config
            .pool(name)
            .ok_or_else(|| ScalerError::UnknownPool(name.to_owned()))
    }

    async fn on_in_progress(&self, message: &QueueMessage, clock: &Clock) -> Outcome {
        let runner_name = message.runner_name.as_deref();
        // The runner launched for this job (the binding below names the one running it).
        let claimed_by = match runner_name {
            Some(_) => self
                .store
                .get_job(message.job_id)
                .await?
                .and_then(|job| job.launched_runner.or(job.runner_name)),
            None => None,
        };
        let job = job_record(message, JobStatus::InProgress, clock.now());
        self.store
            .advance_job(&job, JobStatus::InProgress, runner_name)
            .await?;
        let Some(name) = runner_name else {
            return Ok(Handled::NothingToDo);
        };
        // The binding is conditional on the record read: a concurrent hand-over that gave
        // this runner a queued job in between is seen on the next read, and that job is
        // rehomed in turn instead of being overwritten.
        for _ in 0..ACTIVATION_TRIES {
            let Some(runner) = self.store.get_runner(name).await? else {
                return Ok(Handled::NothingToDo);
            };
            let bind = RunnerUpdate {
                runner_status: Some(RunnerStatus::Active),
                job_id: Some(message.job_id),
                note: Some(format!("running job {}", message.job_id)),
                unchanged_since: Some(runner.updated_at),
                ..RunnerUpdate::default()
            };
            let bound = match runner.job_id.filter(|&id| id != message.job_id) {
                Some(launched_for) => {
                    let taker = (name.to_owned(), bind);
                    self.rehome(launched_for, taker, claimed_by.as_deref(), message, clock)
                        .await
                }
                None => self.bind(name, &bind, clock).await,
            };
            match bound {
                Ok(()) => {}
                Err(ScalerError::Store(StoreError::Conflict(_))) => continue,
                Err(ScalerError::Store(StoreError::NotFound(_))) => {
                    return Ok(Handled::NothingToDo)
                }
                Err(err) => return Err(err),
            }
            // Online and busy before the reaper saw it idle: it came online by now.
            if let (RunnerStatus::Pending, Some(queued_at)) =
                (runner.runner_status, runner.job_queued_at)
            {
                self.metrics.record_duration(
                    Metric::QueuedToOnline,
                    &[(Dimension::Pool, runner.pool.as_str())],
                    clock.now() - queued_at,
                );
            }
            info!(job_id = message.job_id, runner = %name, "runner active");
            return Ok(Handled::Bound);
        }
        Err(ScalerError::Store(StoreError::Conflict(format!(
            "runner {name} kept changing while it was bound to job {}",
            message.job_id
        ))))
    }

    async fn bind(
        &self,
        name: &str,
        bind: &RunnerUpdate,
        clock: &Clock,
    ) -> Result<(), ScalerError> {
        self.store.update_runner(name, bind, clock.now()).await?;
        Ok(())
    }

    /// GitHub gave runner `taker`, launched for job `orphaned`, another job (the one in
    /// `message`), as it may: any matching idle runner takes any queued job. If the
    /// orphaned job is still queued it needs a runner: the one the taken job had claimed,
    /// if that one is still free; if that one took a job in turn, the one that job had
    /// claimed, and so on along the chain ([`HANDOVER_HOPS`] at most); or else a new one,
    /// through a fresh `queued` message. The taker is bound to the job it took (its
    /// update, `taker.1`) in the same transaction that moves the orphaned job's claim.
    async fn rehome(
        &self,
        orphaned: u64,
        taker: (String, RunnerUpdate),
        taken_job_runner: Option<&str>,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<(), ScalerError> {
        let job = match self.store.get_job(orphaned).await? {
            Some(job) if job.waits_for(&taker.0) => job,
            _ => return self.bind(&taker.0, &taker.1, clock).await,
        };
        let mut candidate = taken_job_runner.map(str::to_owned);
        let mut taken = message.job_id;
        let mut seen = vec![taker.0.clone()];
        for _ in 0..HANDOVER_HOPS {
            let Some(free) = candidate.take().filter(|c| !seen.contains(c)) else {
                break;
            };
            match self.hand_over(&job, &taker, &free, taken, clock).await? {
                HandOver::Done => return Ok(()),
                HandOver::Refused => break,
                HandOver::Changed => {
                    // The taker's record changed: the caller reads it again.
                    let current = self.store.get_runner(&taker.0).await?;
                    if current.map(|r| r.updated_at) != taker.1.unchanged_since {
                        return Err(StoreError::Conflict(format!("runner {}", taker.0)).into());
                    }
                    candidate = Some(free);
                }
                HandOver::TookAnother(next) => {
                    // `free` runs job `next`: the runner launched for `next` may be free.
                    candidate = self
                        .store
                        .get_job(next)
                        .await?
                        .and_then(|next_job| next_job.launched_runner);
                    taken = next;
                    seen.push(free);
                }
            }
        }
        let dropped = ClaimHandOver {
            job_id: orphaned,
            taker: taker.clone(),
            to: None,
        };
        if !self.store.hand_over_claim(&dropped, clock.now()).await? {
            // The claim moved on meanwhile: only the binding is left to write.
            return self.bind(&taker.0, &taker.1, clock).await;
        }
        self.queue
            .send(&QueueMessage::queued_again(&job, REHOME))
            .await
            .map_err(ScalerError::Requeue)?;
        info!(job_id = orphaned, taken_by = %taker.0, "runner took another job; its own job queued again");
        Ok(())
    }

    /// Hands queued `job` (whose runner, the taker, took another) to runner `free`, whose
    /// own job `taken` was taken by another runner: only if `free` is still free, on its
    /// way (being created, booting, or idle) and its labels cover all of the job's (GitHub
    /// gives a job only to such a runner). One transaction names the job on `free`'s
    /// record, binds the taker to the job it took and passes the claim, each conditional
    /// on the record read, so no crash leaves two records naming the job. A record still
    /// in creation is resumed at once through a fresh `queued` message for the job (the
    /// delivery that was creating it may have died, and its own job's deliveries now find
    /// that job taken).
    async fn hand_over(
        &self,
        job: &JobRecord,
        taker: &(String, RunnerUpdate),
        free: &str,
        taken: u64,
        clock: &Clock,
    ) -> Result<HandOver, ScalerError> {
        let Some(runner) = self.store.get_runner(free).await? else {
            return Ok(HandOver::Refused);
        };
        let on_its_way = matches!(
            runner.status,
            InstanceStatus::PendingCreate | InstanceStatus::Creating | InstanceStatus::Running
        );
        // Already given this job by a hand-over of two writes (before the three became
        // one transaction) that stopped before the claim passed: that hand-over is
        // finished, not undone, or the job would get a second runner while this one
        // keeps it.
        let resumed = runner.job_id == Some(job.job_id);
        // It ran, or runs, another job (or was handed one): the runner launched for that
        // job is the next link.
        if let Some(other) = runner.job_id.filter(|&id| id != taken && !resumed) {
            return Ok(HandOver::TookAnother(other));
        }
        let still_free = (runner.job_id == Some(taken) || resumed)
            && runner.runner_status != RunnerStatus::Active
            && on_its_way;
        if !still_free || !crate::routing::runner_takes(&runner.labels, &job.labels) {
            return Ok(HandOver::Refused);
        }
        let given = RunnerUpdate {
            job_id: Some(job.job_id),
            note: Some(format!(
                "job {taken} was taken by another runner; now for job {}",
                job.job_id
            )),
            unchanged_since: Some(runner.updated_at),
            ..RunnerUpdate::default()
        };
        let hand_over = ClaimHandOver {
            job_id: job.job_id,
            taker: taker.clone(),
            to: Some((free.to_owned(), given)),
        };
        match self.store.hand_over_claim(&hand_over, clock.now()).await {
            Ok(true) => {}
            // The job was claimed or bound elsewhere meanwhile: nothing was written.
            Ok(false) | Err(StoreError::NotFound(_)) => return Ok(HandOver::Refused),
            Err(StoreError::Conflict(_)) => return Ok(HandOver::Changed),
            Err(err) => return Err(err.into()),
        }
        info!(job_id = job.job_id, runner = %free, taken_by = %taker.0, "queued job handed to the runner of the job its runner took");
        if matches!(
            runner.status,
            InstanceStatus::PendingCreate | InstanceStatus::Creating
        ) {
            self.queue
                .send(&QueueMessage::queued_again(job, "handover"))
                .await
                .map_err(ScalerError::Requeue)?;
        }
        Ok(HandOver::Done)
    }

    async fn on_completed(&self, message: &QueueMessage, clock: &Clock) -> Outcome {
        let runner_name = message.runner_name.as_deref();
        let job = job_record(message, JobStatus::Completed, clock.now());
        self.store
            .advance_job(&job, JobStatus::Completed, runner_name)
            .await?;
        let Some(name) = runner_name else {
            return Ok(Handled::NothingToDo);
        };
        let Some(runner) = self.store.get_runner(name).await? else {
            return Ok(Handled::NothingToDo);
        };
        if !runner.ephemeral {
            let update = RunnerUpdate {
                runner_status: Some(RunnerStatus::Idle),
                note: Some(format!("job {} completed", message.job_id)),
                ..RunnerUpdate::default()
            };
            self.store.update_runner(name, &update, clock.now()).await?;
            return Ok(Handled::Bound);
        }
        use InstanceStatus::*;
        if !matches!(runner.status, PendingCreate | Creating | Running | Error) {
            return Ok(Handled::NothingToDo);
        }
        if runner.job_id != Some(message.job_id) {
            // Its `in_progress` is late or lost: bound to the job it ran first, so that the
            // job it was launched for is rehomed and no hand-over takes it for free.
            let in_progress = QueueMessage {
                kind: MessageKind::InProgress,
                ..message.clone()
            };
            self.on_in_progress(&in_progress, clock).await?;
        }
        let to_delete = Transition::new(runner.status, PendingDelete, clock.now())
            .because(format!("job {} completed", message.job_id));
        match self.store.transition(name, &to_delete).await {
            Ok(_) => {
                info!(job_id = message.job_id, runner = %name, "runner to be reaped");
                Ok(Handled::Released)
            }
            // Someone else moved it first (an operator, the reaper): nothing left to do.
            Err(StoreError::TransitionRefused { .. }) => Ok(Handled::NothingToDo),
            Err(err) => Err(err.into()),
        }
    }
}

/// What claiming a queued job gave.
enum Reservation {
    /// The job's runner (made now, or by an earlier delivery).
    Runner(String),
    NotQueued,
    PoolFull,
    /// Every try lost a race to another transaction on the pool item.
    Contended,
}

/// How long to wait after the `tries`-th claim lost a race: at random below a bound that
/// doubles from [`CLAIM_FIRST_WAIT`] and stops at [`CLAIM_MAX_WAIT`]; `unit` is a draw
/// in `[0, 1)`.
fn claim_wait(tries: u32, unit: f64) -> Duration {
    let bound = CLAIM_FIRST_WAIT
        .saturating_mul(1 << tries.saturating_sub(1).min(10))
        .min(CLAIM_MAX_WAIT);
    bound.mul_f64(unit)
}

/// Runs `work` for each item in its own task, so a panic fails that item only; returns
/// each item's id with its result, in no particular order.
async fn spawn_each<T, R, F, Fut>(
    items: Vec<(String, T)>,
    work: F,
    scaler: &Arc<Scaler>,
) -> Vec<(String, Result<R, ScalerError>)>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(Arc<Scaler>, T) -> Fut,
    Fut: std::future::Future<Output = Result<R, ScalerError>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    let mut ids = std::collections::HashMap::new();
    for (message_id, item) in items {
        let span = tracing::info_span!("message", message_id = %message_id);
        let future = work(Arc::clone(scaler), item);
        let id = message_id.clone();
        let task = tasks.spawn(async move { (id, future.await) }.instrument(span));
        ids.insert(task.id(), message_id);
    }
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            Err(join_error) => {
                let message_id = ids.remove(&join_error.id()).unwrap_or_default();
                error!(%message_id, "message handler panicked; it will be retried");
                results.push((message_id, Err(ScalerError::Panicked)));
            }
        }
    }
    results
}

/// `base`, up to half as long again at random: jobs sent back together (a burst) come
/// back spread out instead of all at once; `unit` is a draw in `[0, 1)`.
fn spread(base: Duration, unit: f64) -> Duration {
    base.mul_f64(1.0 + unit / 2.0)
}

/// Where the runner is registered on GitHub.
pub fn scope_of(runner: &RunnerRecord) -> RunnerScope {
    RunnerScope {
        installation_id: runner.installation_id,
        owner: runner.owner.clone(),
        repo: runner.repo.clone(),
    }
}

fn job_record(message: &QueueMessage, status: JobStatus, now: OffsetDateTime) -> JobRecord {
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
    }
}

#[cfg(test)]
mod claim_tests;
#[cfg(test)]
mod handover_crash_tests;
#[cfg(test)]
mod handover_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod pace_tests;

#[cfg(test)]
mod claim_order_tests;

//! The scaler handler: one runner per queued job, never above a pool's `max_runners`.
//!
//! For `queued`, the job item is recorded (idempotent), then one transaction claims the
//! job, writes the runner record and takes a pool slot. Only after that does anything
//! exist outside the table: the instance, the GitHub registration, the JIT secret; each
//! step is written back to the record, so a retried message resumes where the last try
//! stopped, and every crash leaves a record the reaper can clean from.
//! `in_progress` binds the runner to the job; `completed` sends the runner to be reaped.

use crate::clock::Clock;
use crate::config::{Config, PoolConfig, Scope};
use crate::handlers::error_chain;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::message::{MessageError, MessageKind, QueueMessage};
use crate::model::{HistoryEntry, JobRecord, JobStatus, RunnerRecord};
use crate::names;
use crate::ports::*;
use std::sync::Arc;
use time::OffsetDateTime;
use tracing::{error, info, warn, Instrument};

/// Why a message could not be handled; the message is then retried by the queue.
#[derive(Debug, thiserror::Error)]
pub enum ScalerError {
    #[error(transparent)]
    Message(#[from] MessageError),
    #[error("pool {0} is not in the configuration")]
    UnknownPool(String),
    /// Every slot of the pool is taken; the job waits in the queue.
    #[error("pool {0} is at max_runners")]
    PoolFull(String),
    #[error("creating runner {runner} failed")]
    Creation {
        runner: String,
        #[source]
        cause: Cause,
    },
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

/// Creates runners for queued jobs and follows them through their job.
pub struct Scaler {
    config: Arc<Config>,
    store: Arc<dyn RunnerStore>,
    launcher: Arc<dyn Launcher>,
    forge: Arc<dyn Forge>,
    secrets: Arc<dyn JitSecrets>,
}

impl Scaler {
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn RunnerStore>,
        launcher: Arc<dyn Launcher>,
        forge: Arc<dyn Forge>,
        secrets: Arc<dyn JitSecrets>,
    ) -> Scaler {
        Scaler {
            config,
            store,
            launcher,
            forge,
            secrets,
        }
    }

    /// Handles a batch concurrently, each message on its own: a bad body or a panic
    /// fails that message only. Returns the ids of the messages that failed.
    pub async fn handle_batch(
        self: &Arc<Self>,
        items: Vec<BatchItem>,
        now: OffsetDateTime,
    ) -> Vec<String> {
        let mut tasks = tokio::task::JoinSet::new();
        let mut ids = std::collections::HashMap::new();
        for item in items {
            let scaler = Arc::clone(self);
            let span = tracing::info_span!("message", message_id = %item.message_id);
            let message_id = item.message_id.clone();
            let task = tasks.spawn(
                async move {
                    let result = scaler.handle_body(&item.body, now).await;
                    (item.message_id, result)
                }
                .instrument(span),
            );
            ids.insert(task.id(), message_id);
        }
        let mut failed = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((_, Ok(_))) => {}
                Ok((message_id, Err(err))) => {
                    warn!(%message_id, error = %error_chain(&err), "message failed; it will be retried");
                    failed.push(message_id);
                }
                Err(join_error) => {
                    let message_id = ids.remove(&join_error.id()).unwrap_or_default();
                    error!(%message_id, "message handler panicked; it will be retried");
                    failed.push(message_id);
                }
            }
        }
        failed
    }

    /// Handles one message body.
    pub async fn handle_body(
        &self,
        body: &str,
        now: OffsetDateTime,
    ) -> Result<Handled, ScalerError> {
        let message = QueueMessage::decode(body)?;
        self.handle(&message, now).await
    }

    /// Handles one decoded message.
    pub async fn handle(
        &self,
        message: &QueueMessage,
        now: OffsetDateTime,
    ) -> Result<Handled, ScalerError> {
        let clock = Clock::starting_at(now);
        match message.kind {
            MessageKind::Queued => self.on_queued(message, &clock).await,
            MessageKind::InProgress => self.on_in_progress(message, &clock).await,
            MessageKind::Completed => self.on_completed(message, &clock).await,
        }
    }

    async fn on_queued(
        &self,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        let pool = self
            .config
            .pool(&message.pool)
            .ok_or_else(|| ScalerError::UnknownPool(message.pool.clone()))?;
        let job = self
            .store
            .record_job(&job_record(message, JobStatus::Queued, clock.now()))
            .await?;
        if job.status != JobStatus::Queued {
            return Ok(Handled::NothingToDo);
        }
        let runner_name = match job.runner_name {
            Some(name) => name,
            None => match self.claim(message, pool, clock).await? {
                Some(name) => name,
                None => return Ok(Handled::NothingToDo),
            },
        };
        self.bring_up(&runner_name, pool, message.job_id, clock)
            .await
    }

    /// Claims the job for a new runner record; `None` if the job is no longer queued.
    async fn claim(
        &self,
        message: &QueueMessage,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Option<String>, ScalerError> {
        let mut runner = RunnerRecord::new(
            names::runner_name(&self.config.deployment, &pool.name),
            pool.name.clone(),
            clock.now(),
        );
        runner.labels = pool.labels.clone();
        runner.ephemeral = pool.ephemeral;
        runner.job_id = Some(message.job_id);
        runner.installation_id = message.installation_id;
        runner.owner = message.owner.clone();
        runner.repo = (self.config.github.scope == Scope::Repo).then(|| message.repo.clone());
        runner.reason = Some(format!("job {} queued", message.job_id));
        runner.history = vec![HistoryEntry::status(
            runner.created_at,
            InstanceStatus::PendingCreate,
            runner.reason.clone(),
        )];
        match self
            .store
            .claim_job(message.job_id, &runner, pool.max_runners)
            .await?
        {
            Claim::Claimed => {
                info!(job_id = message.job_id, runner = %runner.name, pool = %pool.name, "runner reserved");
                Ok(Some(runner.name))
            }
            Claim::AlreadyClaimed { runner_name } => Ok(Some(runner_name)),
            Claim::NotQueued(_) => Ok(None),
            Claim::PoolFull => Err(ScalerError::PoolFull(pool.name.clone())),
        }
    }

    /// Takes a claimed runner from `pending_create` (or a half-done `creating`) to
    /// `running`: instance, GitHub registration, JIT secret.
    async fn bring_up(
        &self,
        name: &str,
        pool: &PoolConfig,
        job_id: u64,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        let mut runner = self
            .store
            .get_runner(name)
            .await?
            .ok_or_else(|| StoreError::NotFound(name.to_owned()))?;
        match runner.status {
            InstanceStatus::PendingCreate => {
                let to_creating =
                    Transition::new(runner.status, InstanceStatus::Creating, clock.now())
                        .because(format!("launching for job {job_id}"));
                runner = self.store.transition(name, &to_creating).await?;
            }
            InstanceStatus::Creating => {}
            _ => return Ok(Handled::RunnerUp(runner.name)),
        }
        match self.create(&runner, pool, clock).await {
            Ok(()) => {
                let to_running = Transition::new(
                    InstanceStatus::Creating,
                    InstanceStatus::Running,
                    clock.now(),
                )
                .because("instance launched, JIT config delivered");
                self.store.transition(name, &to_running).await?;
                info!(job_id, runner = %name, pool = %pool.name, "runner running");
                Ok(Handled::RunnerUp(name.to_owned()))
            }
            Err(CreateError::Retry(cause)) => Err(ScalerError::Creation {
                runner: name.to_owned(),
                cause,
            }),
            Err(CreateError::Failed(cause)) => {
                self.mark_failed(&runner, job_id, &cause, clock).await?;
                Err(ScalerError::Creation {
                    runner: name.to_owned(),
                    cause,
                })
            }
        }
    }

    async fn create(
        &self,
        runner: &RunnerRecord,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<(), CreateError> {
        let instance_id = match &runner.instance_id {
            Some(id) => id.clone(),
            None => {
                let spec = launch_spec(&runner.name, pool);
                let id = self
                    .launcher
                    .launch(&spec)
                    .await
                    .map_err(CreateError::from_fleet)?;
                info!(runner = %runner.name, instance_id = %id, "instance launched");
                let update = RunnerUpdate {
                    instance_id: Some(id.clone()),
                    ..RunnerUpdate::default()
                };
                self.store
                    .update_runner(&runner.name, &update, clock.now())
                    .await
                    .map_err(CreateError::retry)?;
                id
            }
        };
        let scope = scope_of(runner);
        if let Some(stale) = runner.github_runner_id {
            // A registration whose JIT config was never delivered (an earlier try died
            // after registering): its config is lost, so register afresh.
            self.forge
                .remove_runner(&scope, stale)
                .await
                .map_err(CreateError::from_forge)?;
        }
        let request = JitRequest {
            name: runner.name.clone(),
            labels: pool.labels.clone(),
            runner_group: pool.runner_group.clone(),
            work_folder: "_work".to_owned(),
        };
        let jit = self
            .forge
            .generate_jit_config(&scope, &request)
            .await
            .map_err(CreateError::from_forge)?;
        let update = RunnerUpdate {
            github_runner_id: Some(jit.runner_id),
            ..RunnerUpdate::default()
        };
        self.store
            .update_runner(&runner.name, &update, clock.now())
            .await
            .map_err(CreateError::retry)?;
        self.secrets
            .put(&instance_id, &runner.name, &jit.encoded)
            .await
            .map_err(CreateError::retry)
    }

    /// Records a creation that cannot succeed as `error` (the reaper cleans what was
    /// made) and frees the job, so the retried message launches a fresh runner.
    async fn mark_failed(
        &self,
        runner: &RunnerRecord,
        job_id: u64,
        cause: &Cause,
        clock: &Clock,
    ) -> Result<(), ScalerError> {
        let text = error_chain(cause.as_ref());
        error!(runner = %runner.name, job_id, error = %text, "runner creation failed");
        let mut to_error =
            Transition::new(InstanceStatus::Creating, InstanceStatus::Error, clock.now())
                .because("creation failed");
        to_error.error = Some(text);
        self.store.transition(&runner.name, &to_error).await?;
        self.store.unclaim_job(job_id, &runner.name).await?;
        Ok(())
    }

    async fn on_in_progress(
        &self,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        let runner_name = message.runner_name.as_deref();
        let job = job_record(message, JobStatus::InProgress, clock.now());
        self.store
            .advance_job(&job, JobStatus::InProgress, runner_name)
            .await?;
        let Some(name) = runner_name else {
            return Ok(Handled::NothingToDo);
        };
        let update = RunnerUpdate {
            runner_status: Some(RunnerStatus::Active),
            job_id: Some(message.job_id),
            note: Some(format!("running job {}", message.job_id)),
            ..RunnerUpdate::default()
        };
        match self.store.update_runner(name, &update, clock.now()).await {
            Ok(_) => {
                info!(job_id = message.job_id, runner = %name, "runner active");
                Ok(Handled::Bound)
            }
            Err(StoreError::NotFound(_)) => Ok(Handled::NothingToDo),
            Err(err) => Err(err.into()),
        }
    }

    async fn on_completed(
        &self,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
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
                ..RunnerUpdate::default()
            };
            self.store.update_runner(name, &update, clock.now()).await?;
            return Ok(Handled::Bound);
        }
        use InstanceStatus::*;
        if !matches!(runner.status, PendingCreate | Creating | Running | Error) {
            return Ok(Handled::NothingToDo);
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

/// A creation step failed: worth retrying as it is, or not.
enum CreateError {
    Retry(Cause),
    Failed(Cause),
}

impl CreateError {
    fn retry(err: impl std::error::Error + Send + Sync + 'static) -> CreateError {
        CreateError::Retry(Box::new(err))
    }

    fn from_fleet(err: FleetError) -> CreateError {
        match err {
            FleetError::Throttled(_) | FleetError::Transient(_) => CreateError::retry(err),
            FleetError::CapacityUnavailable(_) | FleetError::Rejected { .. } => {
                CreateError::Failed(Box::new(err))
            }
        }
    }

    fn from_forge(err: ForgeError) -> CreateError {
        match err {
            ForgeError::Throttled { .. } | ForgeError::Transient(_) | ForgeError::Unauthorized => {
                CreateError::retry(err)
            }
            ForgeError::AlreadyExists(_) | ForgeError::Rejected { .. } => {
                CreateError::Failed(Box::new(err))
            }
        }
    }
}

/// Where the runner is registered on GitHub.
pub fn scope_of(runner: &RunnerRecord) -> RunnerScope {
    RunnerScope {
        installation_id: runner.installation_id,
        owner: runner.owner.clone(),
        repo: runner.repo.clone(),
    }
}

fn launch_spec(runner_name: &str, pool: &PoolConfig) -> LaunchSpec {
    LaunchSpec {
        runner_name: runner_name.to_owned(),
        pool: pool.name.clone(),
        launch_template: pool.launch_template.clone(),
        ami: pool.ami.clone(),
        instance_type: pool.instance_types.first().cloned().unwrap_or_default(),
        subnet: pool.subnets.first().cloned(),
        spot: pool.spot,
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
        received_at: message.received_at,
        updated_at: now,
    }
}

#[cfg(test)]
#[path = "scaler_tests.rs"]
mod tests;

//! Register: each runner on its own is registered on GitHub, its JIT config handed to
//! its instance's JIT item, and marked `running`; a failed step is retried, abandoned
//! when no job waits for the runner any more, or fails the creation.

use super::claim::{claim_wait, CLAIM_TRIES};
use super::{Handled, Scaler, ScalerError};
use crate::clock::Clock;
use crate::config::PoolConfig;
use crate::handlers::error_chain;
use crate::lifecycle::InstanceStatus;
use crate::metrics::{Dimension, Metric};
use crate::model::{scope_of, RunnerRecord};
use crate::ports::*;
use std::time::Duration;
use tracing::{error, info};

/// How long the registration pace pauses after a throttled registration when GitHub
/// gave no `retry-after` (its documentation says to wait at least a minute).
const THROTTLE_PAUSE: Duration = Duration::from_secs(60);

/// A creation step failed: worth retrying as it is, or not.
pub(super) enum CreateError {
    Retry(Cause),
    /// GitHub's rate limit; `retry_after` as GitHub said.
    Throttled {
        retry_after: Option<Duration>,
        cause: Cause,
    },
    Failed(Cause),
}

impl CreateError {
    fn retry(err: impl std::error::Error + Send + Sync + 'static) -> CreateError {
        CreateError::Retry(Box::new(err))
    }

    fn from_forge(err: ForgeError) -> CreateError {
        match err {
            ForgeError::Throttled { retry_after } => CreateError::Throttled {
                retry_after,
                cause: Box::new(err),
            },
            ForgeError::Transient(_) | ForgeError::Unauthorized => CreateError::retry(err),
            ForgeError::AlreadyExists(_) | ForgeError::Rejected { .. } => {
                CreateError::Failed(Box::new(err))
            }
        }
    }
}

/// How a runner came to have a working JIT config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Registration {
    /// Registered now; the config is in the instance's JIT item.
    Delivered,
    /// Registered by an earlier try, whose config reached the instance: GitHub shows the
    /// runner online or busy.
    AlreadyServing,
}

impl Scaler {
    /// Registers the runner on GitHub, hands its JIT config to its instance, and marks it
    /// `running`; a runner an earlier try registered that GitHub shows online is marked
    /// `running` as it is.
    pub(super) async fn finish(
        &self,
        runner: RunnerRecord,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        let pool = self.pool(&runner.pool)?;
        if runner.prepare {
            return self.send_to_prepare(runner, clock).await;
        }
        match self.register(&runner, pool, clock).await {
            Ok(registration) => {
                let why = match registration {
                    Registration::Delivered => "instance launched, JIT config delivered",
                    Registration::AlreadyServing => {
                        "runner online on GitHub: an earlier try delivered its JIT config"
                    }
                };
                let to_running = Transition::new(
                    InstanceStatus::Creating,
                    InstanceStatus::Running,
                    clock.now(),
                )
                .because(why);
                self.store.transition(&runner.name, &to_running).await?;
                info!(runner = %runner.name, job_id = runner.job_id, pool = %pool.name, ?registration, "runner running");
                Ok(Handled::RunnerUp(runner.name))
            }
            Err(CreateError::Retry(cause)) => self.retry_or_abandon(&runner, cause, clock).await,
            Err(CreateError::Throttled { retry_after, cause }) => match &self.pace {
                // Paced: the job waits in the queue for the pace, not on this instance.
                Some(pace) => {
                    pace.pause(retry_after.unwrap_or(THROTTLE_PAUSE));
                    self.fail(&runner, cause, clock).await
                }
                None => self.retry_or_abandon(&runner, cause, clock).await,
            },
            Err(CreateError::Failed(cause)) => {
                self.metrics.record(
                    Metric::LaunchFailures,
                    &[
                        (Dimension::Pool, pool.name.as_str()),
                        (Dimension::Reason, "registration"),
                    ],
                    1.0,
                );
                self.fail(&runner, cause, clock).await
            }
        }
    }

    pub(super) async fn register(
        &self,
        runner: &RunnerRecord,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Registration, CreateError> {
        let Some(instance_id) = runner.instance_id.as_deref() else {
            return Err(CreateError::Failed("runner has no instance".into()));
        };
        let scope = scope_of(runner);
        if let Some(earlier) = runner.github_runner_id {
            // An earlier try registered the runner and died before `running`: before or
            // after it handed the JIT config over, the record cannot tell. GitHub can: a
            // runner it shows online or busy got its config and may be running a job, so
            // it stays (removing it would cut the job off; failing would give its slot
            // back while its instance serves).
            if self.serving_on_github(&scope, earlier).await? {
                return Ok(Registration::AlreadyServing);
            }
            // Never seen online: take its config as lost and register afresh. Busy
            // meanwhile means it came online after all.
            let removal = self
                .forge
                .remove_runner(&scope, earlier)
                .await
                .map_err(CreateError::from_forge)?;
            if removal == RunnerRemoval::Busy {
                return Ok(Registration::AlreadyServing);
            }
        }
        let request = JitRequest {
            name: runner.name.clone(),
            // The record's labels: the pool's and, for a sized job, the job's sizing
            // labels, so GitHub gives that job to this runner.
            labels: if runner.labels.is_empty() {
                crate::routing::registered_labels(pool)
            } else {
                runner.labels.clone()
            },
            runner_group: pool.runner_group.clone(),
            work_folder: "_work".to_owned(),
        };
        let jit = self
            .forge
            .generate_jit_config(&scope, &request)
            .await
            .map_err(CreateError::from_forge)?;
        // Only while the record still names this instance, the one the JIT config is for.
        let update = RunnerUpdate {
            github_runner_id: Some(jit.runner_id),
            expect_instance: Some(Some(instance_id.to_owned())),
            ..RunnerUpdate::default()
        };
        self.store
            .update_runner(&runner.name, &update, clock.now())
            .await
            .map_err(CreateError::retry)?;
        self.jit_store
            .put(instance_id, &runner.name, &jit)
            .await
            .map_err(|err| match err {
                JitStoreError::Rejected(_) => CreateError::Failed(Box::new(err)),
                other => CreateError::retry(other),
            })?;
        Ok(Registration::Delivered)
    }

    /// Whether GitHub shows the runner online or busy. Any error is worth a retry, never
    /// a failure: not knowing is no reason to release the slot.
    async fn serving_on_github(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<bool, CreateError> {
        let runner = self
            .forge
            .get_runner(scope, runner_id)
            .await
            .map_err(CreateError::retry)?;
        Ok(runner.is_some_and(|r| r.online || r.busy))
    }

    /// A creation step that is worth retrying failed: the message is retried while a job
    /// still waits for this runner. If none does (GitHub gave its job to another runner
    /// meanwhile and no job was handed to it), the half-made runner is sent to be
    /// deleted now, instead of standing in `creating` until the reaper's lease passes.
    pub(super) async fn retry_or_abandon(
        &self,
        runner: &RunnerRecord,
        cause: Cause,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        // Fresh reads: a hand-over may have given the runner another job meanwhile.
        let current = self.store.get_runner(&runner.name).await?;
        let job_id = current.as_ref().and_then(|r| r.job_id);
        let waiting = match job_id {
            Some(job_id) => self
                .store
                .get_job(job_id)
                .await?
                .is_some_and(|job| job.waits_for(&runner.name)),
            // A warm runner, made for no job: it waits for whichever comes.
            None => true,
        };
        let creating = current.is_some_and(|r| r.status == InstanceStatus::Creating);
        if waiting || !creating {
            return Err(ScalerError::Creation {
                runner: runner.name.clone(),
                cause,
            });
        }
        let reason = format!(
            "creation failed ({}) and job {} no longer waits for it",
            error_chain(cause.as_ref()),
            job_id.unwrap_or_default()
        );
        let to_delete = Transition::new(
            InstanceStatus::Creating,
            InstanceStatus::PendingDelete,
            clock.now(),
        )
        .because(reason);
        match self.store.transition(&runner.name, &to_delete).await {
            // Moved on meanwhile (another delivery finished it): the retry sees where to.
            Err(StoreError::TransitionRefused { .. } | StoreError::Conflict(_)) => {
                return Err(ScalerError::Creation {
                    runner: runner.name.clone(),
                    cause,
                })
            }
            Ok(_) => {}
            Err(err) => return Err(err.into()),
        }
        info!(runner = %runner.name, job_id, "creation failed; no job waits for the runner any more, so it is reaped");
        Ok(Handled::NothingToDo)
    }

    /// A creation that cannot succeed: the record goes to `error` and gives its slot back
    /// (the reaper cleans what was made), and the job is freed so the retried message
    /// launches a fresh runner.
    pub(super) async fn fail(
        &self,
        runner: &RunnerRecord,
        cause: Cause,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        let text = error_chain(cause.as_ref());
        error!(runner = %runner.name, job_id = runner.job_id, error = %text, "runner creation failed");
        // The transaction gives the slot back on the pool item, which a burst's claims
        // write many times a second: a conflict is waited out as a claim's is, rather
        // than failing the message (five failures dead-letter its job).
        let mut tries = 0;
        loop {
            tries += 1;
            match self
                .store
                .fail_creation(&runner.name, clock.now(), &text)
                .await
            {
                Err(StoreError::Conflict(_)) if tries < CLAIM_TRIES => {
                    tokio::time::sleep(claim_wait(tries, self.jitter.unit())).await;
                }
                other => {
                    other?;
                    break;
                }
            }
        }
        if let Some(job_id) = runner.job_id {
            self.store.unclaim_job(job_id, &runner.name).await?;
        }
        Err(ScalerError::Creation {
            runner: runner.name.clone(),
            cause,
        })
    }
}

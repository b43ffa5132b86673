//! The launch and finish phases of the scaler: one EC2 request per pool for the runners
//! of a batch (spot first when asked, on-demand for what spot could not give), then each
//! runner registered on GitHub with its JIT config handed to its instance.

use super::{Handled, Scaler, ScalerError};
use crate::clock::Clock;
use crate::config::PoolConfig;
use crate::handlers::error_chain;
use crate::lifecycle::InstanceStatus;
use crate::metrics::{Dimension, Metric};
use crate::model::RunnerRecord;
use crate::names;
use crate::ports::*;
use std::time::Duration;
use tracing::{error, info, warn};

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
enum Registration {
    /// Registered now; the config is in the instance's JIT item.
    Delivered,
    /// Registered by an earlier try, whose config reached the instance: GitHub shows the
    /// runner online or busy.
    AlreadyServing,
}

/// The `Reason` dimension of a launch failure.
fn failure_reason(err: &FleetError) -> &'static str {
    match err {
        FleetError::CapacityUnavailable(_) => "capacity",
        FleetError::Throttled(_) => "throttled",
        FleetError::Rejected { .. } => "rejected",
        FleetError::Transient(_) => "transient",
    }
}

/// Instances for `count` runners of `pool` in `deployment`: the pool's market first, and
/// on-demand for whatever spot had no capacity for. A pool with an `ami` launches through
/// the deployment's launch template (its instance profile, security groups, metadata
/// options and user data) with the image overridden.
pub fn fleet_request(
    deployment: &str,
    pool: &PoolConfig,
    count: u32,
    market: Market,
) -> FleetRequest {
    let template = pool.launch_template.clone();
    FleetRequest {
        pool: pool.name.clone(),
        count,
        launch_template: template.unwrap_or_else(|| names::launch_template_name(deployment)),
        template_version: pool.template_version(deployment),
        ami: pool.ami.clone(),
        instance_types: pool.instance_types.clone(),
        subnets: pool.subnets.clone(),
        market,
    }
}

impl Scaler {
    /// Launches instances for the runners of one pool in one request (plus one on-demand
    /// request if spot fell short), records each runner's instance, and fails the
    /// runners left without one. Returns the runners to finish and the failed outcomes.
    pub(super) async fn launch_pool(
        &self,
        pool_name: &str,
        runners: Vec<(String, RunnerRecord)>,
        clock: &Clock,
    ) -> (
        Vec<(String, RunnerRecord)>,
        Vec<(String, Result<Handled, ScalerError>)>,
    ) {
        let Ok(pool) = self.pool(pool_name) else {
            let failed = runners
                .into_iter()
                .map(|(id, _)| (id, Err(ScalerError::UnknownPool(pool_name.to_owned()))))
                .collect();
            return (Vec::new(), failed);
        };
        let count = u32::try_from(runners.len()).unwrap_or(u32::MAX);
        let (instance_ids, shortfall) = self.launch_with_fallback(pool, count).await;
        let by_pool = [(Dimension::Pool, pool.name.as_str())];
        self.metrics
            .record(Metric::RunnersLaunched, &by_pool, instance_ids.len() as f64);
        let missing = runners.len().saturating_sub(instance_ids.len());
        if missing > 0 {
            let reason = shortfall.as_ref().map_or("fewer_instances", failure_reason);
            self.metrics.record(
                Metric::LaunchFailures,
                &[
                    (Dimension::Pool, pool.name.as_str()),
                    (Dimension::Reason, reason),
                ],
                missing as f64,
            );
        }
        let mut launched = Vec::new();
        let mut failed = Vec::new();
        let mut instances = instance_ids.into_iter();
        for (message_id, runner) in runners {
            let Some(instance_id) = instances.next() else {
                let cause: Cause = match &shortfall {
                    Some(err) => error_chain(err).into(),
                    None => "EC2 launched fewer instances than asked".into(),
                };
                let outcome = self.fail(&runner, cause, clock).await;
                failed.push((message_id, outcome));
                continue;
            };
            // Only if no other delivery recorded an instance first: if one did, this
            // instance stays unrecorded (it never gets a JIT config) and the orphan sweep
            // ends it. Other changes to the record meanwhile (its job handed over, say)
            // do not matter.
            let update = RunnerUpdate {
                instance_id: Some(instance_id.clone()),
                expect_instance: Some(None),
                ..RunnerUpdate::default()
            };
            match self
                .store
                .update_runner(&runner.name, &update, clock.now())
                .await
            {
                Ok(runner) => {
                    if let Some(queued_at) = runner.job_queued_at {
                        self.metrics.record_duration(
                            Metric::QueuedToLaunched,
                            &by_pool,
                            clock.now() - queued_at,
                        );
                    }
                    info!(runner = %runner.name, %instance_id, pool = %pool.name, "instance launched");
                    launched.push((message_id, runner));
                }
                // The instance has no record now: the reaper's orphan sweep ends it.
                Err(err) => failed.push((message_id, Err(err.into()))),
            }
        }
        (launched, failed)
    }

    async fn launch_with_fallback(
        &self,
        pool: &PoolConfig,
        count: u32,
    ) -> (Vec<String>, Option<FleetError>) {
        let market = if pool.spot {
            Market::Spot
        } else {
            Market::OnDemand
        };
        let (mut ids, shortfall) = match self
            .launcher
            .launch(&fleet_request(&self.config.deployment, pool, count, market))
            .await
        {
            Ok(launch) => (launch.instance_ids, launch.shortfall),
            Err(err) => (Vec::new(), Some(err)),
        };
        let missing = count.saturating_sub(u32::try_from(ids.len()).unwrap_or(u32::MAX));
        match shortfall {
            Some(FleetError::CapacityUnavailable(code))
                if market == Market::Spot && missing > 0 =>
            {
                warn!(pool = %pool.name, missing, code = %code, "spot capacity unavailable; falling back to on-demand");
                self.metrics.record(
                    Metric::SpotFallbacks,
                    &[(Dimension::Pool, pool.name.as_str())],
                    f64::from(missing),
                );
                match self
                    .launcher
                    .launch(&fleet_request(
                        &self.config.deployment,
                        pool,
                        missing,
                        Market::OnDemand,
                    ))
                    .await
                {
                    Ok(launch) => {
                        ids.extend(launch.instance_ids);
                        (ids, launch.shortfall)
                    }
                    Err(err) => (ids, Some(err)),
                }
            }
            other => (ids, other),
        }
    }

    /// Registers the runner on GitHub, hands its JIT config to its instance, and marks it
    /// `running`; a runner an earlier try registered that GitHub shows online is marked
    /// `running` as it is.
    pub(super) async fn finish(
        &self,
        runner: RunnerRecord,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        let pool = self.pool(&runner.pool)?;
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

    async fn register(
        &self,
        runner: &RunnerRecord,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Registration, CreateError> {
        let Some(instance_id) = runner.instance_id.as_deref() else {
            return Err(CreateError::Failed("runner has no instance".into()));
        };
        let scope = super::scope_of(runner);
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
            labels: crate::routing::registered_labels(pool),
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
    async fn retry_or_abandon(
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
    async fn fail(
        &self,
        runner: &RunnerRecord,
        cause: Cause,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        let text = error_chain(cause.as_ref());
        error!(runner = %runner.name, job_id = runner.job_id, error = %text, "runner creation failed");
        self.store
            .fail_creation(&runner.name, clock.now(), &text)
            .await?;
        if let Some(job_id) = runner.job_id {
            self.store.unclaim_job(job_id, &runner.name).await?;
        }
        Err(ScalerError::Creation {
            runner: runner.name.clone(),
            cause,
        })
    }
}

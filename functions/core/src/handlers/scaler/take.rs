//! Take: a queued job whose pool keeps stopped instances takes one with one conditional
//! write (the record's move `stopped` → `starting` and the job's claim, one transaction),
//! then the runner is registered, its JIT config stored under the instance's ARN, and the
//! instance started; any failure sends the instance to be replaced and the job to a
//! launch at once (docs/design.md, "Stopped pool").

use super::register::CreateError;
use super::{Handled, Scaler, ScalerError, Step};
use crate::clock::Clock;
use crate::config::PoolConfig;
use crate::lifecycle::InstanceStatus;
use crate::message::QueueMessage;
use crate::model::RunnerRecord;
use crate::ports::*;
use tracing::{info, warn};

/// The most stopped records read for a take: a pool keeps few.
const STOPPED_READ: usize = 50;

/// Whether the stopped instance's runner would be given the job: its labels (the pool's,
/// as its record was reserved for no job) cover the job's, as GitHub assigns. A sized
/// job's sizing labels are on no stopped instance (prepared in the pool's own shape), so
/// it launches its own shape instead (chaos seed 26: sized jobs took stopped instances
/// whose runners GitHub never gave them, again and again).
pub(crate) fn serves(pool: &PoolConfig, record: &RunnerRecord, job_labels: &[String]) -> bool {
    let registered = if record.labels.is_empty() {
        crate::routing::registered_labels(pool)
    } else {
        record.labels.clone()
    };
    crate::routing::runner_takes(&registered, job_labels)
}

impl Scaler {
    /// Takes one of the pool's stopped instances for the job and starts it: the runner's
    /// name when the job now runs there, `None` when the pool had none free or the start
    /// failed (the job is then unclaimed again, for a launch).
    pub(super) async fn take_stopped(
        &self,
        message: &QueueMessage,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Option<String>, ScalerError> {
        if pool.stopped == 0 {
            return Ok(None);
        }
        let now = clock.now();
        let stopped = self
            .store
            .runners_in_status(InstanceStatus::Stopped, now, STOPPED_READ)
            .await?;
        for candidate in stopped.iter().filter(|r| {
            r.pool == pool.name
                && r.job_id.is_none()
                && r.instance_id.is_some()
                && serves(pool, r, &message.labels)
        }) {
            match self
                .store
                .take_stopped(message.job_id, &candidate.name, now)
                .await
            {
                Ok(true) => {}
                // Taken by another job meanwhile, or the job claimed by another delivery.
                Ok(false) | Err(StoreError::Conflict(_)) => continue,
                Err(err) => return Err(err.into()),
            }
            info!(job_id = message.job_id, runner = %candidate.name, pool = %pool.name, "stopped instance taken");
            let taken = self
                .store
                .get_runner(&candidate.name)
                .await?
                .ok_or_else(|| StoreError::NotFound(candidate.name.clone()))?;
            return self.start_taken(taken, message, pool, clock).await;
        }
        Ok(None)
    }

    /// Registers the taken runner, stores its JIT config and starts its instance; then
    /// `running`. On any failure the record goes to `pending_delete` (the reaper
    /// terminates the instance and the refill replaces it) and the job's claim is dropped.
    pub(super) async fn start_taken(
        &self,
        runner: RunnerRecord,
        message: &QueueMessage,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Option<String>, ScalerError> {
        let Some(instance_id) = runner.instance_id.clone() else {
            return self
                .give_up_take(&runner, message, "no instance", clock)
                .await;
        };
        let failure = match self.register(&runner, pool, clock).await {
            Ok(_) => match self.launcher.start(&instance_id).await {
                Ok(()) => None,
                Err(err) => Some(format!("StartInstances refused: {err}")),
            },
            Err(CreateError::Retry(cause) | CreateError::Throttled { cause, .. })
            | Err(CreateError::Failed(cause)) => Some(format!(
                "registration failed: {}",
                crate::handlers::error_chain(cause.as_ref())
            )),
        };
        if let Some(why) = failure {
            return self.give_up_take(&runner, message, &why, clock).await;
        }
        let to_running = Transition::new(
            InstanceStatus::Starting,
            InstanceStatus::Running,
            clock.now(),
        )
        .because("stopped instance started, JIT config delivered");
        self.store.transition(&runner.name, &to_running).await?;
        info!(runner = %runner.name, job_id = message.job_id, pool = %pool.name, instance_id, "stopped instance started for its job");
        Ok(Some(runner.name))
    }

    /// Resumes a take whose delivery died, once its lease is over: a write conditional on
    /// the record unchanged takes the lease (of two deliveries only one goes on); then the
    /// start as a fresh take; a failed one puts the job back in line to be launched for.
    pub(super) async fn resume_take(
        &self,
        runner: RunnerRecord,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Step, ScalerError> {
        let lease = RunnerUpdate {
            unchanged_since: Some(runner.updated_at),
            ..RunnerUpdate::default()
        };
        let runner = match self
            .store
            .update_runner(&runner.name, &lease, clock.now())
            .await
        {
            Ok(runner) => runner,
            Err(StoreError::Conflict(_)) => {
                return self
                    .wait_for_other(message, crate::lifecycle::CREATE_LEASE)
                    .await
            }
            Err(err) => return Err(err.into()),
        };
        let pool = self.pool(&runner.pool)?;
        match self.start_taken(runner, message, pool, clock).await? {
            Some(name) => Ok(Step::Done(Handled::RunnerUp(name))),
            // Back in line at once, as a fresh message: its next delivery launches.
            None => {
                self.send_back(message, std::time::Duration::ZERO).await?;
                Ok(Step::Done(Handled::Deferred))
            }
        }
    }

    /// A take that cannot go on: the instance is replaced and the job launched for.
    async fn give_up_take(
        &self,
        runner: &RunnerRecord,
        message: &QueueMessage,
        why: &str,
        clock: &Clock,
    ) -> Result<Option<String>, ScalerError> {
        warn!(runner = %runner.name, job_id = message.job_id, why, "stopped instance not started; replaced, and the job launched for");
        let to_delete = Transition::new(
            InstanceStatus::Starting,
            InstanceStatus::PendingDelete,
            clock.now(),
        )
        .because(format!("take failed: {why}"));
        match self.store.transition(&runner.name, &to_delete).await {
            Ok(_) | Err(StoreError::TransitionRefused { .. }) => {}
            Err(err) => return Err(err.into()),
        }
        self.store.unclaim_job(message.job_id, &runner.name).await?;
        Ok(None)
    }
}

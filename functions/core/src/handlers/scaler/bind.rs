//! Bind: `in_progress` binds the runner to the job it runs (handing its own job over
//! first when GitHub gave it another, see [`super::handover`]); `completed` sends an
//! ephemeral runner to be reaped and sets a static one idle.

use super::{Handled, Outcome, Scaler, ScalerError};
use crate::clock::Clock;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::message::{MessageKind, QueueMessage};
use crate::metrics::{Dimension, Metric};
use crate::model::RunnerRecord;
use crate::model::{JobRecord, JobStatus};
use crate::ports::*;
use crate::timeline::{jit_stored_at, launch_requested_at};
use time::OffsetDateTime;
use tracing::info;

/// How often binding a runner to the job it runs is tried again when its record changed
/// between the read and the conditional write.
const ACTIVATION_TRIES: usize = 5;

/// When a runner a job's `in_progress` names was online at the latest: GitHub's start of
/// the job, which GitHub gives to the second, so never before the runner's JIT config was
/// stored (nor after now). A first sighting stands (the store keeps the earliest write).
fn online_by(runner: &RunnerRecord, message: &QueueMessage, now: OffsetDateTime) -> OffsetDateTime {
    let started = message
        .github
        .started_at
        .map_or(now, |started| started.min(now));
    let floor = jit_stored_at(runner).or_else(|| launch_requested_at(runner));
    floor.map_or(started, |floor| started.max(floor).min(now))
}

impl Scaler {
    pub(super) async fn on_in_progress(&self, message: &QueueMessage, clock: &Clock) -> Outcome {
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
        let job = JobRecord::from_message(message, JobStatus::InProgress, clock.now());
        self.store
            .advance_job(&job, JobStatus::InProgress, runner_name)
            .await?;
        // GitHub's own wait, from its two times in this body (a redelivered
        // `in_progress` counts it again).
        if let (Some(queued), Some(started)) =
            (message.github.created_at, message.github.started_at)
        {
            let by_pool = [(Dimension::Pool, message.pool.as_str())];
            self.metrics
                .record_duration(Metric::QueueToStartSeconds, &by_pool, started - queued);
        }
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
            if !runner.runner_status.can_move_to(RunnerStatus::Active) {
                // Removed from GitHub by an operator: it runs nothing any more.
                return Ok(Handled::NothingToDo);
            }
            let online_at = online_by(&runner, message, clock.now());
            let bind = RunnerUpdate {
                runner_status: Some(RunnerStatus::Active),
                job_id: Some(message.job_id),
                note: Some(format!("running job {}", message.job_id)),
                unchanged_since: Some(runner.updated_at),
                online_at: Some(online_at),
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
            let by_pool = [(Dimension::Pool, runner.pool.as_str())];
            if runner.runner_status == RunnerStatus::Pending {
                if let Some(queued_at) = runner.job_queued_at {
                    self.metrics.record_duration(
                        Metric::QueuedToOnline,
                        &by_pool,
                        clock.now() - queued_at,
                    );
                }
                if let Some(launched) = launch_requested_at(&runner) {
                    self.metrics.record_duration(
                        Metric::BootSeconds,
                        &by_pool,
                        online_at - launched,
                    );
                }
            }
            info!(job_id = message.job_id, runner = %name, "runner active");
            return Ok(Handled::Bound);
        }
        Err(ScalerError::Store(StoreError::Conflict(format!(
            "runner {name} kept changing while it was bound to job {}",
            message.job_id
        ))))
    }

    pub(super) async fn bind(
        &self,
        name: &str,
        bind: &RunnerUpdate,
        clock: &Clock,
    ) -> Result<(), ScalerError> {
        self.store.update_runner(name, bind, clock.now()).await?;
        Ok(())
    }

    pub(super) async fn on_completed(&self, message: &QueueMessage, clock: &Clock) -> Outcome {
        let runner_name = message.runner_name.as_deref();
        let job = JobRecord::from_message(message, JobStatus::Completed, clock.now());
        self.store
            .advance_job(&job, JobStatus::Completed, runner_name)
            .await?;
        let Some(name) = runner_name else {
            return Ok(Handled::NothingToDo);
        };
        let Some(runner) = self.store.get_runner(name).await? else {
            return Ok(Handled::NothingToDo);
        };
        self.want_rerun_if_interrupted(&runner, message, clock)
            .await?;
        if !runner.ephemeral {
            if !runner.runner_status.can_move_to(RunnerStatus::Idle) {
                return Ok(Handled::NothingToDo);
            }
            let update = RunnerUpdate {
                runner_status: Some(RunnerStatus::Idle),
                note: Some(format!("job {} completed", message.job_id)),
                ..RunnerUpdate::default()
            };
            self.store.update_runner(name, &update, clock.now()).await?;
            return Ok(Handled::Idle);
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
        // GitHub fails the job of a reclaimed spot instance, often before EC2 reports the
        // termination: the reason keeps the interruption in sight.
        let reason = if runner.interrupted_at.is_some() {
            format!(
                "job {} ended by a spot interruption: EC2 reclaimed the instance",
                message.job_id
            )
        } else {
            format!("job {} completed", message.job_id)
        };
        let to_delete = Transition::new(runner.status, PendingDelete, clock.now()).because(reason);
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

//! Prepare: each message on its own. A `queued` job is recorded (idempotent), checked
//! with GitHub when the pool asks for it, and claimed, or its runner's record resumed at
//! the step it shows; a `warm` runner's reserved record is resumed the same way;
//! `in_progress` and `completed` go to [`super::bind`].

use super::claim::Reservation;
use super::handover::REHOME;
use super::{Handled, Scaler, ScalerError, Step};
use crate::clock::Clock;
use crate::config::PoolConfig;
use crate::lifecycle::{InstanceStatus, CREATE_LEASE};
use crate::message::{MessageKind, QueueMessage};
use crate::model::{JobRecord, JobStatus, RunnerRecord};
use crate::ports::*;
use std::collections::HashSet;
use tracing::{info, warn};

impl Scaler {
    pub(super) async fn prepare(
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

    pub(super) async fn prepare_queued(
        &self,
        message: &QueueMessage,
        clock: &Clock,
        full: &HashSet<String>,
    ) -> Result<Step, ScalerError> {
        let pool = self.pool(&message.pool)?;
        // A take needs no slot (the stopped instance holds its own): a pool whose slots
        // its stopped instances hold is full, and its jobs take them (chaos seed 164).
        if full.contains(&pool.name) && pool.stopped == 0 {
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
    pub(super) async fn prepare_paced(
        &self,
        message: &QueueMessage,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Step, ScalerError> {
        let job = self
            .store
            .record_job(&JobRecord::from_message(
                message,
                JobStatus::Queued,
                clock.now(),
            ))
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
        if job.runner_name.is_none() {
            if let Some(name) = self.take_stopped(message, pool, clock).await? {
                return Ok(Step::Done(Handled::RunnerUp(name)));
            }
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
    pub(super) async fn resume_claimed(
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
    pub(super) async fn prepare_warm(
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
    pub(super) async fn next_step(
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
            // A take whose delivery died before its start: its lease over, started again
            // (registration, JIT config and StartInstances are each safe to repeat).
            InstanceStatus::Starting if clock.now() - runner.updated_at < CREATE_LEASE => {
                let left = CREATE_LEASE - (clock.now() - runner.updated_at);
                self.wait_for_other(message, left.unsigned_abs()).await
            }
            InstanceStatus::Starting => self.resume_take(runner, message, clock).await,
            _ => Ok(Step::Done(Handled::RunnerUp(runner.name))),
        }
    }

    /// Resumes a `creating` record whose lease is over, taking the lease with a write
    /// conditional on the record not having changed since it was read: of two deliveries
    /// resuming it at once only one goes on (two would launch two instances and hand the
    /// JIT config to one the record no longer names); the other checks again later.
    pub(super) async fn take_over(
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
    pub(super) async fn still_queued(
        &self,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<bool, ScalerError> {
        let looked_up = self
            .forge
            .job_state(
                message.installation_id,
                &message.owner,
                &message.repo,
                message.job_id,
            )
            .await;
        let state = match looked_up {
            // GitHub's budget is spent: the check is only a saving, so the job goes on as
            // queued rather than spend its receives waiting for GitHub (a runner for a job
            // that moved on meanwhile is never assigned, and the reaper ends it).
            Err(ForgeError::Throttled { .. }) => {
                warn!(
                    job_id = message.job_id,
                    "GitHub throttled the queued check; taken as queued"
                );
                return Ok(true);
            }
            other => other.map_err(|cause| ScalerError::JobLookup {
                job_id: message.job_id,
                cause,
            })?,
        };
        let moved_on = match state {
            Some(ForgeJobState::Queued | ForgeJobState::Other) => return Ok(true),
            Some(ForgeJobState::InProgress) => Some(JobStatus::InProgress),
            Some(ForgeJobState::Completed) => Some(JobStatus::Completed),
            None => None,
        };
        if let Some(status) = moved_on {
            let job = JobRecord::from_message(message, status, clock.now());
            self.store.advance_job(&job, status, None).await?;
        }
        info!(job_id = message.job_id, state = ?state, "job no longer queued on GitHub; no runner launched");
        Ok(false)
    }
}

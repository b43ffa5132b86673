//! The reaper handler: takes `pending_delete` and `pending_force_delete` records to
//! `deleted`, without ever killing a runner in the middle of a job.
//!
//! Graceful deletion removes the runner from GitHub first; that DELETE is itself the
//! "is it busy?" check (422), so there is no window between a check and a delete in which
//! a job could start. A busy runner keeps its instance and is looked at again next run,
//! with no time limit. Provider errors back off exponentially. Forced deletion logs and
//! ignores every provider error and reaches `deleted` in one pass, so a broken config or
//! expired credentials can never strand a record.

use crate::backoff;
use crate::clock::Clock;
use crate::config::Config;
use crate::handlers::error_chain;
use crate::handlers::scaler::scope_of;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::model::RunnerRecord;
use crate::ports::*;
use std::sync::Arc;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// Records read per status per run; the rest waits for the next run.
const BATCH: usize = 100;
/// Deletions under way at once (each is independent and conditional).
const PARALLEL_DELETES: usize = 8;

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReaperReport {
    /// Runners seen online for the first time.
    pub came_online: usize,
    pub deleted: usize,
    /// Deletions put off because the runner is running a job.
    pub busy: usize,
    /// Deletions put off after a provider error (backing off).
    pub backed_off: usize,
    /// Records left for the next run because the deadline came.
    pub left_for_next_run: bool,
}

/// How one deletion attempt ended.
enum Outcome {
    Deleted,
    Busy,
    BackedOff,
    Skipped,
}

/// Deletes what was asked to be deleted, and watches runners come online.
#[derive(Clone)]
pub struct Reaper {
    config: Arc<Config>,
    store: Arc<dyn RunnerStore>,
    fleet: Arc<dyn Fleet>,
    forge: Arc<dyn Forge>,
    secrets: Arc<dyn JitSecrets>,
}

impl Reaper {
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn RunnerStore>,
        fleet: Arc<dyn Fleet>,
        forge: Arc<dyn Forge>,
        secrets: Arc<dyn JitSecrets>,
    ) -> Reaper {
        Reaper {
            config,
            store,
            fleet,
            forge,
            secrets,
        }
    }

    /// One run at `now`; starts no new work after `deadline`.
    pub async fn run(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<ReaperReport, StoreError> {
        let mut report = ReaperReport {
            came_online: self.watch_bootstrapping(now, deadline).await?,
            ..ReaperReport::default()
        };
        for status in [
            InstanceStatus::PendingForceDelete,
            InstanceStatus::PendingDelete,
        ] {
            let mut records = self
                .store
                .runners_in_status(status, now, BATCH)
                .await?
                .into_iter();
            let mut deleting = tokio::task::JoinSet::new();
            loop {
                while deleting.len() < PARALLEL_DELETES {
                    let Some(record) = records.next() else { break };
                    if Instant::now() >= deadline {
                        report.left_for_next_run = true;
                        break;
                    }
                    let reaper = self.clone();
                    deleting.spawn(
                        async move { reaper.delete(record, &Clock::starting_at(now)).await },
                    );
                }
                let Some(joined) = deleting.join_next().await else {
                    break;
                };
                match joined {
                    Ok(Ok(Outcome::Deleted)) => report.deleted += 1,
                    Ok(Ok(Outcome::Busy)) => report.busy += 1,
                    Ok(Ok(Outcome::BackedOff)) => report.backed_off += 1,
                    Ok(Ok(Outcome::Skipped)) => {}
                    Ok(Err(err)) => {
                        warn!(error = %error_chain(&err), "deletion step failed; next run retries it")
                    }
                    Err(join_error) => {
                        warn!(%join_error, "deletion task failed; next run retries it")
                    }
                }
            }
            if report.left_for_next_run {
                return Ok(report);
            }
        }
        Ok(report)
    }

    /// Marks `running` runners that GitHub shows online as idle (or active).
    async fn watch_bootstrapping(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<usize, StoreError> {
        let mut came_online = 0;
        for record in self
            .store
            .runners_in_status(InstanceStatus::Running, now, BATCH)
            .await?
        {
            if Instant::now() >= deadline {
                break;
            }
            let (RunnerStatus::Pending, Some(runner_id)) =
                (record.runner_status, record.github_runner_id)
            else {
                continue;
            };
            let seen = match self.forge.get_runner(&scope_of(&record), runner_id).await {
                Ok(Some(seen)) if seen.online => seen,
                Ok(_) => continue,
                Err(err) => {
                    warn!(runner = %record.name, error = %error_chain(&err), "cannot read runner from GitHub");
                    continue;
                }
            };
            let status = if seen.busy {
                RunnerStatus::Active
            } else {
                RunnerStatus::Idle
            };
            let update = RunnerUpdate {
                runner_status: Some(status),
                ..RunnerUpdate::default()
            };
            self.store.update_runner(&record.name, &update, now).await?;
            info!(runner = %record.name, runner_status = %status, "runner online");
            came_online += 1;
        }
        Ok(came_online)
    }

    async fn delete(&self, record: RunnerRecord, clock: &Clock) -> Result<Outcome, StoreError> {
        let force = record.status == InstanceStatus::PendingForceDelete;
        let mut to_deleting = Transition::new(record.status, InstanceStatus::Deleting, clock.now());
        to_deleting.reason = record.reason.clone();
        let runner = match self.store.transition(&record.name, &to_deleting).await {
            Ok(runner) => runner,
            // Another reaper (or the operator) moved it first.
            Err(StoreError::TransitionRefused { .. }) => return Ok(Outcome::Skipped),
            Err(err) => return Err(err),
        };
        let name = runner.name.as_str();
        if let Some(runner_id) = runner.github_runner_id {
            match self
                .forge
                .remove_runner(&scope_of(&runner), runner_id)
                .await
            {
                Ok(RunnerRemoval::Removed | RunnerRemoval::NotFound) => {}
                Ok(RunnerRemoval::Busy) if force => {
                    warn!(runner = %name, "forced delete of a runner that is running a job");
                }
                Ok(RunnerRemoval::Busy) => return self.put_off_busy(&runner, clock.now()).await,
                Err(err) if force => {
                    warn!(runner = %name, error = %error_chain(&err), "GitHub removal failed; ignored (force)")
                }
                Err(err) => return self.back_off(&runner, &err, clock.now()).await,
            }
        }
        if let Some(instance_id) = &runner.instance_id {
            if let Err(err) = self.fleet.terminate(instance_id).await {
                if !force {
                    return self.back_off(&runner, &err, clock.now()).await;
                }
                warn!(runner = %name, %instance_id, error = %error_chain(&err), "terminate failed; ignored (force)");
            }
            if let Err(err) = self.secrets.delete(instance_id).await {
                if !force {
                    return self.back_off(&runner, &err, clock.now()).await;
                }
                warn!(runner = %name, %instance_id, error = %error_chain(&err), "JIT secret delete failed; ignored (force)");
            }
        }
        let at = clock.now();
        self.store
            .finish_deletion(name, at, at + self.config.reaper.deleted_ttl)
            .await?;
        info!(runner = %name, pool = %runner.pool, force, instance_id = runner.instance_id.as_deref(), "runner deleted");
        Ok(Outcome::Deleted)
    }

    /// GitHub refused the removal: a job is running. Keep everything; look again next run.
    async fn put_off_busy(
        &self,
        runner: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<Outcome, StoreError> {
        let back = Transition::new(InstanceStatus::Deleting, InstanceStatus::PendingDelete, now)
            .because("busy");
        self.store.transition(&runner.name, &back).await?;
        info!(runner = %runner.name, job_id = runner.job_id, "runner is running a job; deletion put off");
        Ok(Outcome::Busy)
    }

    /// A provider error: back to `pending_delete`, due again after an exponential delay.
    async fn back_off(
        &self,
        runner: &RunnerRecord,
        err: &(dyn std::error::Error + Send + Sync + 'static),
        now: OffsetDateTime,
    ) -> Result<Outcome, StoreError> {
        let attempts = runner.attempts + 1;
        let delay = backoff::delay_after(attempts);
        let mut back =
            Transition::new(InstanceStatus::Deleting, InstanceStatus::PendingDelete, now)
                .because("retrying after error");
        back.attempts = Some(attempts);
        back.error = Some(error_chain(err));
        back.next_attempt_at = now + delay;
        self.store.transition(&runner.name, &back).await?;
        warn!(runner = %runner.name, attempts, retry_in = ?delay, error = %error_chain(err), "deletion failed; backing off");
        Ok(Outcome::BackedOff)
    }
}

#[cfg(test)]
#[path = "reaper_tests.rs"]
mod tests;

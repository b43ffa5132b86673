//! `missed_queued`, missed `queued` and lost launches: a job the table still holds as `queued`
//! with no live runner, [`QUEUED_GRACE`] after it was received, is looked up on GitHub.
//! Still queued: its message is rebuilt and sent again, and the job is looked at again
//! in [`JOB_RECHECK`]. Started or finished: the job item is moved forward. Jobs of a
//! full pool are not queued again (the scaler keeps those in line itself), but one is
//! looked up if a runner that could take it has stood idle for [`QUEUED_GRACE`]; so is a
//! job whose own runner has (GitHub gives a queued job to an idle runner at once, so its
//! `in_progress` and `completed` were probably lost elsewhere): if it moved on, the item
//! follows, and the idle runner is no longer kept for it.

use super::decide::{idle_runner_could_take, idle_since, JOB_RECHECK, QUEUED_GRACE};
use super::{Reaper, Snapshot, JOB_BATCH};
use crate::handlers::error_chain;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::message::QueueMessage;
use crate::metrics::{Dimension, Metric};
use crate::model::{JobRecord, JobStatus};
use crate::ports::*;
use std::collections::HashMap;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// Who holds a queued job's claim.
enum ClaimState {
    /// A live runner that is being created, bootstrapping, or busy.
    Served,
    /// A live runner idle for [`QUEUED_GRACE`], which GitHub would have given the job.
    Idle,
    /// No live runner: the name of the dead one still holding the claim, if any.
    Dead(Option<String>),
}

/// What became of one queued job.
enum JobCheck {
    Requeued,
    Moved,
    Waiting,
}

impl Reaper {
    /// Looks at the due queued jobs; returns how many were queued again.
    pub(super) async fn requeue_lost_jobs(
        &self,
        snapshot: &Snapshot,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<usize, StoreError> {
        let due = self
            .store
            .jobs_in_status(JobStatus::Queued, now, JOB_BATCH)
            .await?;
        let mut pool_full: HashMap<String, bool> = HashMap::new();
        let mut requeued = 0;
        for job in due {
            if Instant::now() >= deadline {
                break;
            }
            if now - job.received_at < QUEUED_GRACE {
                continue;
            }
            let dead_claim = match self.claim_without_runner(&job, now).await? {
                ClaimState::Served => continue,
                ClaimState::Idle => {
                    if let Err(err) = self.check_moved_on(&job, now).await {
                        warn!(rule = "missed_queued", job_id = job.job_id, error = %err, "cannot check queued job; next run retries");
                    }
                    continue;
                }
                ClaimState::Dead(claim) => claim,
            };
            let full = match pool_full.get(&job.pool) {
                Some(full) => *full,
                None => {
                    let max = self.config.pool(&job.pool).map_or(0, |p| p.runner_cap());
                    let full = self.store.pool_counter(&job.pool).await?.slots_used >= max;
                    pool_full.insert(job.pool.clone(), full);
                    full
                }
            };
            // A stopped instance ready to be taken holds a slot, but a take needs none:
            // a full pool is not full for a job that could take one, which the scaler
            // keeps in line only while it has to (chaos seed 100652: a job whose runner
            // timed out, in a pool whose one slot a stopped instance held, was never
            // queued again).
            let full = full && !self.could_take_stopped(snapshot, &job);
            if full {
                // The scaler keeps this job in line until a slot frees, but a slot held by
                // an idle runner that could take it frees only once the job is over (rule
                // 11 keeps an idle runner for a queued job it could take): a job cancelled
                // with its `completed` lost would hold that runner, and the runner the
                // job's slot, for ever. GitHub would have given the job to that runner, so
                // it is looked up.
                if idle_runner_could_take(&snapshot.runners, &job, now) {
                    if let Err(err) = self.check_moved_on(&job, now).await {
                        warn!(rule = "missed_queued", job_id = job.job_id, error = %err, "cannot check queued job; next run retries");
                    }
                }
                continue;
            }
            match self.check_queued(&job, dead_claim.as_deref(), now).await {
                Ok(JobCheck::Requeued) => requeued += 1,
                Ok(JobCheck::Moved | JobCheck::Waiting) => {}
                Err(err) => {
                    warn!(rule = "missed_queued", job_id = job.job_id, error = %err, "cannot check queued job; next run retries")
                }
            }
        }
        Ok(requeued)
    }

    /// Whether the job's pool has a `stopped` instance the job could take (its runner
    /// would be given the job).
    fn could_take_stopped(&self, snapshot: &Snapshot, job: &JobRecord) -> bool {
        let Some(pool) = self.config.pool(&job.pool) else {
            return false;
        };
        snapshot.runners.iter().any(|r| {
            r.pool == job.pool
                && r.status == InstanceStatus::Stopped
                && r.job_id.is_none()
                && crate::handlers::scaler::serves(pool, r, &job.labels)
        })
    }

    /// Whether a live runner holds the job's claim, and how it is doing.
    async fn claim_without_runner(
        &self,
        job: &JobRecord,
        now: OffsetDateTime,
    ) -> Result<ClaimState, StoreError> {
        let Some(name) = &job.runner_name else {
            return Ok(ClaimState::Dead(None));
        };
        // A consistent read: the status index may not show a runner claimed just now.
        let Some(runner) = self.store.get_runner(name).await? else {
            return Ok(ClaimState::Dead(Some(name.clone())));
        };
        Ok(match runner.status {
            InstanceStatus::Running
                if runner.runner_status == RunnerStatus::Idle
                    && now - idle_since(&runner) >= QUEUED_GRACE =>
            {
                ClaimState::Idle
            }
            // A take (`starting`) is a creation too: `creation_stalled` resumes or
            // releases one whose delivery died (chaos seed 101581: a take that crashed
            // after StartInstances was taken for a dead claim, and a second runner
            // launched for its job).
            InstanceStatus::PendingCreate
            | InstanceStatus::Creating
            | InstanceStatus::Starting
            | InstanceStatus::Running => ClaimState::Served,
            _ => ClaimState::Dead(Some(name.clone())),
        })
    }

    /// A job whose runner idles: moves its item forward if GitHub has moved it on,
    /// else looks again in [`JOB_RECHECK`] (its runner is there; nothing is queued again).
    async fn check_moved_on(
        &self,
        job: &JobRecord,
        now: OffsetDateTime,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let state = self
            .forge
            .job_state(job.installation_id, &job.owner, &job.repo, job.job_id)
            .await?;
        let moved_to = match state {
            Some(ForgeJobState::Queued | ForgeJobState::Other) => None,
            Some(ForgeJobState::InProgress) => Some(JobStatus::InProgress),
            Some(ForgeJobState::Completed) | None => Some(JobStatus::Completed),
        };
        match moved_to {
            Some(status) => {
                let mut seen = job.clone();
                seen.updated_at = now;
                self.store.advance_job(&seen, status, None).await?;
                info!(rule = "missed_queued", job_id = job.job_id, %status, "job of an idle runner had moved on unseen; job item advanced");
            }
            None => {
                self.store
                    .recheck_job_at(job.job_id, now + JOB_RECHECK)
                    .await?;
            }
        }
        Ok(())
    }

    async fn check_queued(
        &self,
        job: &JobRecord,
        dead_claim: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<JobCheck, Box<dyn std::error::Error + Send + Sync>> {
        let state = self
            .forge
            .job_state(job.installation_id, &job.owner, &job.repo, job.job_id)
            .await?;
        let moved_to = match state {
            Some(ForgeJobState::Queued) => None,
            Some(ForgeJobState::InProgress) => Some(JobStatus::InProgress),
            Some(ForgeJobState::Completed) | None => Some(JobStatus::Completed),
            Some(ForgeJobState::Other) => {
                self.store
                    .recheck_job_at(job.job_id, now + JOB_RECHECK)
                    .await?;
                return Ok(JobCheck::Waiting);
            }
        };
        if let Some(status) = moved_to {
            let mut seen = job.clone();
            seen.updated_at = now;
            self.store.advance_job(&seen, status, None).await?;
            info!(rule = "missed_queued", job_id = job.job_id, %status, "queued job had moved on unseen; job item advanced");
            return Ok(JobCheck::Moved);
        }
        if let Some(runner) = dead_claim {
            self.store.unclaim_job(job.job_id, runner).await?;
        }
        self.queue
            .send(&QueueMessage::queued_again(job, "requeue"))
            .await
            .map_err(|err| error_chain(&err))?;
        self.store
            .recheck_job_at(job.job_id, now + JOB_RECHECK)
            .await?;
        self.metrics.record(
            Metric::Reenqueued,
            &[(Dimension::Pool, job.pool.as_str())],
            1.0,
        );
        info!(rule = "missed_queued", job_id = job.job_id, pool = %job.pool, "queued job had no runner; queued again");
        Ok(JobCheck::Requeued)
    }
}

//! Records that nothing else would move: a creation for a job that stalled
//! (`creation_stalled`), a runner GitHub no longer knows (`forgotten_by_github`), and the
//! job items the reaper learns have moved on (`job_follows_github`).
//!
//! A stalled creation is resumed when its job is still queued and claimed by it (a fresh
//! `queued` message takes the scaler through the creation again, under its lease), and
//! released otherwise, one run after its lease rather than after the bootstrap timeout.
//! A registered runner missing from GitHub past [`FORGOTTEN_GRACE`] ran some job unseen
//! (GitHub gives a queued job to any idle runner with the labels) and was removed with its
//! webhooks lost: its record goes to be deleted, and the job it was launched for, if still
//! queued on GitHub, goes back to the queue. A job item left `in_progress` with no live
//! runner is looked up, a few per run, until GitHub shows it finished.

use super::decide::{FORGOTTEN_GRACE, QUEUED_GRACE};
use super::{Reaper, Snapshot, JOB_BATCH};
use crate::handlers::error_chain;
use crate::lifecycle::InstanceStatus;
use crate::message::QueueMessage;
use crate::model::scope_of;
use crate::model::{JobRecord, JobStatus, RunnerRecord};
use crate::ports::*;
use std::collections::HashSet;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// In-progress job items without a live runner looked up per run.
const SETTLE_CHECKS_PER_RUN: usize = 10;

/// What GitHub's answer about a job makes of its item: `None` while it waits to run.
pub(super) fn settled_status(state: Option<ForgeJobState>) -> Option<JobStatus> {
    match state {
        Some(ForgeJobState::Queued | ForgeJobState::Other) => None,
        Some(ForgeJobState::InProgress) => Some(JobStatus::InProgress),
        // A job GitHub no longer knows will never run: nothing waits for it.
        Some(ForgeJobState::Completed) | None => Some(JobStatus::Completed),
    }
}

impl Reaper {
    /// `creation_stalled`: resumes or releases a creation for a job that stalled past its lease.
    /// Returns the record if it was sent to be deleted.
    pub(super) async fn resume_or_release(
        &self,
        record: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<Option<RunnerRecord>, StoreError> {
        let Some(job_id) = record.job_id else {
            return Ok(None);
        };
        // A consistent read: the snapshot's queued jobs may miss a hand-over just made.
        let job = self.store.get_job(job_id).await?;
        let claimed = job.filter(|job| job.waits_for(&record.name));
        let Some(job) = claimed else {
            let reason = format!("creation stalled and job {job_id} no longer waits for it");
            return self
                .send_to_delete(record, "creation_stalled", &reason, now)
                .await;
        };
        match self
            .queue
            .send(&QueueMessage::queued_again(&job, "resume"))
            .await
        {
            Ok(()) => {
                info!(rule = "creation_stalled", runner = %record.name, job_id, status = %record.status, "creation stalled past its lease; resumed");
            }
            Err(err) => {
                warn!(rule = "creation_stalled", runner = %record.name, job_id, error = %error_chain(&err), "cannot resume a stalled creation; next run tries again");
            }
        }
        Ok(None)
    }

    /// Moves a job item to what GitHub says of it (never backwards); logs, never fails
    /// the run.
    pub(super) async fn settle_job(
        &self,
        job: &JobRecord,
        status: JobStatus,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut seen = job.clone();
        seen.updated_at = now;
        self.store.advance_job(&seen, status, None).await?;
        info!(rule = "job_follows_github", job_id = job.job_id, %status, "job item follows GitHub's status");
        Ok(())
    }

    /// `forgotten_by_github` for an idle runner: asks GitHub whether it still knows it; if not (past
    /// the grace), releases it, else looks again in [`super::JOB_CHECK_INTERVAL`].
    pub(super) async fn check_runner(
        &self,
        record: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<Option<RunnerRecord>, StoreError> {
        if let Some(gone) = self.release_if_forgotten(record, now).await? {
            return Ok(Some(gone));
        }
        let next = now + super::JOB_CHECK_INTERVAL;
        self.store
            .recheck_runner_at(&record.name, InstanceStatus::Running, next)
            .await?;
        Ok(None)
    }

    /// `forgotten_by_github`: a registered runner that GitHub no longer knows, past the grace, is
    /// released (see [`Reaper::release_forgotten`]). An error reading GitHub changes
    /// nothing.
    pub(super) async fn release_if_forgotten(
        &self,
        record: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<Option<RunnerRecord>, StoreError> {
        let Some(runner_id) = record.github_runner_id else {
            return Ok(None);
        };
        if now - record.updated_at < FORGOTTEN_GRACE {
            return Ok(None);
        }
        match self.forge.get_runner(&scope_of(record), runner_id).await {
            Ok(None) => self.release_forgotten(record, now).await,
            Ok(Some(_)) => Ok(None),
            Err(err) => {
                warn!(rule = "forgotten_by_github", runner = %record.name, error = %error_chain(&err), "cannot read runner from GitHub");
                Ok(None)
            }
        }
    }

    /// Sends a runner GitHub no longer knows to be deleted (past the grace), and gives
    /// the job it was launched for, if it still holds that job's claim, back to the queue
    /// (or settles the job item, if GitHub has moved the job on).
    pub(super) async fn release_forgotten(
        &self,
        record: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<Option<RunnerRecord>, StoreError> {
        if now - record.updated_at < FORGOTTEN_GRACE {
            return Ok(None);
        }
        let reason = "GitHub no longer knows the runner (it ran a job unseen)";
        let Some(moved) = self
            .send_to_delete(record, "forgotten_by_github", reason, now)
            .await?
        else {
            return Ok(None);
        };
        if let Some(job_id) = record.job_id {
            if let Err(err) = self.free_job_of(record, job_id, now).await {
                warn!(rule = "forgotten_by_github", runner = %record.name, job_id, error = %err, "cannot free the job of a forgotten runner; missed_queued takes it up");
            }
        }
        Ok(Some(moved))
    }

    async fn free_job_of(
        &self,
        record: &RunnerRecord,
        job_id: u64,
        now: OffsetDateTime,
    ) -> Result<(), Cause> {
        let Some(job) = self.store.get_job(job_id).await? else {
            return Ok(());
        };
        if job.status == JobStatus::Completed || job.runner_name.as_deref() != Some(&record.name) {
            return Ok(());
        }
        let state = self
            .forge
            .job_state(job.installation_id, &job.owner, &job.repo, job_id)
            .await?;
        match settled_status(state) {
            Some(status) => self.settle_job(&job, status, now).await?,
            None if job.status == JobStatus::Queued => {
                self.store.unclaim_job(job_id, &record.name).await?;
                self.queue
                    .send(&QueueMessage::queued_again(&job, "forgotten"))
                    .await?;
                info!(rule = "forgotten_by_github", job_id, runner = %record.name, "job of a runner GitHub no longer knows queued again");
            }
            None => {}
        }
        Ok(())
    }

    /// `job_follows_github`: job items still `in_progress` whose runner is no longer live (reaped
    /// after a missed `completed`, or never ours), a few per run: each follows GitHub.
    /// Returns how many were settled.
    pub(super) async fn settle_running_jobs(
        &self,
        snapshot: &Snapshot,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<usize, StoreError> {
        // A job is being served while its runner is live, busy, and bound to it; an idle
        // runner (static, or warm) that ran it no longer is.
        let serving: HashSet<(&str, u64)> = snapshot
            .runners
            .iter()
            .filter(|r| {
                matches!(
                    r.status,
                    InstanceStatus::PendingCreate
                        | InstanceStatus::Creating
                        | InstanceStatus::Running
                ) && r.runner_status != crate::lifecycle::RunnerStatus::Idle
            })
            .filter_map(|r| Some((r.name.as_str(), r.job_id?)))
            .collect();
        let in_progress = self
            .store
            .jobs_in_status(JobStatus::InProgress, now, JOB_BATCH)
            .await?;
        let unserved = in_progress.into_iter().filter(|job| {
            now - job.updated_at >= QUEUED_GRACE
                && job
                    .runner_name
                    .as_deref()
                    .is_none_or(|name| !serving.contains(&(name, job.job_id)))
        });
        let mut settled = 0;
        for job in unserved.take(SETTLE_CHECKS_PER_RUN) {
            if Instant::now() >= deadline {
                break;
            }
            let state = self
                .forge
                .job_state(job.installation_id, &job.owner, &job.repo, job.job_id)
                .await;
            match state.map(settled_status) {
                Ok(Some(JobStatus::Completed)) => {
                    self.settle_job(&job, JobStatus::Completed, now).await?;
                    settled += 1;
                }
                Ok(_) => {}
                Err(err) => {
                    warn!(rule = "job_follows_github", job_id = job.job_id, error = %error_chain(&err), "cannot read job from GitHub; next run retries");
                }
            }
        }
        Ok(settled)
    }
}

//! The record rules in action: runners seen online for the first time are marked so
//! (and timed), the verdicts of [`super::decide::verdicts`] become moves to
//! `pending_delete` (or, for a runner online while still `creating`, to `running`), and
//! active runners are checked against GitHub for a `completed`
//! that never arrived — each at most every [`JOB_CHECK_INTERVAL`], through the record's
//! `next_attempt_at`, so GitHub is not asked about every runner on every run.

use super::decide::{self, Cleanup, Verdict, JOB_CHECKS_PER_RUN, JOB_CHECK_INTERVAL};
use super::{stopped, Reaper, ReaperReport, Snapshot};
use crate::handlers::error_chain;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::metrics::{Dimension, Metric};
use crate::model::scope_of;
use crate::model::{JobStatus, RunnerRecord};
use crate::ports::*;
use crate::timeline::launch_requested_at;
use std::collections::{HashMap, HashSet};
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// GitHub lookups of bootstrapping runners per run, the longest-waiting first.
pub const WATCH_LOOKUPS_PER_RUN: usize = 30;

impl Reaper {
    /// Marks bootstrapping runners that GitHub shows online as idle (or active); returns
    /// their names.
    pub(super) async fn watch_bootstrapping(
        &self,
        snapshot: &Snapshot,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<HashSet<String>, StoreError> {
        let mut came_online = HashSet::new();
        let mut waiting: Vec<&RunnerRecord> = snapshot
            .runners
            .iter()
            .filter(|r| {
                r.status == InstanceStatus::Running && r.runner_status == RunnerStatus::Pending
            })
            .collect();
        // Most runners are seen busy through their job's `in_progress` first; the rest
        // cost a GitHub call each, taken from the installation's hourly budget, so a
        // burst's thousand new runners must not cost a thousand calls a minute.
        waiting.sort_by_key(|r| r.updated_at);
        waiting.truncate(WATCH_LOOKUPS_PER_RUN);
        for record in waiting {
            if Instant::now() >= deadline {
                break;
            }
            let Some(runner_id) = record.github_runner_id else {
                continue;
            };
            let seen = match self.forge.get_runner(&scope_of(record), runner_id).await {
                Ok(Some(seen)) if seen.online => seen,
                Ok(None) => {
                    // Registered, never seen online here, and gone: it ran a job unseen.
                    self.release_forgotten(record, now).await?;
                    continue;
                }
                Ok(_) => continue,
                Err(err) => {
                    warn!(runner = %record.name, error = %error_chain(&err), "cannot read runner from GitHub");
                    continue;
                }
            };
            self.mark_online(record, &seen, now).await?;
            came_online.insert(record.name.clone());
        }
        Ok(came_online)
    }

    /// Records a runner GitHub shows online: idle, or active when it is busy.
    /// Marks `record`'s runner online (idle, or active when GitHub says busy) and times
    /// its boot, unless the record changed since it was read: then the scaler bound it to
    /// its job first (its `in_progress` is the first sighting, timed there), and marking it
    /// again would count its boot twice and could overwrite `active` with `idle`.
    pub(super) async fn mark_online(
        &self,
        record: &RunnerRecord,
        seen: &ForgeRunner,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let status = if seen.busy {
            RunnerStatus::Active
        } else {
            RunnerStatus::Idle
        };
        let update = RunnerUpdate {
            runner_status: Some(status),
            note: Some("online".to_owned()),
            online_at: Some(now),
            unchanged_since: Some(record.updated_at),
            ..RunnerUpdate::default()
        };
        match self.store.update_runner(&record.name, &update, now).await {
            Ok(_) => {}
            Err(StoreError::Conflict(_)) => return Ok(()),
            Err(err) => return Err(err),
        }
        let by_pool = [(Dimension::Pool, record.pool.as_str())];
        if let Some(queued_at) = record.job_queued_at {
            self.metrics
                .record_duration(Metric::QueuedToOnline, &by_pool, now - queued_at);
        }
        if let Some(launched) = launch_requested_at(record) {
            self.metrics
                .record_duration(Metric::BootSeconds, &by_pool, now - launched);
        }
        info!(runner = %record.name, runner_status = %status, "runner online");
        Ok(())
    }

    /// Whether a runner past its bootstrap timeout is online after all: seen so in this
    /// run, or now on GitHub (one GET, marked online then). Under a burst its job's
    /// `in_progress` may wait in the queue behind thousands of messages while it runs
    /// the job; a DELETE would only meet it busy, and be put off and sent again every
    /// run, each a call of the installation's `core` budget. When GitHub cannot be read,
    /// it is left for the next run (a DELETE would fail the same way).
    async fn online_after_all(
        &self,
        record: &RunnerRecord,
        seen_online: &HashSet<String>,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        if seen_online.contains(&record.name) {
            return Ok(true);
        }
        let Some(runner_id) = record.github_runner_id else {
            return Ok(false);
        };
        match self.forge.get_runner(&scope_of(record), runner_id).await {
            Ok(Some(seen)) if seen.online => {
                self.mark_online(record, &seen, now).await?;
                Ok(true)
            }
            Ok(_) => Ok(false),
            Err(err) => {
                warn!(rule = "never_online", runner = %record.name, error = %error_chain(&err), "cannot read runner from GitHub; looking again next run");
                Ok(true)
            }
        }
    }

    /// Applies the record rules; returns the records now in `pending_delete`, to be
    /// deleted in this same run.
    pub(super) async fn apply_rules(
        &self,
        snapshot: &Snapshot,
        instances: Option<&[Instance]>,
        seen_online: &HashSet<String>,
        now: OffsetDateTime,
        deadline: Instant,
        report: &mut ReaperReport,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        let mut verdicts = decide::verdicts(
            &self.config,
            &snapshot.runners,
            instances,
            &snapshot.queued_jobs,
            now,
        );
        if let Some(instances) = instances {
            let images = self.stopped_pool_images(&snapshot.runners).await;
            let judged: HashSet<&str> = verdicts.iter().map(|(r, _)| r.name.as_str()).collect();
            let replaced = stopped::stopped_replacements(
                &self.config,
                &snapshot.runners,
                instances,
                &images,
                &judged,
                now,
            );
            verdicts.extend(
                replaced
                    .into_iter()
                    .map(|(record, cleanup)| (record, Verdict::Clean(cleanup))),
            );
        }
        let mut marked = Vec::new();
        let mut job_checks = 0;
        for (record, verdict) in verdicts {
            if Instant::now() >= deadline {
                report.left_for_next_run = true;
                break;
            }
            if matches!(verdict, Verdict::CheckJob | Verdict::CheckRunner) {
                // Still due, the rest come first in a later run (read by `next_attempt_at`).
                if job_checks == JOB_CHECKS_PER_RUN {
                    continue;
                }
                job_checks += 1;
            }
            let moved = match verdict {
                Verdict::Clean(Cleanup::BootstrapTimeout)
                    if self.online_after_all(&record, seen_online, now).await? =>
                {
                    None
                }
                Verdict::Clean(cleanup) => {
                    self.send_to_delete(&record, cleanup.rule(), cleanup.reason(), now)
                        .await?
                }
                Verdict::CheckJob => self.check_job(&record, now).await?,
                Verdict::CheckRunner => self.check_runner(&record, now).await?,
                Verdict::StalledCreation => self.resume_or_release(&record, now).await?,
                Verdict::Created => {
                    self.record_created(&record, now).await?;
                    None
                }
                Verdict::Prepared => {
                    self.record_stopped(&record, now).await?;
                    None
                }
            };
            if let Some(moved) = moved {
                if verdict == Verdict::Clean(Cleanup::InstanceGone) {
                    self.metrics
                        .record(Metric::OrphansReaped, &[(Dimension::Kind, "record")], 1.0);
                }
                report.sent_to_delete += 1;
                marked.push(moved);
            }
        }
        Ok(marked)
    }

    /// The image each pool with a `stopped` record launches now, by pool; a pool whose
    /// image cannot be read is left out (its stopped instances wait for the next run).
    async fn stopped_pool_images(&self, live: &[RunnerRecord]) -> HashMap<String, String> {
        let mut images = HashMap::new();
        for name in stopped::pools_with_stopped(live) {
            let Some(pool) = self.config.pools.iter().find(|p| p.name == name) else {
                continue;
            };
            let deployment = &self.config.deployment;
            let template = pool.launch_template_name(deployment);
            let version = pool.template_version(deployment);
            match self
                .fleet
                .launch_image(&template, &version, pool.ami.as_deref())
                .await
            {
                Ok(Some(image)) => {
                    images.insert(name.to_owned(), image);
                }
                Ok(None) => {}
                Err(err) => {
                    warn!(rule = "stopped_outdated", pool = %name, error = %error_chain(&err), "cannot read the image the pool launches; looking again next run");
                }
            }
        }
        images
    }

    /// Moves a live record to `pending_delete`, from exactly the status it was read in.
    pub(super) async fn send_to_delete(
        &self,
        record: &RunnerRecord,
        rule: &'static str,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<Option<RunnerRecord>, StoreError> {
        let to_delete =
            Transition::new(record.status, InstanceStatus::PendingDelete, now).because(reason);
        match self.store.transition(&record.name, &to_delete).await {
            Ok(moved) => {
                info!(rule, runner = %record.name, pool = %record.pool, from = %record.status, reason, "runner sent to be deleted");
                Ok(Some(moved))
            }
            // It moved since it was read (the scaler or an operator got there first).
            Err(StoreError::TransitionRefused { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// `came_online`: a runner that came online while its record still said `creating`
    /// (or `starting`: a take that died after StartInstances) is recorded `running`,
    /// from exactly the status it was read in.
    async fn record_created(
        &self,
        record: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let to_running = Transition::new(record.status, InstanceStatus::Running, now)
            .because("runner came online; its creation stopped before recording it");
        match self.store.transition(&record.name, &to_running).await {
            Ok(_) => {
                info!(rule = "came_online", runner = %record.name, pool = %record.pool, runner_status = %record.runner_status, "runner online while still creating; recorded running");
                Ok(())
            }
            // It moved since it was read (a delivery finished it, or it was deleted).
            Err(StoreError::TransitionRefused { .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// `instance_stopped`: the prepared host powered off; its shutdown behaviour is set
    /// back to `terminate` (so that its power-off after its job ends it, as every
    /// runner's does), then the record is `stopped`, ready to be taken. While the
    /// behaviour cannot be set the record stays `preparing` (never taken), and the next
    /// run tries again.
    async fn record_stopped(
        &self,
        record: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        if let Some(instance_id) = record.instance_id.as_deref() {
            if let Err(err) = self
                .fleet
                .set_shutdown_behaviour(instance_id, ShutdownBehaviour::Terminate)
                .await
            {
                warn!(rule = "instance_stopped", runner = %record.name, %instance_id, error = %error_chain(&err), "cannot set the stopped instance's shutdown behaviour back to terminate; next run tries again");
                return Ok(());
            }
        }
        let to_stopped = Transition::new(InstanceStatus::Preparing, InstanceStatus::Stopped, now)
            .because("instance prepared and stopped");
        match self.store.transition(&record.name, &to_stopped).await {
            Ok(_) => {
                info!(rule = "instance_stopped", runner = %record.name, pool = %record.pool, "stopped pool's instance ready");
                Ok(())
            }
            Err(StoreError::TransitionRefused { .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// `missed_completed`: has the job of this active runner ended without its `completed` reaching
    /// us? The table's job item is asked first, GitHub only if that still says running.
    /// An ephemeral runner whose job ended goes to be deleted; a static one is idle
    /// again. Otherwise the next look is in [`JOB_CHECK_INTERVAL`].
    async fn check_job(
        &self,
        record: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<Option<RunnerRecord>, StoreError> {
        let Some(job_id) = record.job_id else {
            return self.check_busy_runner(record, now).await;
        };
        let ended = match self.store.get_job(job_id).await? {
            Some(job) if job.status == JobStatus::Completed => true,
            Some(job) => match self
                .forge
                .job_state(job.installation_id, &job.owner, &job.repo, job_id)
                .await
            {
                Ok(state) => {
                    let settled = super::settle::settled_status(state);
                    if let Some(status) = settled.filter(|&s| s != job.status) {
                        self.settle_job(&job, status, now).await?;
                    }
                    settled == Some(JobStatus::Completed)
                }
                Err(err) => {
                    warn!(rule = "missed_completed", runner = %record.name, job_id, error = %error_chain(&err), "cannot read job from GitHub; looking again later");
                    false
                }
            },
            None => false,
        };
        if !ended {
            if let Some(gone) = self.release_if_forgotten(record, now).await? {
                return Ok(Some(gone));
            }
            let next = now + JOB_CHECK_INTERVAL;
            self.store
                .recheck_runner_at(&record.name, InstanceStatus::Running, next)
                .await?;
            return Ok(None);
        }
        let reason = format!("job {job_id} completed (webhook missed)");
        if record.ephemeral {
            return self
                .send_to_delete(record, "missed_completed", &reason, now)
                .await;
        }
        let update = RunnerUpdate {
            runner_status: Some(RunnerStatus::Idle),
            note: Some(reason),
            ..RunnerUpdate::default()
        };
        self.store.update_runner(&record.name, &update, now).await?;
        info!(rule = "missed_completed", runner = %record.name, job_id, "static runner's job ended unseen; runner idle again");
        Ok(None)
    }

    /// `missed_completed` for an active runner that names no job (seen busy before any `in_progress`
    /// named it, which then never came): GitHub's view of the runner says whether its
    /// job ended. A static runner GitHub shows not busy is idle again; a runner GitHub no
    /// longer knows (an ephemeral one, removed after its job) is released past the grace.
    async fn check_busy_runner(
        &self,
        record: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<Option<RunnerRecord>, StoreError> {
        let Some(runner_id) = record.github_runner_id else {
            return Ok(None);
        };
        match self.forge.get_runner(&scope_of(record), runner_id).await {
            Ok(None) => {
                if let Some(gone) = self.release_forgotten(record, now).await? {
                    return Ok(Some(gone));
                }
            }
            Ok(Some(runner)) if !runner.busy && !record.ephemeral => {
                let update = RunnerUpdate {
                    runner_status: Some(RunnerStatus::Idle),
                    note: Some("GitHub shows it no longer busy (webhooks missed)".to_owned()),
                    ..RunnerUpdate::default()
                };
                self.store.update_runner(&record.name, &update, now).await?;
                info!(rule = "missed_completed", runner = %record.name, "static runner's job ended unseen; runner idle again");
                return Ok(None);
            }
            Ok(Some(_)) => {}
            Err(err) => {
                warn!(rule = "missed_completed", runner = %record.name, error = %error_chain(&err), "cannot read runner from GitHub; looking again later");
            }
        }
        let next = now + JOB_CHECK_INTERVAL;
        self.store
            .recheck_runner_at(&record.name, InstanceStatus::Running, next)
            .await?;
        Ok(None)
    }
}

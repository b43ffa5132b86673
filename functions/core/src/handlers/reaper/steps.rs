//! The run's steps in their order (the table in [`super`]'s module doc): the deletions
//! and the record rules first, every run, then the later steps, each started only while
//! the deadline has not come.

use super::delete::LaunchTimes;
use super::snapshot::Snapshot;
use super::{Reaper, ReaperReport};
use crate::clock::Clock;
use crate::ports::{Instance, StoreError};
use std::collections::HashSet;
use time::OffsetDateTime;
use tokio::time::Instant;

/// The steps after the deletions, each skipped once the deadline has come.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Warm,
    OrphanInstances,
    OrphanRunners,
    LostJobs,
    Redeliver,
    Reruns,
    Counters,
    RunnerRelease,
}

/// The later steps, in the order a run takes them.
pub(super) const LATER_STEPS: [Step; 8] = [
    Step::Warm,
    Step::OrphanInstances,
    Step::OrphanRunners,
    Step::LostJobs,
    Step::Redeliver,
    Step::Reruns,
    Step::Counters,
    Step::RunnerRelease,
];

/// What the steps share: the run's reads and what its rules sent away.
pub(super) struct Run<'a> {
    pub(super) snapshot: &'a Snapshot,
    /// The run's one describe (None: EC2 could not be listed).
    pub(super) instances: Option<&'a [Instance]>,
    /// EC2's launch times of the live records' instances.
    pub(super) launched: &'a LaunchTimes,
    /// The runners the rules sent to be deleted this run.
    pub(super) leaving: HashSet<String>,
    pub(super) now: OffsetDateTime,
    pub(super) deadline: Instant,
}

impl Reaper {
    /// The record rules and their deletions: runners seen online, the verdicts of
    /// [`super::decide::verdicts`] applied, and what they sent to `pending_delete`
    /// deleted at once (stamped by `clock`); the runners sent away go in `run.leaving`.
    pub(super) async fn reconcile_and_delete(
        &self,
        run: &mut Run<'_>,
        clock: &Clock,
        report: &mut ReaperReport,
    ) -> Result<(), StoreError> {
        let (snapshot, now, deadline) = (run.snapshot, run.now, run.deadline);
        let seen_online = self.watch_bootstrapping(snapshot, now, deadline).await?;
        report.came_online = seen_online.len();
        let marked = self
            .apply_rules(snapshot, run.instances, &seen_online, now, deadline, report)
            .await?;
        run.leaving = marked.iter().map(|r| r.name.clone()).collect();
        let already_done = Snapshot {
            runners: Vec::new(),
            queued_jobs: Vec::new(),
            complete: snapshot.complete,
        };
        let at = clock.now();
        self.delete_due(&already_done, marked, run.launched, at, deadline, report)
            .await;
        Ok(())
    }

    /// One later step, its counts added to `report`.
    pub(super) async fn run_step(
        &self,
        step: Step,
        run: &Run<'_>,
        report: &mut ReaperReport,
    ) -> Result<(), StoreError> {
        let (snapshot, now, deadline) = (run.snapshot, run.now, run.deadline);
        match step {
            Step::Warm => {
                let leaving = run.leaving.iter().map(String::as_str).collect();
                report.warm_requested += self
                    .top_up_warm(snapshot, &leaving, now, deadline, report)
                    .await;
                report.stopped_requested += self
                    .top_up_stopped(snapshot, &leaving, now, deadline, report)
                    .await;
            }
            Step::OrphanInstances => {
                if let Some(instances) = run.instances {
                    report.orphans_reaped += self.sweep_instances(snapshot, instances, now).await;
                }
            }
            Step::OrphanRunners => {
                report.orphans_reaped += self.sweep_runners(snapshot, deadline).await;
            }
            Step::LostJobs => {
                report.requeued += self.requeue_lost_jobs(snapshot, now, deadline).await?;
                report.jobs_settled += self.settle_running_jobs(snapshot, now, deadline).await?;
            }
            Step::Redeliver => report.redelivered += self.redeliver_failed(now, deadline).await,
            Step::Reruns => report.reruns_asked += self.ask_reruns(now, deadline).await,
            Step::Counters => {
                report.counters_repaired += self.repair_counters(snapshot, now).await?
            }
            Step::RunnerRelease => {
                if let Some(sync) = &self.runner_sync {
                    report.runner_release = Some(sync.run(now, deadline).await);
                }
            }
        }
        Ok(())
    }
}

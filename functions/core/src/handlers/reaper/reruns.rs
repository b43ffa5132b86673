//! The re-runs of interrupted jobs ([`crate::rerun`]), one step of each run: a wanted
//! re-run whose workflow run has completed is asked of GitHub, once; one whose run is
//! still in progress waits (GitHub answers 403 until then); one that waited
//! [`RERUN_PATIENCE`](crate::rerun::RERUN_PATIENCE) is given up; entries done a day ago
//! are forgotten.

use super::Reaper;
use crate::handlers::error_chain;
use crate::metrics::{Dimension, Metric};
use crate::ports::{refusal_did_nothing, RerunStore, RunnerUpdate, StoreError, WorkflowRuns};
use crate::rerun::{next_step, verdict, Rerun, RerunState, RunVerdict, Step, RUN_CHECK};
use std::sync::Arc;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// Where the reaper keeps and asks for re-runs.
#[derive(Clone)]
pub struct Reruns {
    pub store: Arc<dyn RerunStore>,
    pub runs: Arc<dyn WorkflowRuns>,
}

impl Reaper {
    /// Looks at every wanted re-run; returns how many were asked of GitHub. A failure
    /// with one entry leaves it for the next run.
    pub(super) async fn ask_reruns(&self, now: OffsetDateTime, deadline: Instant) -> usize {
        let Some(reruns) = &self.reruns else {
            return 0;
        };
        let entries = match reruns.store.reruns().await {
            Ok(entries) => entries,
            Err(err) => {
                warn!(error = %error_chain(&err), "cannot read the wanted re-runs; they wait");
                return 0;
            }
        };
        let mut asked = 0;
        for rerun in entries {
            if Instant::now() >= deadline {
                break;
            }
            match self.look_at_rerun(reruns, &rerun, now).await {
                Ok(true) => asked += 1,
                Ok(false) => {}
                Err(err) => {
                    warn!(run = %rerun.run, error = %error_chain(&err), "cannot move the re-run; it waits")
                }
            }
        }
        asked
    }

    /// One entry's step; true if GitHub was asked to re-run its job.
    async fn look_at_rerun(
        &self,
        reruns: &Reruns,
        rerun: &Rerun,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        match next_step(rerun, now) {
            Step::Wait => Ok(false),
            Step::Forget => reruns.store.forget_rerun(&rerun.run).await.map(|()| false),
            Step::GiveUp => {
                let why = "its workflow run did not complete within a day";
                self.give_up(reruns, rerun, why, now).await.map(|()| false)
            }
            Step::ReadRun => self.ask_if_run_completed(reruns, rerun, now).await,
        }
    }

    async fn ask_if_run_completed(
        &self,
        reruns: &Reruns,
        rerun: &Rerun,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let run = match reruns
            .runs
            .run_state(rerun.installation_id, &rerun.run)
            .await
        {
            Ok(run) => run,
            Err(err) => {
                warn!(run = %rerun.run, error = %error_chain(&err), "cannot read the workflow run; the re-run waits");
                return Ok(false);
            }
        };
        match verdict(rerun.run_attempt, run.as_ref()) {
            RunVerdict::Wait => {
                let again = now + RUN_CHECK;
                let wanted = RerunState::Wanted;
                reruns
                    .store
                    .move_rerun(&rerun.run, wanted, wanted, again)
                    .await?;
                Ok(false)
            }
            RunVerdict::Never(why) => self.give_up(reruns, rerun, why, now).await.map(|()| false),
            RunVerdict::Ask => self.ask(reruns, rerun, now).await,
        }
    }

    /// Marks the entry asked, then asks: of two reapers, only the one whose mark held
    /// ever asks.
    async fn ask(
        &self,
        reruns: &Reruns,
        rerun: &Rerun,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let asked = RerunState::Asked(now);
        if !reruns
            .store
            .move_rerun(&rerun.run, RerunState::Wanted, asked, now)
            .await?
        {
            return Ok(false);
        }
        match reruns
            .runs
            .rerun_job(rerun.installation_id, &rerun.run, rerun.job_id)
            .await
        {
            Ok(()) => {
                self.count_rerun(rerun, "asked");
                info!(run = %rerun.run, job_id = rerun.job_id, pool = %rerun.pool, "interrupted job re-run; its new job goes on-demand");
                self.note(
                    rerun,
                    format!("job {} re-run after its spot interruption", rerun.job_id),
                    now,
                )
                .await;
                Ok(true)
            }
            Err(err) if refusal_did_nothing(&err) => {
                warn!(run = %rerun.run, job_id = rerun.job_id, error = %error_chain(&err), "GitHub refused the re-run; asking again later");
                let again = now + RUN_CHECK;
                reruns
                    .store
                    .move_rerun(&rerun.run, asked, RerunState::Wanted, again)
                    .await?;
                Ok(false)
            }
            Err(err) => {
                // GitHub may have re-run it: never asked twice.
                warn!(run = %rerun.run, job_id = rerun.job_id, error = %error_chain(&err), "the re-run's answer was lost; it is not asked again");
                Ok(false)
            }
        }
    }

    async fn give_up(
        &self,
        reruns: &Reruns,
        rerun: &Rerun,
        why: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let gave_up = RerunState::GaveUp(now);
        if reruns
            .store
            .move_rerun(&rerun.run, RerunState::Wanted, gave_up, now)
            .await?
        {
            self.count_rerun(rerun, "given_up");
            warn!(run = %rerun.run, job_id = rerun.job_id, reason = why, "interrupted job not re-run");
            self.note(
                rerun,
                format!("job {} not re-run: {why}", rerun.job_id),
                now,
            )
            .await;
        }
        Ok(())
    }

    fn count_rerun(&self, rerun: &Rerun, outcome: &str) {
        let dimensions = [
            (Dimension::Pool, rerun.pool.as_str()),
            (Dimension::Outcome, outcome),
        ];
        self.metrics
            .record(Metric::InterruptedJobsRerun, &dimensions, 1.0);
    }

    /// A history entry on the interrupted runner's record, while it is kept.
    async fn note(&self, rerun: &Rerun, note: String, now: OffsetDateTime) {
        let update = RunnerUpdate {
            note: Some(note),
            ..RunnerUpdate::default()
        };
        match self.store.update_runner(&rerun.runner, &update, now).await {
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(err) => {
                warn!(runner = %rerun.runner, error = %error_chain(&err), "cannot note the re-run on the runner")
            }
        }
    }
}

//! The scaler's two parts of the re-run of an interrupted job ([`crate::rerun`]): the
//! failed job's `completed` records the wanted re-run, and the re-run's `queued` job is
//! sent to on-demand.

use super::{Scaler, ScalerError};
use crate::clock::Clock;
use crate::config::PoolConfig;
use crate::message::QueueMessage;
use crate::model::RunnerRecord;
use crate::ports::Market;
use crate::rerun::{Rerun, RerunState, RunKey};
use tracing::{info, warn};

impl Scaler {
    /// Records the re-run of the job `message` completes when it failed because its
    /// runner was interrupted, in a pool that re-runs such jobs. Any other job is never
    /// re-run.
    pub(super) async fn want_rerun_if_interrupted(
        &self,
        runner: &RunnerRecord,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<(), ScalerError> {
        let Some(reruns) = &self.reruns else {
            return Ok(());
        };
        let reruns_here = self
            .config
            .pool(&runner.pool)
            .is_some_and(|pool| pool.reruns_interrupted());
        if !reruns_here
            || !message.attempt.failed()
            || runner.interrupted_at.is_none()
            || runner.job_id != Some(message.job_id)
        {
            return Ok(());
        }
        let rerun = Rerun {
            run: run_key(message),
            job_id: message.job_id,
            run_attempt: message.attempt.run_attempt,
            installation_id: message.installation_id,
            pool: runner.pool.clone(),
            runner: runner.name.clone(),
            wanted_at: clock.now(),
            state: RerunState::Wanted,
            next_check_at: clock.now(),
        };
        if reruns.want_rerun(&rerun).await? {
            info!(job_id = message.job_id, run = %rerun.run, runner = %runner.name, "job failed by a spot interruption: re-run wanted once its workflow run completes");
        } else {
            warn!(job_id = message.job_id, run = %rerun.run, "the workflow run has a re-run recorded already (this job's, delivered again, or another job's: one a run)");
        }
        Ok(())
    }

    /// Whether the job of a queued `message` is the re-run of an interrupted job, to be
    /// launched on-demand: read only for a later attempt of a run (or a job ephemera
    /// queued again from its record, which keeps no attempt: any job of a run with a
    /// re-run then goes on-demand), in a pool that would launch spot and re-runs
    /// interrupted jobs. A failed read launches as usual.
    pub(super) async fn is_rerun(&self, message: &QueueMessage, pool: &PoolConfig) -> bool {
        let Some(reruns) = &self.reruns else {
            return false;
        };
        let later_attempt = message.attempt.run_attempt > 1 || message.rebuilt();
        if !later_attempt || !pool.spot || !pool.reruns_interrupted() {
            return false;
        }
        match reruns.rerun_of(&run_key(message)).await {
            Ok(found) => found.is_some(),
            Err(err) => {
                warn!(job_id = message.job_id, error = %err, "cannot read the run's re-run; launching as usual");
                false
            }
        }
    }
}

/// The workflow run of a job's message.
fn run_key(message: &QueueMessage) -> RunKey {
    RunKey {
        owner: message.owner.clone(),
        repo: message.repo.clone(),
        run_id: message.run_id,
    }
}

/// The market a runner's record names before its launch: on-demand for a re-run.
pub(super) fn forced_market(runner: &RunnerRecord) -> Option<Market> {
    runner
        .instance_id
        .is_none()
        .then_some(runner.market)
        .flatten()
}

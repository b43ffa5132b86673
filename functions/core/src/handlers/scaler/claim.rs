//! Claim: one transaction claims the queued job for a new runner record and takes a
//! pool slot; a claim that loses races on the pool item is tried again after a jittered
//! wait, and one that keeps losing goes back in line.

use super::{Handled, Scaler, ScalerError, Step};
use crate::clock::Clock;
use crate::config::{PoolConfig, Scope};
use crate::lifecycle::InstanceStatus;
use crate::message::QueueMessage;
use crate::model::{HistoryEntry, RunnerRecord};
use crate::names;
use crate::ports::*;
use std::time::Duration;
use tracing::{info, warn};

/// How often a claim that lost a race on the pool item (DynamoDB's
/// `TransactionConflict`: every claim of a pool writes its one pool item) is tried within
/// one delivery. Waits are drawn at random below a bound doubling from
/// [`CLAIM_FIRST_WAIT`] up to [`CLAIM_MAX_WAIT`] (full jitter), so the claims of a burst
/// spread out instead of meeting again: at most about 4.6 s in all.
pub(super) const CLAIM_TRIES: u32 = 10;
pub(super) const CLAIM_FIRST_WAIT: Duration = Duration::from_millis(25);
pub(super) const CLAIM_MAX_WAIT: Duration = Duration::from_secs(1);
/// A job whose claim kept losing races goes back in line this long (up to twice), as a
/// fresh message: a conflict is never the message's fault, so it never counts as a
/// failed receive.
pub(super) const CONTENDED_RETRY: Duration = Duration::from_secs(2);

/// What claiming a queued job gave.
pub(super) enum Reservation {
    /// The job's runner (made now, or by an earlier delivery).
    Runner(String),
    NotQueued,
    PoolFull,
    /// Every try lost a race to another transaction on the pool item.
    Contended,
}

impl Scaler {
    /// Claims the job for a new runner record (or finds the runner that claimed it).
    pub(super) async fn claim(
        &self,
        message: &QueueMessage,
        pool: &PoolConfig,
        clock: &Clock,
    ) -> Result<Reservation, ScalerError> {
        let now = clock.now();
        let mut runner = RunnerRecord::new(
            names::runner_name_drawn(&self.config.deployment, &pool.name, || self.jitter.unit()),
            pool.name.clone(),
            now,
        );
        runner.labels = crate::routing::runner_labels(pool, &message.labels);
        runner.ephemeral = pool.ephemeral;
        runner.job_id = Some(message.job_id);
        runner.job_queued_at = Some(message.received_at);
        runner.installation_id = message.installation_id;
        runner.owner = message.owner.clone();
        runner.repo = (self.config.github.scope == Scope::Repo).then(|| message.repo.clone());
        runner.reason = Some(format!("job {} queued", message.job_id));
        if self.is_rerun(message, pool).await {
            // Never on spot again: the record names its market before the launch.
            runner.market = Some(Market::OnDemand);
            runner.reason = Some(format!(
                "job {} queued: the re-run of a job a spot interruption failed, on on-demand",
                message.job_id
            ));
        }
        runner.history = vec![HistoryEntry::status(
            now,
            InstanceStatus::PendingCreate,
            runner.reason.clone(),
        )];
        let mut tries = 0;
        let turn = self.claim_turn.lock().await;
        let claim = loop {
            tries += 1;
            match self
                .store
                .claim_job(message.job_id, &runner, pool.runner_cap())
                .await
            {
                Err(StoreError::Conflict(_)) if tries < CLAIM_TRIES => {
                    tokio::time::sleep(claim_wait(tries, self.jitter.unit())).await;
                }
                Err(StoreError::Conflict(what)) => {
                    warn!(job_id = message.job_id, pool = %pool.name, tries, conflict = %what, "claim kept losing races on the pool; job goes back in line");
                    return Ok(Reservation::Contended);
                }
                other => break other?,
            }
        };
        drop(turn);
        Ok(match claim {
            Claim::Claimed => {
                info!(job_id = message.job_id, runner = %runner.name, pool = %pool.name, "runner reserved");
                Reservation::Runner(runner.name)
            }
            Claim::AlreadyClaimed { runner_name } => Reservation::Runner(runner_name),
            Claim::NotQueued(_) => Reservation::NotQueued,
            Claim::PoolFull => Reservation::PoolFull,
        })
    }

    /// The claim kept losing races on the pool item: the job goes back in line as a
    /// fresh message, soon, so a burst's conflicts never dead-letter it.
    pub(super) async fn retry_contended(
        &self,
        message: &QueueMessage,
    ) -> Result<Step, ScalerError> {
        let delay = CONTENDED_RETRY.mul_f64(1.0 + self.jitter.unit());
        self.send_back(message, delay).await?;
        Ok(Step::Done(Handled::Deferred))
    }
}

/// How long to wait after the `tries`-th claim lost a race: at random below a bound that
/// doubles from [`CLAIM_FIRST_WAIT`] and stops at [`CLAIM_MAX_WAIT`]; `unit` is a draw
/// in `[0, 1)`.
pub(super) fn claim_wait(tries: u32, unit: f64) -> Duration {
    let bound = CLAIM_FIRST_WAIT
        .saturating_mul(1 << tries.saturating_sub(1).min(10))
        .min(CLAIM_MAX_WAIT);
    bound.mul_f64(unit)
}

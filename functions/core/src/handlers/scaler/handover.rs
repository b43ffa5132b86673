//! Hand-over: GitHub gave a runner another job than the one it was launched for. The
//! job it was launched for, if still queued, goes to the runner launched for the job it
//! took (following the chain of taken jobs), in one transaction with the taker's binding,
//! or is queued again for a runner of its own.

use super::{Scaler, ScalerError};
use crate::clock::Clock;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::message::QueueMessage;
use crate::model::JobRecord;
use crate::ports::*;
use tracing::info;

/// How far a hand-over follows a chain of taken jobs (runner A took B's job, B took C's,
/// ...) to the runner at its end that no job waits for.
const HANDOVER_HOPS: usize = 16;

/// Why a job whose runner took another job is queued again (see [`QueueMessage::queued_again`]).
pub(super) const REHOME: &str = "rehome";

/// What became of one hand-over attempt.
enum HandOver {
    Done,
    /// Not to this runner (gone, claimed again, labels that do not cover the job).
    Refused,
    /// This runner ran, runs or was handed job `.0`, not the one it was launched for: the
    /// runner launched for job `.0` may be the free one.
    TookAnother(u64),
    /// A record changed between the read and the transaction: read it again.
    Changed,
}

impl Scaler {
    /// GitHub gave runner `taker`, launched for job `orphaned`, another job (the one in
    /// `message`), as it may: any matching idle runner takes any queued job. If the
    /// orphaned job is still queued it needs a runner: the one the taken job had claimed,
    /// if that one is still free; if that one took a job in turn, the one that job had
    /// claimed, and so on along the chain ([`HANDOVER_HOPS`] at most); or else a new one,
    /// through a fresh `queued` message. The taker is bound to the job it took (its
    /// update, `taker.1`) in the same transaction that moves the orphaned job's claim.
    pub(super) async fn rehome(
        &self,
        orphaned: u64,
        taker: (String, RunnerUpdate),
        taken_job_runner: Option<&str>,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<(), ScalerError> {
        let job = match self.store.get_job(orphaned).await? {
            Some(job) if job.waits_for(&taker.0) => job,
            _ => return self.bind(&taker.0, &taker.1, clock).await,
        };
        let mut candidate = taken_job_runner.map(str::to_owned);
        let mut taken = message.job_id;
        let mut seen = vec![taker.0.clone()];
        for _ in 0..HANDOVER_HOPS {
            let Some(free) = candidate.take().filter(|c| !seen.contains(c)) else {
                break;
            };
            match self.hand_over(&job, &taker, &free, taken, clock).await? {
                HandOver::Done => return Ok(()),
                HandOver::Refused => break,
                HandOver::Changed => {
                    // The taker's record changed: the caller reads it again.
                    let current = self.store.get_runner(&taker.0).await?;
                    if current.map(|r| r.updated_at) != taker.1.unchanged_since {
                        return Err(StoreError::Conflict(format!("runner {}", taker.0)).into());
                    }
                    candidate = Some(free);
                }
                HandOver::TookAnother(next) => {
                    // `free` runs job `next`: the runner launched for `next` may be free.
                    candidate = self
                        .store
                        .get_job(next)
                        .await?
                        .and_then(|next_job| next_job.launched_runner);
                    taken = next;
                    seen.push(free);
                }
            }
        }
        let dropped = ClaimHandOver {
            job_id: orphaned,
            taker: taker.clone(),
            to: None,
        };
        if !self.store.hand_over_claim(&dropped, clock.now()).await? {
            // The claim moved on meanwhile: only the binding is left to write.
            return self.bind(&taker.0, &taker.1, clock).await;
        }
        self.queue
            .send(&QueueMessage::queued_again(&job, REHOME))
            .await
            .map_err(ScalerError::Requeue)?;
        info!(job_id = orphaned, taken_by = %taker.0, "runner took another job; its own job queued again");
        Ok(())
    }

    /// Hands queued `job` (whose runner, the taker, took another) to runner `free`, whose
    /// own job `taken` was taken by another runner: only if `free` is still free, on its
    /// way (being created, booting, or idle) and its labels cover all of the job's (GitHub
    /// gives a job only to such a runner). One transaction names the job on `free`'s
    /// record, binds the taker to the job it took and passes the claim, each conditional
    /// on the record read, so no crash leaves two records naming the job. A record still
    /// in creation is resumed at once through a fresh `queued` message for the job (the
    /// delivery that was creating it may have died, and its own job's deliveries now find
    /// that job taken).
    async fn hand_over(
        &self,
        job: &JobRecord,
        taker: &(String, RunnerUpdate),
        free: &str,
        taken: u64,
        clock: &Clock,
    ) -> Result<HandOver, ScalerError> {
        let Some(runner) = self.store.get_runner(free).await? else {
            return Ok(HandOver::Refused);
        };
        let on_its_way = matches!(
            runner.status,
            InstanceStatus::PendingCreate | InstanceStatus::Creating | InstanceStatus::Running
        );
        // Already given this job by a hand-over of two writes (before the three became
        // one transaction) that stopped before the claim passed: that hand-over is
        // finished, not undone, or the job would get a second runner while this one
        // keeps it.
        let resumed = runner.job_id == Some(job.job_id);
        // It ran, or runs, another job (or was handed one): the runner launched for that
        // job is the next link.
        if let Some(other) = runner.job_id.filter(|&id| id != taken && !resumed) {
            return Ok(HandOver::TookAnother(other));
        }
        let still_free = (runner.job_id == Some(taken) || resumed)
            && runner.runner_status != RunnerStatus::Active
            && on_its_way;
        if !still_free || !crate::routing::runner_takes(&runner.labels, &job.labels) {
            return Ok(HandOver::Refused);
        }
        let given = RunnerUpdate {
            job_id: Some(job.job_id),
            note: Some(format!(
                "job {taken} was taken by another runner; now for job {}",
                job.job_id
            )),
            unchanged_since: Some(runner.updated_at),
            ..RunnerUpdate::default()
        };
        let hand_over = ClaimHandOver {
            job_id: job.job_id,
            taker: taker.clone(),
            to: Some((free.to_owned(), given)),
        };
        match self.store.hand_over_claim(&hand_over, clock.now()).await {
            Ok(true) => {}
            // The job was claimed or bound elsewhere meanwhile: nothing was written.
            Ok(false) | Err(StoreError::NotFound(_)) => return Ok(HandOver::Refused),
            Err(StoreError::Conflict(_)) => return Ok(HandOver::Changed),
            Err(err) => return Err(err.into()),
        }
        info!(job_id = job.job_id, runner = %free, taken_by = %taker.0, "queued job handed to the runner of the job its runner took");
        if matches!(
            runner.status,
            InstanceStatus::PendingCreate | InstanceStatus::Creating
        ) {
            self.queue
                .send(&QueueMessage::queued_again(job, "handover"))
                .await
                .map_err(ScalerError::Requeue)?;
        }
        Ok(HandOver::Done)
    }
}

//! Wait: a job that cannot have its runner now goes back to the queue as a fresh,
//! delayed message (so waiting never counts against its receives): a full pool, a
//! registration turn not yet due, or another delivery holding the runner's creation
//! lease.

use super::{Handled, Scaler, ScalerError, Step};
use crate::clock::Clock;
use crate::message::QueueMessage;
use crate::metrics::{Dimension, Metric};
use crate::model::{JobRecord, JobStatus};
use std::time::Duration;
use tracing::info;

/// How long a job waits before trying a full pool again, by default.
pub const CAPACITY_RETRY: Duration = Duration::from_secs(15);

/// How long a queued job may wait in an invocation for its registration's turn (see
/// [`RegistrationPace`](crate::pace::RegistrationPace)); a job whose turn is further off goes back to the queue.
pub const PACE_WAIT: Duration = Duration::from_secs(10);

/// The longest delay SQS allows on a message.
pub(super) const MAX_QUEUE_DELAY: Duration = Duration::from_secs(15 * 60);

impl Scaler {
    /// Another delivery of this job holds the runner's creation lease: this one comes
    /// back as a fresh message once the lease is over (by then the runner is up, or the
    /// other delivery died and this one resumes its work), so it is never dead-lettered
    /// for waiting.
    pub(super) async fn wait_for_other(
        &self,
        message: &QueueMessage,
        left: Duration,
    ) -> Result<Step, ScalerError> {
        let delay = left + Duration::from_secs(1);
        self.send_back(message, delay).await?;
        info!(job_id = message.job_id, retry_in = ?delay, "runner being created by another delivery; checking again later");
        Ok(Step::Done(Handled::Deferred))
    }

    /// The pool is full: a job the table knows is over is done with, any other goes back
    /// in line. A pool can stay full for good (its `min_idle` warm runners hold every
    /// slot, and one is replaced as soon as it takes a job and goes), and its runners
    /// take jobs whose `queued` never got a slot: without this read such a message would
    /// come back for ever. A job never seen is recorded first, so that if its `completed`
    /// is lost the reaper's lost-job rule can find it over on GitHub.
    pub(super) async fn defer_unless_over(
        &self,
        message: &QueueMessage,
        clock: &Clock,
    ) -> Result<Step, ScalerError> {
        let job = match self.store.get_job(message.job_id).await? {
            Some(job) => job,
            None => {
                let seen = JobRecord::from_message(message, JobStatus::Queued, clock.now());
                self.store.record_job(&seen).await?
            }
        };
        if job.status != JobStatus::Queued {
            return Ok(Step::Done(Handled::NothingToDo));
        }
        // Its runner already holds a slot (a creation to resume, a job handed over).
        if let Some(runner_name) = &job.runner_name {
            return self.resume_claimed(runner_name, message, clock).await;
        }
        self.defer(message).await
    }

    /// With a registration pace: waits for this job's turn when it is near, or sends the
    /// job back to the queue, to come back when its turn is due (`Some` step then).
    pub(super) async fn wait_for_registration(
        &self,
        message: &QueueMessage,
    ) -> Result<Option<Step>, ScalerError> {
        let Some(pace) = &self.pace else {
            return Ok(None);
        };
        match pace.take(PACE_WAIT) {
            Ok(wait) => {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                Ok(None)
            }
            Err(wait) => {
                let delay = spread(wait, self.jitter.unit()).min(MAX_QUEUE_DELAY);
                self.send_back(message, delay).await?;
                info!(job_id = message.job_id, retry_in = ?delay, "registrations paced; job waits for its turn");
                Ok(Some(Step::Done(Handled::Deferred)))
            }
        }
    }

    /// EC2 throttled the launch of the job's runner (its record failed, its job
    /// unclaimed): the job goes back in line like one of a full pool, so that EC2's
    /// launch bucket (1,000 instances, refilled 2 a second) never dead-letters it, and
    /// the registration its turn took goes to the next job.
    pub(super) async fn after_throttled_launch(
        &self,
        message: &QueueMessage,
        runner: &str,
    ) -> Result<Handled, ScalerError> {
        if let Some(pace) = &self.pace {
            pace.give_back();
        }
        let delay = spread(self.capacity_retry, self.jitter.unit());
        self.send_back(message, delay).await?;
        info!(job_id = message.job_id, runner, retry_in = ?delay, "instance launch throttled; job waits in line");
        Ok(Handled::Deferred)
    }

    /// The job goes back to the queue as a fresh message, due after `delay`.
    pub(super) async fn send_back(
        &self,
        message: &QueueMessage,
        delay: Duration,
    ) -> Result<(), ScalerError> {
        self.queue
            .send_after(message, delay)
            .await
            .map_err(ScalerError::Requeue)
    }

    /// The pool is full: the job goes back in line as a fresh, delayed message.
    pub(super) async fn defer(&self, message: &QueueMessage) -> Result<Step, ScalerError> {
        let delay = spread(self.capacity_retry, self.jitter.unit());
        self.send_back(message, delay).await?;
        self.metrics.record(
            Metric::CapacityDeferrals,
            &[(Dimension::Pool, message.pool.as_str())],
            1.0,
        );
        info!(job_id = message.job_id, pool = %message.pool, retry_in = ?delay, "pool at max_runners; job waits");
        Ok(Step::Done(Handled::Deferred))
    }
}

/// `base`, up to half as long again at random: jobs sent back together (a burst) come
/// back spread out instead of all at once; `unit` is a draw in `[0, 1)`.
pub(super) fn spread(base: Duration, unit: f64) -> Duration {
    base.mul_f64(1.0 + unit / 2.0)
}

//! The scaler handler: one runner per queued job, never above a pool's `max_runners`.
//!
//! A batch ([`batch`]) goes through its phases: **prepare** each message on its own
//! ([`prepare`]: the job item recorded, idempotent); **claim** ([`claim`]: one
//! transaction claims the job, writes the runner record and takes a pool slot), or
//! **wait** ([`wait`]: a full pool, a registration turn not yet due, or another delivery
//! creating the runner send the job back to the queue as a fresh delayed message, so
//! waiting never dead-letters it); **launch** ([`launch`]: one EC2 request for the runners
//! of a pool, spot first when asked, on-demand for what spot could not give);
//! **register** each runner on its own ([`register`]: GitHub registration, JIT config into
//! the instance's JIT item, `running`). Later webhooks **bind** the runner to the job it
//! runs and send it to be reaped when the job completes ([`bind`]); when GitHub gave the
//! runner another job than the one it was launched for, the **hand-over** ([`handover`])
//! gives that job to the runner launched for the job taken, in one transaction with the
//! binding, or queues it again.
//!
//! | message | phases |
//! |---|---|
//! | `queued` | prepare, claim or wait, launch, register (a retry resumes at its record) |
//! | `in_progress` | prepare, bind; hand-over if the runner was launched for another job |
//! | `completed` | prepare, bind if `in_progress` was missed (with its hand-over); reaped or idle |
//! | `warm` (reaper) | prepare (record and slot reserved by the reaper), launch, register |
//!
//! The record is written before anything exists outside the table, and each step is
//! written back to it, so a retried message resumes where the last try stopped and every
//! crash leaves a record the reaper can clean from. A record another delivery is working
//! on (`creating`, touched within [`CREATE_LEASE`]) is left to it.

mod assembly;
mod batch;
mod bind;
mod claim;
mod handover;
mod jitter;
mod launch;
mod prepare;
mod refill;
mod register;
mod rerun;
mod take;
mod wait;
pub use assembly::{ScalerCapabilities, ScalerPorts};
pub use jitter::{Jitter, ThreadJitter};
pub use launch::fleet_request;
pub(crate) use take::serves;
pub use wait::{CAPACITY_RETRY, PACE_WAIT};

use crate::clock::Clock;
use crate::config::{Config, PoolConfig};
use crate::handlers::error_chain;
use crate::message::{MessageError, QueueMessage};
use crate::metrics::Metrics;
use crate::model::RunnerRecord;
use crate::pace::RegistrationPace;
use crate::ports::*;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tracing::warn;

#[cfg(doc)]
use crate::lifecycle::CREATE_LEASE;

/// Why a message could not be handled; the message is then retried by the queue.
#[derive(Debug, thiserror::Error)]
pub enum ScalerError {
    #[error(transparent)]
    Message(#[from] MessageError),
    #[error("pool {0} is not in the configuration")]
    UnknownPool(String),
    #[error("creating runner {runner} failed")]
    Creation {
        runner: String,
        #[source]
        cause: Cause,
    },
    #[error("asking GitHub whether job {job_id} is still queued failed")]
    JobLookup {
        job_id: u64,
        #[source]
        cause: ForgeError,
    },
    #[error("re-queueing a job that waits for capacity failed")]
    Requeue(#[source] QueueError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("handling the message panicked")]
    Panicked,
    /// EC2 throttled the launch of the runner's instance; its record is failed and its
    /// job unclaimed, and the batch sends the job back to the queue.
    #[error("EC2 throttled the launch of runner {runner}")]
    LaunchThrottled {
        runner: String,
        #[source]
        cause: Cause,
    },
}

/// What handling a message did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// A runner is up for the job (launched now, or by an earlier delivery).
    RunnerUp(String),
    /// The job went back to the queue, delayed (a full pool, its registration's turn,
    /// a throttled launch).
    Deferred,
    /// The job needed nothing (already running or finished, or not ours).
    NothingToDo,
    /// The runner was bound to its job.
    Bound,
    /// A static runner's job completed: the runner was set idle, for its next job.
    Idle,
    /// The runner was sent to be reaped.
    Released,
}

/// One queue message of a batch.
#[derive(Debug, Clone)]
pub struct BatchItem {
    pub message_id: String,
    pub body: String,
}

/// Where a message stands after the prepare phase.
enum Step {
    Done(Handled),
    /// The runner (in `creating`) needs an instance.
    Launch(RunnerRecord),
    /// The runner (in `creating`) has its instance; register it and hand over its config.
    Finish(RunnerRecord),
}

type Outcome = Result<Handled, ScalerError>;

/// Creates runners for queued jobs and follows them through their job.
pub struct Scaler {
    config: Arc<Config>,
    store: Arc<dyn RunnerStore>,
    launcher: Arc<dyn Launcher>,
    forge: Arc<dyn Forge>,
    jit_store: Arc<dyn JitConfigStore>,
    queue: Arc<dyn JobQueue>,
    capacity_retry: Duration,
    pace: Option<Arc<RegistrationPace>>,
    jitter: Arc<dyn Jitter>,
    /// Held while claiming: the claims of one batch take the pool item one after
    /// another, instead of all at once to conflict with each other.
    claim_turn: tokio::sync::Mutex<()>,
    metrics: Metrics,
    /// Each pool's spot circuit breaker (none: spot is never paused).
    breakers: Option<Arc<dyn crate::ports::SpotBreakerStore>>,
    /// The wanted re-runs of interrupted jobs (none: no job is re-run).
    reruns: Option<Arc<dyn crate::ports::RerunStore>>,
}

impl Scaler {
    /// Handles a batch; a bad body or a panic fails that message only. Returns the ids
    /// of the messages that failed (to be retried by the queue).
    pub async fn handle_batch(
        self: &Arc<Self>,
        items: Vec<BatchItem>,
        now: OffsetDateTime,
    ) -> Vec<String> {
        let mut decoded = Vec::new();
        let mut failed = Vec::new();
        for item in items {
            match QueueMessage::decode(&item.body) {
                Ok(message) => decoded.push((item.message_id, message)),
                Err(err) => {
                    warn!(message_id = %item.message_id, error = %err, "unreadable message; it will be retried, then dead-lettered");
                    failed.push(item.message_id);
                }
            }
        }
        for (message_id, outcome) in self.process(decoded, Clock::starting_at(now)).await {
            if let Err(err) = outcome {
                warn!(%message_id, error = %error_chain(&err), "message failed; it will be retried");
                failed.push(message_id);
            }
        }
        self.metrics.flush();
        failed
    }

    /// Handles one message, through the same phases as a batch.
    pub async fn handle(self: &Arc<Self>, message: &QueueMessage, now: OffsetDateTime) -> Outcome {
        let mut outcomes = self
            .process(
                vec![(String::new(), message.clone())],
                Clock::starting_at(now),
            )
            .await;
        outcomes
            .pop()
            .map_or(Err(ScalerError::Panicked), |(_, outcome)| outcome)
    }

    pub(super) fn pool(&self, name: &str) -> Result<&PoolConfig, ScalerError> {
        self.config
            .pool(name)
            .ok_or_else(|| ScalerError::UnknownPool(name.to_owned()))
    }
}

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod bind_tests;
#[cfg(test)]
mod claim_order_tests;
#[cfg(test)]
mod claim_tests;
#[cfg(test)]
mod handover_crash_tests;
#[cfg(test)]
mod handover_tests;
#[cfg(test)]
mod launch_tests;
#[cfg(test)]
mod prepare_tests;
#[cfg(test)]
mod register_tests;
#[cfg(test)]
mod sized_launch_tests;
#[cfg(test)]
mod stamps_tests;
#[cfg(test)]
mod take_tests;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod wait_tests;

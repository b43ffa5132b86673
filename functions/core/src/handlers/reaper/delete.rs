//! Deletion, graceful and forced: GitHub's DELETE first (422 = busy: the record goes back
//! to `pending_delete` and the instance is kept, with no time limit), then the instance,
//! then the JIT config, then `deleted` with the slot given back. Provider errors back off
//! exponentially; forced deletion logs and ignores them and finishes in one pass. A
//! DELETE GitHub throttles waits for GitHub's wait (the bucket's reset), and the run
//! starts no other deletion: each would spend a call of the installation's `core`
//! budget on a refusal, budget the scaler's job lookups need.
//!
//! The last write keeps two stamps of the job's timeline that only the deletion learns,
//! at no extra call: EC2's launch time from the reaper's describes, and when the instance
//! read its JIT config, which the delete of its item (a tombstone by then) returns.

use super::{Reaper, ReaperReport, Snapshot, PARALLEL_DELETES};
use crate::backoff;
use crate::clock::Clock;
use crate::handlers::error_chain;
use crate::lifecycle::InstanceStatus;
use crate::metrics::{Dimension, Metric, Metrics};
use crate::model::scope_of;
use crate::model::RunnerRecord;
use crate::ports::*;
use crate::prices::JobCost;
use std::collections::{HashMap, HashSet};
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// Tries of the transaction that finishes a deletion, when it meets concurrent writes.
const FINISH_TRIES: u64 = 5;

/// How one deletion attempt ended.
pub(super) enum Outcome {
    Deleted,
    Busy,
    BackedOff,
    /// Backed off because GitHub throttled the DELETE.
    Throttled,
    Skipped,
}

/// EC2's launch time of instances, by instance id.
pub(super) type LaunchTimes = HashMap<String, OffsetDateTime>;

impl Reaper {
    /// The launch times this reaper has seen for the instances of live records: this
    /// run's describe, and earlier runs' for instances gone from it since (a runner's
    /// host powers off when its job ends, and its instance terminates before the record
    /// is deleted). EC2's `LaunchTime` is when the instance was launched, i.e. entered
    /// `pending`: <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Instance.html>.
    /// Kept in memory only: a fresh process knows only what its own describes saw.
    pub(super) fn remember_launch_times(
        &self,
        snapshot: &Snapshot,
        instances: Option<&[Instance]>,
    ) -> LaunchTimes {
        let claimed: HashSet<&str> = snapshot
            .runners
            .iter()
            .filter_map(|r| r.instance_id.as_deref())
            .collect();
        let mut memory = self.memory();
        memory
            .launch_times
            .retain(|id, _| claimed.contains(id.as_str()));
        for instance in instances.unwrap_or_default() {
            if let Some(at) = instance.launched_at {
                memory.launch_times.insert(instance.id.clone(), at);
            }
        }
        memory.launch_times.clone()
    }
}

impl Reaper {
    /// Deletes the due `pending_force_delete` records, then the due `pending_delete` ones
    /// (with those a rule has just sent there), a few at a time, until the deadline.
    pub(super) async fn delete_due(
        &self,
        snapshot: &Snapshot,
        marked: Vec<RunnerRecord>,
        launched: &LaunchTimes,
        now: OffsetDateTime,
        deadline: Instant,
        report: &mut ReaperReport,
    ) {
        let due = |status: InstanceStatus| {
            snapshot
                .runners
                .iter()
                .filter(move |r| r.status == status && r.next_attempt_at <= now)
                .cloned()
        };
        let mut seen = HashSet::new();
        let queue: Vec<RunnerRecord> = due(InstanceStatus::PendingForceDelete)
            .chain(due(InstanceStatus::PendingDelete))
            .chain(marked)
            .filter(|r| seen.insert(r.name.clone()))
            .collect();
        let mut records = queue.into_iter();
        let mut deleting = tokio::task::JoinSet::new();
        let mut throttled = false;
        loop {
            while !throttled && deleting.len() < PARALLEL_DELETES {
                let Some(record) = records.next() else { break };
                if Instant::now() >= deadline {
                    report.left_for_next_run = true;
                    break;
                }
                let reaper = self.clone();
                let launched_at = record
                    .instance_id
                    .as_ref()
                    .and_then(|id| launched.get(id).copied());
                deleting.spawn(async move {
                    let clock = Clock::starting_at(now);
                    reaper.delete(record, launched_at, &clock).await
                });
            }
            let Some(joined) = deleting.join_next().await else {
                break;
            };
            match joined {
                Ok(Ok(Outcome::Deleted)) => report.deleted += 1,
                Ok(Ok(Outcome::Busy)) => report.busy += 1,
                Ok(Ok(Outcome::BackedOff)) => report.backed_off += 1,
                Ok(Ok(Outcome::Throttled)) => {
                    report.backed_off += 1;
                    if !throttled && !records.as_slice().is_empty() {
                        report.left_for_next_run = true;
                    }
                    throttled = true;
                }
                Ok(Ok(Outcome::Skipped)) => {}
                Ok(Err(err)) => {
                    warn!(error = %error_chain(&err), "deletion step failed; next run retries it")
                }
                Err(join_error) => {
                    warn!(%join_error, "deletion task failed; next run retries it")
                }
            }
        }
    }

    /// Deletes `record`'s runner, instance and JIT item; `launched_at` is EC2's launch
    /// time of its instance, if a describe saw it.
    async fn delete(
        &self,
        record: RunnerRecord,
        launched_at: Option<OffsetDateTime>,
        clock: &Clock,
    ) -> Result<Outcome, StoreError> {
        let force = record.status == InstanceStatus::PendingForceDelete;
        let mut to_deleting = Transition::new(record.status, InstanceStatus::Deleting, clock.now());
        to_deleting.reason = record.reason.clone();
        let runner = match self.store.transition(&record.name, &to_deleting).await {
            Ok(runner) => runner,
            // Another reaper (or the operator) moved it first.
            Err(StoreError::TransitionRefused { .. }) => return Ok(Outcome::Skipped),
            Err(err) => return Err(err),
        };
        let name = runner.name.as_str();
        match self.remove_from_github(&runner).await {
            Ok(RunnerRemoval::Removed | RunnerRemoval::NotFound) => {}
            Ok(RunnerRemoval::Busy) if force => {
                warn!(runner = %name, "forced delete of a runner that is running a job");
            }
            Ok(RunnerRemoval::Busy) => return self.put_off_busy(&runner, clock.now()).await,
            Err(err) if force => {
                warn!(runner = %name, error = %error_chain(&err), "GitHub removal failed; ignored (force)")
            }
            Err(err) => {
                let at_least = match err {
                    ForgeError::Throttled { retry_after } => Some(retry_after.unwrap_or_default()),
                    _ => None,
                };
                let outcome = self.back_off(&runner, &err, clock.now(), at_least).await?;
                return Ok(if at_least.is_some() {
                    Outcome::Throttled
                } else {
                    outcome
                });
            }
        }
        let mut host = HostStamps {
            instance_launched_at: launched_at,
            ..HostStamps::default()
        };
        if let Some(instance_id) = &runner.instance_id {
            if let Err(err) = self.fleet.terminate(instance_id).await {
                if !force {
                    return self.back_off(&runner, &err, clock.now(), None).await;
                }
                warn!(runner = %name, %instance_id, error = %error_chain(&err), "terminate failed; ignored (force)");
            }
            match self.jit_store.delete(instance_id).await {
                Ok(tombstone) => {
                    host.jit_read_at = tombstone.read_at;
                    host.runner = tombstone.runner;
                }
                Err(err) if !force => return self.back_off(&runner, &err, clock.now(), None).await,
                Err(err) => {
                    warn!(runner = %name, %instance_id, error = %error_chain(&err), "JIT config delete failed; ignored (force)")
                }
            }
        }
        let at = clock.now();
        let cost = self.job_cost(&runner, at).await;
        self.finish(name, at, &host, cost.as_ref()).await?;
        if let Some(cost) = &cost {
            self.record_cost(cost);
        }
        let by_pool = [(Dimension::Pool, runner.pool.as_str())];
        if let Some(boot) = host_boot(&host) {
            self.metrics
                .record_duration(Metric::HostBootSeconds, &by_pool, boot);
        }
        record_image_freshness(&self.metrics, &runner.pool, &host.runner);
        let mode = if force { "forced" } else { "graceful" };
        self.metrics.record(
            Metric::RunnersDeleted,
            &[
                (Dimension::Pool, runner.pool.as_str()),
                (Dimension::Mode, mode),
            ],
            1.0,
        );
        info!(runner = %name, pool = %runner.pool, force, instance_id = runner.instance_id.as_deref(), "runner deleted");
        Ok(Outcome::Deleted)
    }

    /// `deleting` → `deleted`, the slot given back. The transaction writes the pool item,
    /// which a burst's claims write many times a second, so it may meet a concurrent
    /// write: it is tried again at once rather than left `deleting` for
    /// `stuck_deleting`, which would send the whole deletion (a GitHub DELETE among it)
    /// again.
    async fn finish(
        &self,
        name: &str,
        at: OffsetDateTime,
        host: &HostStamps,
        cost: Option<&JobCost>,
    ) -> Result<(), StoreError> {
        let ttl = at + self.config.reaper.deleted_ttl;
        let mut tries = 0;
        loop {
            tries += 1;
            match self.store.finish_deletion(name, at, ttl, host, cost).await {
                Err(StoreError::Conflict(_)) if tries < FINISH_TRIES => {
                    tokio::time::sleep(std::time::Duration::from_millis(20 * tries)).await;
                }
                other => return other,
            }
        }
    }

    /// Removes the runner from GitHub. A record without a GitHub id may still have been
    /// registered (a crash between the registration and the write of its id): if it
    /// ever had an instance, the registration is looked up by name.
    async fn remove_from_github(&self, runner: &RunnerRecord) -> Result<RunnerRemoval, ForgeError> {
        let scope = scope_of(runner);
        let runner_id = match runner.github_runner_id {
            Some(id) => id,
            None if runner.instance_id.is_some() => {
                match self.forge.find_runner(&scope, &runner.name).await? {
                    Some(found) => {
                        info!(runner = %runner.name, runner_id = found.id, "registration without a recorded id found by name");
                        found.id
                    }
                    None => return Ok(RunnerRemoval::NotFound),
                }
            }
            None => return Ok(RunnerRemoval::NotFound),
        };
        self.forge.remove_runner(&scope, runner_id).await
    }

    /// GitHub refused the removal: a job is running. Keep everything; look again next run.
    async fn put_off_busy(
        &self,
        runner: &RunnerRecord,
        now: OffsetDateTime,
    ) -> Result<Outcome, StoreError> {
        let back = Transition::new(InstanceStatus::Deleting, InstanceStatus::PendingDelete, now)
            .because("busy");
        self.store.transition(&runner.name, &back).await?;
        self.metrics.record(
            Metric::BusyDeferrals,
            &[(Dimension::Pool, runner.pool.as_str())],
            1.0,
        );
        info!(runner = %runner.name, job_id = runner.job_id, "runner is running a job; deletion put off");
        Ok(Outcome::Busy)
    }

    /// A provider error: back to `pending_delete`, due again after an exponential delay,
    /// or after the provider's own wait (`at_least`) when that is longer.
    async fn back_off(
        &self,
        runner: &RunnerRecord,
        err: &(dyn std::error::Error + Send + Sync + 'static),
        now: OffsetDateTime,
        at_least: Option<std::time::Duration>,
    ) -> Result<Outcome, StoreError> {
        let attempts = runner.attempts + 1;
        let delay = backoff::delay_after(attempts).max(at_least.unwrap_or_default());
        let mut back =
            Transition::new(InstanceStatus::Deleting, InstanceStatus::PendingDelete, now)
                .because("retrying after error");
        back.attempts = Some(attempts);
        back.error = Some(error_chain(err));
        back.next_attempt_at = now + delay;
        self.store.transition(&runner.name, &back).await?;
        warn!(runner = %runner.name, attempts, retry_in = ?delay, error = %error_chain(err), "deletion failed; backing off");
        Ok(Outcome::BackedOff)
    }
}

/// Counts a boot whose host named the runner it ran ([`Metric::RunnerBootsReported`]),
/// and whether its image's baked runner was behind it: by pool
/// ([`Metric::BootsImageBehind`]) and for the deployment ([`Metric::RunnerBootsBehind`],
/// which the stale-image alarm divides by the boots). A stock image (no baked version)
/// counts as a boot that was not behind: it took the newest runner at boot.
pub(crate) fn record_image_freshness(metrics: &Metrics, pool: &str, ran: &HostRunner) {
    if ran.runner_version.is_none() {
        return;
    }
    metrics.record(Metric::RunnerBootsReported, &[], 1.0);
    if ran.image_behind() == Some(true) {
        metrics.record(Metric::BootsImageBehind, &[(Dimension::Pool, pool)], 1.0);
        metrics.record(Metric::RunnerBootsBehind, &[], 1.0);
    }
}

/// The host's boot, EC2's launch time → the instance's JIT read (the OS boot, the
/// bootstrap and, on a stock image, its installs), when the deletion learnt both; both
/// clocks count whole seconds, and a negative span (clocks apart) is no measurement.
fn host_boot(host: &HostStamps) -> Option<time::Duration> {
    let boot = host.jit_read_at? - host.instance_launched_at?;
    (!boot.is_negative()).then_some(boot)
}

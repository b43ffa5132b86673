//! The reaper handler: takes `pending_delete` and `pending_force_delete` records to
//! `deleted`, without ever killing a runner in the middle of a job, and reconciles the
//! table, EC2 and GitHub so that every crash, lost webhook and provider error converges.
//!
//! One run reads the live records once, by status through the status index (never the
//! whole table, so its cost follows the live work and not the history), then:
//! reads the prices that are missing or a day old (`prices`: at most daily, never per
//! job); deletes what is already due (`delete`), pricing each instance in the
//! deletion's own write;
//! watches bootstrapping runners come online; applies the record rules of
//! [`decide::verdicts`] (bootstrap timeout, stuck `deleting`, `error`, instance gone,
//! missed `completed`, idle runners, stalled warm launches), each a move to
//! `pending_delete` — except that a runner which came online while its record still said
//! `creating` is recorded `running` for those rules to take up; deletes what they sent
//! there; tops up the warm pools to `min_idle` (`warm`: it reserves the runners and
//! the scaler creates them); sweeps orphan instances and GitHub runners (`orphans`);
//! queues again the jobs whose launch was lost (`jobs`); asks GitHub to re-run the
//! interrupted jobs whose workflow run completed (`reruns`); and repairs drifted pool
//! counters (`counters`). It starts no new step after its deadline; the rest waits a
//! minute.
//!
//! Every deletion goes through the graceful path: GitHub's DELETE first, which is itself
//! the "is it busy?" check (422), so a busy runner keeps its instance.

mod assembly;
mod counters;
mod decide;
mod delete;
mod failed_events;
mod interruptions;
mod jobs;
mod lease;
mod orphans;
mod prices;
mod reconcile;
mod redeliver;
mod reruns;
mod settle;
mod warm;

pub use assembly::{ReaperCapabilities, ReaperPorts};
pub use decide::{
    Cleanup, COUNTER_SETTLE, FORGOTTEN_GRACE, INSTANCE_GRACE, JOB_CHECKS_PER_RUN,
    JOB_CHECK_INTERVAL, JOB_RECHECK, QUEUED_GRACE, WARM_STALL,
};
pub use failed_events::REFUSED_ASKS;
pub use interruptions::{
    was_interrupted, InstanceEvent, InstanceEventKind, InstanceEventOutcome, INTERRUPTION_NOTE,
    SPOT_INTERRUPTION_WARNING, STATE_CHANGE,
};
pub use lease::{LEASE_MARGIN, REAPER_LEASE};
pub use prices::Pricing;
pub use reruns::Reruns;

use crate::config::Config;
use crate::lifecycle::InstanceStatus;
use crate::metrics::{Dimension, Metric, Metrics};
use crate::model::{JobRecord, JobStatus, RunnerRecord};
use crate::ports::*;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// Records read per live status per run. A status holding more than this makes the
/// snapshot incomplete, and the sweeps that trust it (orphans, counters) wait.
const LIVE_LIMIT: usize = 2000;
/// Deletions under way at once (each is independent and conditional).
const PARALLEL_DELETES: usize = 8;
/// Queued jobs looked at per run.
const JOB_BATCH: usize = 100;
/// How far ahead "every record, due or not" reaches in the status index.
const EVERYTHING_DUE: Duration = Duration::from_secs(366 * 24 * 3600);

/// The statuses of records that still stand for something.
const LIVE: [InstanceStatus; 7] = [
    InstanceStatus::PendingCreate,
    InstanceStatus::Creating,
    InstanceStatus::Running,
    InstanceStatus::Error,
    InstanceStatus::PendingDelete,
    InstanceStatus::PendingForceDelete,
    InstanceStatus::Deleting,
];

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReaperReport {
    /// Runners seen online for the first time.
    pub came_online: usize,
    pub deleted: usize,
    /// Deletions put off because the runner is running a job.
    pub busy: usize,
    /// Deletions put off after a provider error (backing off).
    pub backed_off: usize,
    /// Live records a reconciliation rule sent to `pending_delete`.
    pub sent_to_delete: usize,
    /// Instances and GitHub runners that no live record claimed, removed.
    pub orphans_reaped: usize,
    /// Queued jobs with no runner that were put back in the queue.
    pub requeued: usize,
    /// In-progress job items without a live runner that GitHub showed finished.
    pub jobs_settled: usize,
    /// Failed webhook deliveries GitHub was asked to redeliver.
    pub redelivered: usize,
    /// Pool counters set back to what the live records hold.
    pub counters_repaired: usize,
    /// Warm runners reserved and handed to the scaler to reach `min_idle`.
    pub warm_requested: usize,
    /// Prices read from the providers' price lists (at most daily per type and market).
    pub prices_read: usize,
    /// Interrupted jobs GitHub was asked to re-run.
    pub reruns_asked: usize,
    /// Work left for the next run because the deadline came.
    pub left_for_next_run: bool,
    /// Another run held the reaper lease, so this one did nothing.
    pub another_run_held_the_lease: bool,
}

/// What the live part of the table looked like at the start of a run.
struct Snapshot {
    runners: Vec<RunnerRecord>,
    queued_jobs: Vec<JobRecord>,
    /// False when a status held more than [`LIVE_LIMIT`] records.
    complete: bool,
}

/// What one run remembers for the next: suspects are acted on only when seen twice, so
/// a record caught between two partitions of the status index (it is read one status at
/// a time, and the index lags) is never taken for missing.
#[derive(Debug, Default)]
struct Memory {
    orphan_instances: HashSet<String>,
    drift: HashMap<String, (PoolCounter, u32)>,
    /// Where runners were seen registered, for the GitHub orphan sweep.
    scopes: HashSet<RunnerScope>,
    /// Where the redelivery sweep stopped, and what it asked.
    sweep: redeliver::SweepMark,
    /// The cached prices, once read from the table.
    prices: Option<Vec<crate::prices::Price>>,
    /// When reading a price last failed: no read until [`crate::prices::PRICE_RETRY`]
    /// has passed.
    price_failure: Option<OffsetDateTime>,
    /// EC2's launch times of the live records' instances, as describes saw them.
    launch_times: delete::LaunchTimes,
}

/// Deletes what was asked to be deleted, and reconciles the three views of the world.
#[derive(Clone)]
pub struct Reaper {
    config: Arc<Config>,
    store: Arc<dyn RunnerStore>,
    fleet: Arc<dyn Fleet>,
    forge: Arc<dyn Forge>,
    jit_store: Arc<dyn JitConfigStore>,
    queue: Arc<dyn JobQueue>,
    /// The App's webhook deliveries, for the redelivery sweep (none: no sweep).
    deliveries: Option<Arc<dyn HookDeliveries>>,
    metrics: Metrics,
    memory: Arc<Mutex<Memory>>,
    lease: Option<Arc<dyn crate::lease::Leases>>,
    /// Where spot interruptions are counted per pool (none: no circuit breaker).
    breakers: Option<Arc<dyn crate::breaker::SpotBreakerStore>>,
    /// Where prices are cached and read (none: jobs are not priced).
    pricing: Option<Pricing>,
    /// The wanted re-runs of interrupted jobs, and GitHub's runs (none: no re-run).
    reruns: Option<Reruns>,
}

impl Reaper {
    /// One run at `now`; starts no new work after `deadline`.
    pub async fn run(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<ReaperReport, StoreError> {
        match &self.lease {
            Some(leases) => self.run_leased(leases.as_ref(), now, deadline).await,
            None => self.run_unleased(now, deadline).await,
        }
    }

    async fn run_unleased(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<ReaperReport, StoreError> {
        let mut report = ReaperReport::default();
        let result = self.run_steps(now, deadline, &mut report).await;
        self.metrics.flush();
        result.map(|()| report)
    }

    async fn run_steps(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
        report: &mut ReaperReport,
    ) -> Result<(), StoreError> {
        // The deletions stamp the moment they happen, not the run's start: the describe
        // and the rules before them take a while.
        let clock = crate::clock::Clock::starting_at(now);
        let snapshot = self.read_snapshot(now).await?;
        self.remember_scopes(&snapshot);
        self.record_gauges(&snapshot);
        // Prices before the deletions that are priced from them: once warm, this makes no
        // call at all, and at most a few reads a day.
        report.prices_read = self.refresh_prices(&snapshot, now, deadline).await;
        // The run's one describe, before the deletions: they keep each instance's EC2
        // launch time on its record (the timeline's "instance launched"), which no other
        // answer carries, and the instance rules below read the same list.
        let instances = match self.fleet.describe_live().await {
            Ok(instances) => Some(instances),
            Err(err) => {
                tracing::warn!(error = %crate::handlers::error_chain(&err), "cannot list instances; instance rules wait");
                None
            }
        };
        let launched = self.remember_launch_times(&snapshot, instances.as_deref());
        // Capacity first: what is already due for deletion holds slots that queued jobs
        // wait for, so it goes before the rules (which may be slow when the providers are).
        self.delete_due(
            &snapshot,
            Vec::new(),
            &launched,
            clock.now(),
            deadline,
            report,
        )
        .await;
        let seen_online = self.watch_bootstrapping(&snapshot, now, deadline).await?;
        report.came_online = seen_online.len();
        let marked = self
            .apply_rules(
                &snapshot,
                instances.as_deref(),
                &seen_online,
                now,
                deadline,
                report,
            )
            .await?;
        let leaving: HashSet<String> = marked.iter().map(|r| r.name.clone()).collect();
        let already_done = Snapshot {
            runners: Vec::new(),
            queued_jobs: Vec::new(),
            complete: snapshot.complete,
        };
        self.delete_due(
            &already_done,
            marked,
            &launched,
            clock.now(),
            deadline,
            report,
        )
        .await;
        let steps_left = [
            Step::Warm,
            Step::OrphanInstances,
            Step::OrphanRunners,
            Step::LostJobs,
            Step::Redeliver,
            Step::Reruns,
            Step::Counters,
        ];
        for step in steps_left {
            if Instant::now() >= deadline {
                report.left_for_next_run = true;
                return Ok(());
            }
            match step {
                Step::Warm => {
                    let leaving = leaving.iter().map(String::as_str).collect();
                    report.warm_requested += self
                        .top_up_warm(&snapshot, &leaving, now, deadline, report)
                        .await;
                }
                Step::OrphanInstances => {
                    if let Some(instances) = &instances {
                        report.orphans_reaped +=
                            self.sweep_instances(&snapshot, instances, now).await;
                    }
                }
                Step::OrphanRunners => {
                    report.orphans_reaped += self.sweep_runners(&snapshot, deadline).await;
                }
                Step::LostJobs => {
                    report.requeued += self.requeue_lost_jobs(&snapshot, now, deadline).await?;
                    report.jobs_settled +=
                        self.settle_running_jobs(&snapshot, now, deadline).await?;
                }
                Step::Redeliver => {
                    report.redelivered += self.redeliver_failed(now, deadline).await;
                }
                Step::Reruns => {
                    report.reruns_asked += self.ask_reruns(now, deadline).await;
                }
                Step::Counters => {
                    report.counters_repaired += self.repair_counters(&snapshot, now).await?
                }
            }
        }
        Ok(())
    }

    /// Every live record (due or not) and every queued job, through the status index.
    async fn read_snapshot(&self, now: OffsetDateTime) -> Result<Snapshot, StoreError> {
        let everything = now + EVERYTHING_DUE;
        let mut runners = Vec::new();
        let mut complete = true;
        for status in LIVE {
            let found = self
                .store
                .runners_in_status(status, everything, LIVE_LIMIT)
                .await?;
            complete &= found.len() < LIVE_LIMIT;
            runners.extend(found);
        }
        let queued_jobs = self
            .store
            .jobs_in_status(JobStatus::Queued, everything, LIVE_LIMIT)
            .await?;
        complete &= queued_jobs.len() < LIVE_LIMIT;
        Ok(Snapshot {
            runners,
            queued_jobs,
            complete,
        })
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember_scopes(&self, snapshot: &Snapshot) {
        let mut memory = self.memory();
        for record in &snapshot.runners {
            memory.scopes.insert(crate::model::scope_of(record));
        }
    }

    /// The runners-by-status gauge: one value per configured pool and live status.
    fn record_gauges(&self, snapshot: &Snapshot) {
        let mut counts: HashMap<(&str, InstanceStatus), usize> = HashMap::new();
        for record in &snapshot.runners {
            *counts
                .entry((record.pool.as_str(), record.status))
                .or_default() += 1;
        }
        let mut pools: HashSet<&str> = self.config.pools.iter().map(|p| p.name.as_str()).collect();
        pools.extend(snapshot.runners.iter().map(|r| r.pool.as_str()));
        for pool in pools {
            for status in LIVE {
                let count = counts.get(&(pool, status)).copied().unwrap_or(0);
                self.metrics.record(
                    Metric::RunnersByStatus,
                    &[
                        (Dimension::Pool, pool),
                        (Dimension::Status, status.as_str()),
                    ],
                    count as f64,
                );
            }
        }
    }
}

/// The steps after the deletions, each skipped once the deadline has come.
#[derive(Debug, Clone, Copy)]
enum Step {
    Warm,
    OrphanInstances,
    OrphanRunners,
    LostJobs,
    Redeliver,
    Reruns,
    Counters,
}

#[cfg(test)]
mod breaker_tests;
#[cfg(test)]
mod failed_events_tests;
#[cfg(test)]
mod interruptions_tests;
#[cfg(test)]
mod prices_tests;
#[cfg(test)]
mod reconcile_tests;
#[cfg(test)]
mod redeliver_tests;
#[cfg(test)]
mod reruns_tests;
#[cfg(test)]
mod settle_tests;
#[cfg(test)]
mod sweep_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod warm_tests;

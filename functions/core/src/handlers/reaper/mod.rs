//! The reaper handler: takes `pending_delete` and `pending_force_delete` records to
//! `deleted`, without ever killing a runner in the middle of a job, and reconciles the
//! table, EC2 and GitHub so that every crash, lost webhook and provider error converges.
//! Every deletion goes through the graceful path: GitHub's DELETE first, which is itself
//! the "is it busy?" check (422), so a busy runner keeps its instance.
//!
//! A run ([`Reaper::run`]) holds the reaper lease ([`lease`]), then takes these steps in
//! order ([`steps`]). The first ones run every time; each later one starts only before
//! the deadline, and what is left waits for the next run, a minute later.
//!
//! | step | file | what it does |
//! |---|---|---|
//! | snapshot | [`snapshot`] | the live records by status and the queued jobs, read once through the status index; the runners-by-status gauge |
//! | prices | [`prices`] | prices missing or a day old read from the price lists (never per job) |
//! | describe | [`snapshot`], [`delete`] | the run's one describe of the instances; their EC2 launch times kept |
//! | delete due | [`delete`] | what is already due deleted, each instance priced in the deletion's own write |
//! | watch | [`reconcile`] | bootstrapping runners seen online |
//! | rules | [`reconcile`], [`decide`], [`stopped`], [`settle`] | the record rules ([`decide::verdicts`], and a stopped pool's replacements, [`stopped::stopped_replacements`]), each a move to `pending_delete` (or to `running` for a runner online while `creating`); stalled creations resumed or released; what they sent away deleted |
//! | warm | [`warm`] | the warm pools topped up to `min_idle` (reserved here, created by the scaler) |
//! | orphans | [`orphans`] | instances and GitHub runners no live record claims, removed |
//! | lost jobs | [`jobs`], [`settle`] | queued jobs whose launch was lost queued again; `in_progress` jobs with no runner settled from GitHub |
//! | redeliver | [`redeliver`], [`failed_events`] | failed `workflow_job` deliveries asked again of GitHub |
//! | re-runs | [`reruns`] | interrupted jobs whose workflow run completed, re-run once |
//! | counters | [`counters`] | drifted pool counters set back to what the live records hold |
//! | runner release | [`crate::releases`] | at most hourly: GitHub's newest runner copied into the bucket, checked against its published sum; the image pipelines started for it |
//!
//! EC2's events (a spot interruption warning, an instance terminated) come to the same
//! function and are handled one by one, outside the run ([`interruptions`]). What a
//! handler needs is described once ([`assembly`]), and a run's counts are its
//! [`ReaperReport`].

mod assembly;
mod cleanup;
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
mod report;
mod reruns;
mod settle;
mod snapshot;
mod steps;
mod stopped;
mod sweeps;
mod warm;

pub use assembly::{ReaperCapabilities, ReaperPorts};
pub use decide::{
    Cleanup, COUNTER_SETTLE, FORGOTTEN_GRACE, INSTANCE_GRACE, JOB_CHECKS_PER_RUN,
    JOB_CHECK_INTERVAL, JOB_RECHECK, QUEUED_GRACE, WARM_STALL,
};
pub use failed_events::REFUSED_ASKS;
pub use interruptions::{
    InstanceEvent, InstanceEventKind, InstanceEventOutcome, SPOT_INTERRUPTION_WARNING, STATE_CHANGE,
};
pub use lease::{LEASE_MARGIN, REAPER_LEASE};
pub use prices::Pricing;
pub use report::ReaperReport;
pub use reruns::Reruns;

use snapshot::{Snapshot, EVERYTHING_DUE, LIVE, LIVE_LIMIT};
use steps::{Run, LATER_STEPS};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::ports::*;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use time::OffsetDateTime;
use tokio::time::Instant;

// What the step tests take from here with `use super::*`.
#[cfg(test)]
use {
    crate::lifecycle::InstanceStatus,
    crate::metrics::{Dimension, Metric},
    crate::model::{JobStatus, RunnerRecord},
    std::time::Duration,
};

/// Deletions under way at once (each is independent and conditional).
const PARALLEL_DELETES: usize = 8;
/// Queued jobs looked at per run.
const JOB_BATCH: usize = 100;
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
    /// The redelivery sweep's pace: GitHub's content-creation limits.
    redelivery_pace: Arc<crate::pace::RegistrationPace>,
    lease: Option<Arc<dyn crate::ports::Leases>>,
    /// Where spot interruptions are counted per pool (none: no circuit breaker).
    breakers: Option<Arc<dyn crate::ports::SpotBreakerStore>>,
    /// Where prices are cached and read (none: jobs are not priced).
    pricing: Option<Pricing>,
    /// The wanted re-runs of interrupted jobs, and GitHub's runs (none: no re-run).
    reruns: Option<Reruns>,
    /// The runner copy in the bucket (none: no runner copy).
    runner_sync: Option<crate::releases::RunnerSync>,
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

    /// The steps of the module doc's table, in order.
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
        // Prices before the deletions that are priced from them.
        report.prices_read = self.refresh_prices(&snapshot, now, deadline).await;
        // The describe before the deletions, which keep each instance's launch time.
        let instances = self.describe_instances().await;
        let launched = self.remember_launch_times(&snapshot, instances.as_deref());
        // Capacity first: what is already due holds slots that queued jobs wait for.
        self.delete_due(
            &snapshot,
            Vec::new(),
            &launched,
            clock.now(),
            deadline,
            report,
        )
        .await;
        let mut run = Run {
            snapshot: &snapshot,
            instances: instances.as_deref(),
            launched: &launched,
            leaving: HashSet::new(),
            now,
            deadline,
        };
        self.reconcile_and_delete(&mut run, &clock, report).await?;
        for step in LATER_STEPS {
            if Instant::now() >= deadline {
                report.left_for_next_run = true;
                return Ok(());
            }
            self.run_step(step, &run, report).await?;
        }
        Ok(())
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod breaker_tests;
#[cfg(test)]
mod failed_events_tests;
#[cfg(test)]
mod idle_tests;
#[cfg(test)]
mod interruptions_tests;
#[cfg(test)]
mod prices_tests;
#[cfg(test)]
mod reconcile_tests;
#[cfg(test)]
mod redeliver_pace_tests;
#[cfg(test)]
mod redeliver_tests;
#[cfg(test)]
mod refill_tests;
#[cfg(test)]
mod reruns_tests;
#[cfg(test)]
mod settle_tests;
#[cfg(test)]
mod sweep_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod warm_jobs_tests;
#[cfg(test)]
mod warm_tests;

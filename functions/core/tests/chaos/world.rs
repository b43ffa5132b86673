//! The world one schedule runs in: the in-memory fakes of every port (the table, EC2,
//! GitHub's runners, the JIT config, the App's webhook deliveries log), the jobs queue
//! as SQS behaves, and GitHub's side of the story — its jobs, the webhook deliveries it
//! has yet to make (redeliveries asked for included), and which runner each instance
//! brought online (played by [`crate::github`]).

use crate::queue::SimQueue;
use ephemera_core::config::Config;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::memory::{
    FakeFleet, FakeForge, FakeWorkflowRuns, MemoryDeliveries, MemoryJitStore, MemoryReruns,
    MemoryStore, StoreOp,
};
use ephemera_core::message::{JobConclusion, MessageKind};
use ephemera_core::ports::Market;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use time::OffsetDateTime;

pub const POOL: &str = "linux";
pub const OWNER: &str = "octo-org";
pub const REPO: &str = "app";
pub const INSTALLATION: u64 = 5;

/// Every store method, so that healing can clear the failures injected into any of them.
pub const STORE_OPS: [StoreOp; 17] = [
    StoreOp::RecordJob,
    StoreOp::GetJob,
    StoreOp::AdvanceJob,
    StoreOp::ClaimJob,
    StoreOp::UnclaimJob,
    StoreOp::HandOverClaim,
    StoreOp::GetRunner,
    StoreOp::UpdateRunner,
    StoreOp::Transition,
    StoreOp::FinishDeletion,
    StoreOp::RunnersInStatus,
    StoreOp::GetPool,
    StoreOp::JobsInStatus,
    StoreOp::RecheckJob,
    StoreOp::RecheckRunner,
    StoreOp::PoolCounter,
    StoreOp::RepairPool,
];

/// A job as GitHub sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Running {
        runner: String,
        runner_id: u64,
        ends_at: OffsetDateTime,
    },
    Completed {
        runner: String,
    },
    /// Its runner vanished under it (GitHub fails the job).
    Failed {
        runner: String,
    },
    /// EC2 reclaimed its spot runner's instance (GitHub fails the job with its shutdown
    /// message): it ran, and ended.
    Interrupted {
        runner: String,
    },
    Cancelled,
}

/// Deliveries listed per page of the App's deliveries log: small, so that a sweep pages
/// and, when many deliveries came since the last, runs out of pages before reading them.
pub const DELIVERIES_PER_PAGE: usize = 2;

/// A webhook GitHub has yet to deliver (or deliver again).
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: MessageKind,
    pub job_id: u64,
    pub runner: Option<(String, u64)>,
    /// The job's `runs-on` labels.
    pub labels: Vec<String>,
    /// The event's `X-GitHub-Delivery`: the same for every attempt at it.
    pub guid: String,
    /// Sent again because the redelivery sweep asked for it.
    pub redelivery: bool,
    /// How a `completed` job ended, when the event says.
    pub conclusion: Option<JobConclusion>,
}

#[derive(Debug, Default)]
pub struct GitHub {
    pub jobs: BTreeMap<u64, JobState>,
    /// Each job's `runs-on` labels (sized jobs add sizing labels to the pool's).
    pub job_labels: BTreeMap<u64, Vec<String>>,
    /// Jobs whose `queued` webhook reached the queue at least once.
    pub queued_delivered: BTreeSet<u64>,
    /// Jobs every first delivery of whose `queued` fails (the endpoint refuses it, or
    /// cannot be reached): only a redelivery can bring them to ephemera.
    pub queued_refused: BTreeSet<u64>,
    pub outbox: Vec<Event>,
    /// Delivery id → the event that attempt carried (what a redelivery sends again).
    pub attempts: BTreeMap<u64, Event>,
    /// Runs of each job: GitHub gives a job to one runner, once.
    pub runs: BTreeMap<u64, u32>,
    /// Instance id → the GitHub runner it brought online.
    pub booted: BTreeMap<String, u64>,
    /// Instances that read a JIT config GitHub no longer knows: their runner never starts.
    pub duds: BTreeSet<String>,
    /// Ephemeral runners that took their one job.
    pub used: BTreeSet<u64>,
    /// Runner name → the job GitHub gave it last (a static runner takes one after another).
    pub last_job: BTreeMap<String, u64>,
    pub next_job: u64,
    pub next_delivery: u64,
    pub next_guid: u64,
    /// The workflow run and attempt of each job made by a re-run (any other job is its
    /// own run's first attempt).
    pub rerun_jobs: BTreeMap<u64, (u64, u32)>,
    /// Jobs interrupted after a warning the reaper recorded: the only ones that may be
    /// re-run.
    pub warned: BTreeSet<u64>,
    /// Re-runs GitHub accepted and made a job of.
    pub reruns_made: usize,
    /// Instance id → every job a StartInstances of it was made for (the jobs whose take
    /// of its record committed): a stopped instance is started for one job only.
    pub started_for: BTreeMap<String, BTreeSet<u64>>,
    /// Runner record → the jobs whose take of it committed.
    pub takes: BTreeMap<String, BTreeSet<u64>>,
    /// Stopped pool hosts whose prepare phase failed: they stay up, never powering off.
    pub prepare_failed: BTreeSet<String>,
}

/// What a schedule did, for the summary line.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub jobs: u64,
    pub ran: u64,
    pub cancelled: u64,
    pub taken_by_other_runner: u64,
    /// Jobs taken by a warm runner (launched for no job).
    pub taken_by_warm_runner: u64,
    /// Schedules whose pool keeps `min_idle` warm runners, or has static runners.
    pub warm_pools: u64,
    pub static_pools: u64,
    pub deliveries_lost: u64,
    pub deliveries_duplicated: u64,
    /// `in_progress` and `completed` events GitHub never sent.
    pub events_unsent: u64,
    /// Redeliveries the sweep asked for, and those of them GitHub delivered.
    pub redeliveries_asked: u64,
    pub redeliveries_delivered: u64,
    /// Jobs every first delivery of whose `queued` failed.
    pub queued_refused: u64,
    /// Jobs that first reached the queue by a redelivery, while GitHub still had them
    /// queued: only the sweep brought them to ephemera.
    pub recovered_by_sweep: u64,
    /// Schedules with at least one such job.
    pub schedules_recovered_by_sweep: u64,
    /// Schedules of one job whose every first `queued` delivery failed, and of those the
    /// ones the sweep recovered.
    pub lone_jobs: u64,
    pub lone_jobs_recovered: u64,
    pub crashes: u64,
    pub faults: u64,
    pub concurrent_runs: u64,
    pub dead_lettered: u64,
    /// Spot interruptions of a running job, those the reaper was warned of, and the
    /// re-runs GitHub made.
    pub interrupted: u64,
    pub interruptions_warned: u64,
    pub reruns: u64,
    /// Schedules whose pool keeps `stopped` instances, and in them: hosts that prepared
    /// and powered off into `stopped`, hosts whose prepare failed (left up), StartInstances
    /// that succeeded for a taken record (and those repeated for the same job: a resumed
    /// take), StartInstances refused, stopped instances EC2 lost, and crashes drawn at the
    /// stopped pool's named calls.
    pub stopped_pools: u64,
    pub hosts_prepared: u64,
    pub prepares_failed: u64,
    pub starts: u64,
    pub starts_repeated: u64,
    pub starts_refused: u64,
    pub stopped_lost: u64,
    pub named_crashes: u64,
    /// The reaper's and the scaler's moves of stopped pool records, read from their
    /// histories once the schedule ends: `instance_stopped`, `prepare_timeout`,
    /// `stopped_stale`, `instance_gone` (of a `preparing`, `stopped` or `starting`
    /// record), takes that fell back to a launch, and a taken record released by
    /// `creation_stalled` (its job no longer waits).
    pub rule_instance_stopped: u64,
    pub rule_prepare_timeout: u64,
    pub rule_stopped_stale: u64,
    pub rule_instance_gone: u64,
    pub takes_failed: u64,
    pub takes_released: u64,
}

pub struct World {
    pub config: Arc<Config>,
    pub store: Arc<MemoryStore>,
    pub fleet: Arc<FakeFleet>,
    pub forge: Arc<FakeForge>,
    pub jit_store: Arc<MemoryJitStore>,
    pub deliveries: Arc<MemoryDeliveries>,
    pub queue: Arc<SimQueue>,
    /// The wanted re-runs (the table's), and GitHub's workflow runs.
    pub reruns: Arc<MemoryReruns>,
    pub runs: Arc<FakeWorkflowRuns>,
    github: Mutex<GitHub>,
    /// Breaches seen the moment they happened (a busy runner's instance terminated).
    breaches: Mutex<Vec<String>>,
    /// A deliberate break for the suite's own test: the table's take of a stopped
    /// record ignores its `status = stopped` condition (the gate puts the record back to
    /// `stopped` before each take), so two jobs can take one instance.
    pub break_take_condition: std::sync::atomic::AtomicBool,
    stats: Mutex<Stats>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl World {
    pub fn new(config: Arc<Config>) -> Arc<World> {
        Arc::new(World {
            config,
            store: Arc::new(MemoryStore::new()),
            fleet: Arc::new(FakeFleet::new()),
            forge: Arc::new(FakeForge::new()),
            jit_store: Arc::new(MemoryJitStore::new()),
            deliveries: Arc::new(MemoryDeliveries::new(DELIVERIES_PER_PAGE)),
            queue: Arc::new(SimQueue::default()),
            reruns: Arc::new(MemoryReruns::new()),
            runs: Arc::new(FakeWorkflowRuns::new()),
            github: Mutex::default(),
            breaches: Mutex::default(),
            break_take_condition: Default::default(),
            stats: Mutex::default(),
        })
    }

    pub fn github(&self) -> MutexGuard<'_, GitHub> {
        lock(&self.github)
    }

    pub fn stats(&self) -> MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    pub fn breach(&self, what: String) {
        lock(&self.breaches).push(what);
    }

    pub fn take_breaches(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.breaches))
    }

    /// The name of the runner running a job on `instance_id`, as GitHub sees it.
    pub fn busy_runner_on(&self, instance_id: &str) -> Option<String> {
        let runner_id = *self.github().booted.get(instance_id)?;
        let runner = self
            .forge
            .runners()
            .into_iter()
            .find(|r| r.id == runner_id)?;
        runner.busy.then_some(runner.name)
    }

    /// Whether the pool's runners are ephemeral (one job each) rather than static.
    pub fn ephemeral(&self) -> bool {
        self.config.pools.iter().all(|p| p.ephemeral)
    }

    /// The records whose runner GitHub shows running (or having run, last) a job other
    /// than the one the record names. A static runner's earlier jobs do not count: only
    /// the one GitHub gave it last.
    pub fn runners_running_other_jobs(
        &self,
        records: &[ephemera_core::model::RunnerRecord],
    ) -> Vec<String> {
        let github = self.github();
        records
            .iter()
            .filter(|r| {
                github
                    .last_job
                    .get(&r.name)
                    .is_some_and(|job_id| r.job_id != Some(*job_id))
            })
            .map(|r| r.name.clone())
            .collect()
    }

    /// The take of `runner` for `job_id` committed (the table's transaction said yes).
    pub fn taken(&self, runner: &str, job_id: u64) {
        let mut github = self.github();
        github
            .takes
            .entry(runner.to_owned())
            .or_default()
            .insert(job_id);
    }

    /// A StartInstances of `instance_id` succeeded: noted with every job whose take of
    /// the live record naming the instance committed; an instance started for two jobs
    /// (two takes of one stopped instance) is a breach, as is a start of an instance no
    /// take is for.
    pub fn started(&self, instance_id: &str) {
        let record = self
            .store
            .runners()
            .into_iter()
            .find(|r| r.status.is_live() && r.instance_id.as_deref() == Some(instance_id));
        let Some(record) = record else {
            self.breach(format!(
                "instance {instance_id} was started, but no live record names it"
            ));
            return;
        };
        let mut github = self.github();
        let takes = github.takes.get(&record.name).cloned().unwrap_or_default();
        let jobs = github
            .started_for
            .entry(instance_id.to_owned())
            .or_default();
        let again = !jobs.is_empty() && takes.is_subset(jobs);
        jobs.extend(takes.iter().copied());
        let jobs: Vec<u64> = jobs.iter().copied().collect();
        drop(github);
        let mut stats = self.stats();
        stats.starts += 1;
        stats.starts_repeated += u64::from(again);
        drop(stats);
        if jobs.is_empty() {
            self.breach(format!(
                "instance {instance_id} was started for no job: no take of record {} ({})",
                record.name, record.status
            ));
        } else if jobs.len() > 1 {
            self.breach(format!(
                "instance {instance_id} was started for two jobs: {jobs:?} (record {})",
                record.name
            ));
        }
    }

    /// The deliberate break of [`World::break_take_condition`]: the record is put back
    /// to `stopped` with no job, as if the take's condition were not there.
    pub fn forget_take(&self, runner: &str) {
        if let Some(mut record) = self.store.runner(runner) {
            if matches!(
                record.status,
                InstanceStatus::Starting | InstanceStatus::Running
            ) && record.prepare
            {
                record.status = InstanceStatus::Stopped;
                record.job_id = None;
                self.store.put_runner(record);
            }
        }
    }

    /// Counts the stopped pool's moves from every record's history, into the stats.
    pub fn count_stopped_moves(&self) {
        let mut counts = [0u64; 6];
        for record in self.store.runners().into_iter().filter(|r| r.prepare) {
            let mut before = None;
            for entry in &record.history {
                let reason = entry.reason.as_deref().unwrap_or("");
                let moved = |to: InstanceStatus| entry.status == Some(to);
                if moved(InstanceStatus::Stopped) {
                    counts[0] += 1;
                }
                if moved(InstanceStatus::PendingDelete) {
                    counts[1] += u64::from(reason.contains("not stopped within bootstrap_timeout"));
                    counts[2] += u64::from(reason.contains("older than stopped_max_age"));
                    counts[3] += u64::from(
                        reason.contains("instance gone")
                            && matches!(
                                before,
                                Some(
                                    InstanceStatus::Preparing
                                        | InstanceStatus::Stopped
                                        | InstanceStatus::Starting
                                )
                            ),
                    );
                    counts[4] += u64::from(reason.starts_with("take failed"));
                    counts[5] += u64::from(
                        before == Some(InstanceStatus::Starting)
                            && reason.contains("no longer waits"),
                    );
                }
                if entry.status.is_some() {
                    before = entry.status;
                }
            }
        }
        let mut stats = self.stats();
        stats.rule_instance_stopped = counts[0];
        stats.rule_prepare_timeout = counts[1];
        stats.rule_stopped_stale = counts[2];
        stats.rule_instance_gone = counts[3];
        stats.takes_failed = counts[4];
        stats.takes_released = counts[5];
    }

    /// Clears every injected provider failure.
    pub fn heal(&self) {
        self.forge.fail_next(0);
        self.deliveries.fail_next(0);
        self.fleet.fail_launch_with(None);
        self.fleet.fail_market_with(Market::Spot, None);
        self.fleet.fail_market_with(Market::OnDemand, None);
        self.fleet.cap_launches(None);
        self.fleet.fail_terminate_times(0);
        self.fleet.fail_describe_times(0);
        for op in STORE_OPS {
            self.store.fail(op, 0);
        }
        self.store.fail(StoreOp::TakeStopped, 0);
        self.fleet.fail_start_with(None);
        self.fleet.fail_shutdown_changes(0);
        self.jit_store.fail_next(0);
        self.queue.fail_sends(false);
    }
}

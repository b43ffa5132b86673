//! The reaper's decisions, as plain functions of what it read and `now`: which live
//! records must go (bootstrap timeout, stuck `deleting`, `error`, instance gone, idle
//! runners, stalled warm launches), which instances and GitHub runners are orphans, how
//! many slots each pool's live records hold, and how many warm runners each pool lacks.
//! No I/O here; `reconcile`, `orphans` and `warm` act on the answers.

pub use super::cleanup::Cleanup;
pub use super::sweeps::{
    orphan_instances, orphan_runners, slots_held, stopped_shortfall, warm_shortfall, WarmShortfall,
};

use crate::config::{Config, PoolConfig};
use crate::lifecycle::CREATE_LEASE;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::model::{JobRecord, RunnerRecord};

use crate::ports::{Instance, InstanceState};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use time::OffsetDateTime;

/// How long a `running` record's instance may be missing from EC2's answer before the
/// record counts as having lost it (EC2's listing lags a launch by seconds).
pub const INSTANCE_GRACE: Duration = Duration::from_secs(2 * 60);
/// How often an active runner's job is looked up on GitHub (a missed `completed`).
pub const JOB_CHECK_INTERVAL: Duration = Duration::from_secs(3 * 60);
/// How long a registered runner may be missing from GitHub before its record counts as
/// stale: GitHub removes an ephemeral runner once its job is done, and that job's
/// `completed` normally follows within seconds.
pub const FORGOTTEN_GRACE: Duration = Duration::from_secs(60);
/// At most this many of those lookups per run, the longest-waiting first: a fleet of
/// 1,000 busy runners would otherwise spend 20,000 GitHub calls an hour on a fallback,
/// above an installation's budget; capped it spends at most 1,800 (one run a minute),
/// and each busy runner is looked at every `1,000 / 30` minutes instead.
pub const JOB_CHECKS_PER_RUN: usize = 30;
/// How long a queued job may have no runner before GitHub is asked about it.
pub const QUEUED_GRACE: Duration = Duration::from_secs(3 * 60);
/// How long after a check a job still queued on GitHub is checked again.
pub const JOB_RECHECK: Duration = Duration::from_secs(5 * 60);
/// How long a pool counter must stand still before a drift in it may be repaired.
pub const COUNTER_SETTLE: Duration = Duration::from_secs(2 * 60);
/// How long a warm runner may stay in `pending_create` or `creating` without a step
/// forward before its creation counts as dead (the scaler stopped retrying it, or its
/// message was lost): it is cleaned, and a fresh one launched in its place.
pub const WARM_STALL: Duration = Duration::from_secs(10 * 60);

/// What to do with one live record this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Send it to `pending_delete`.
    Clean(Cleanup),
    /// `missed_completed`: it is running a job and is due for a look at whether that job ended (on
    /// the job, or on the runner when the record names no job).
    CheckJob,
    /// `forgotten_by_github`: it is idle on GitHub and due for a look at whether GitHub still knows it
    /// (a runner that took another job and was removed, its webhooks lost).
    CheckRunner,
    /// `creation_stalled`: it is `pending_create`, `creating` or `starting` for a job, past the creation lease
    /// and not online: the delivery creating it died, and nothing may resume it (its job's
    /// deliveries find the job taken, or a job was handed to it). Its job, read again, says
    /// which: still queued and claimed by it, its creation is resumed; else it is released.
    StalledCreation,
    /// `came_online`: it is `creating`, past the creation lease, and its runner has come
    /// online (it took a job, or became idle after one): the delivery creating it died
    /// after handing over the JIT config, before it wrote `running`. No delivery resumes
    /// it (its job is no longer queued) and no other rule looks at a `creating` runner
    /// that is not pending, so it is recorded `running`, and the rules of a running
    /// runner (instance gone, missed `completed`, idle) take it from the next run.
    Created,
    /// `instance_stopped`: a stopped pool's `preparing` record whose instance EC2 shows
    /// stopped: the host prepared and powered off, and the record moves to `stopped`,
    /// ready to be taken.
    Prepared,
}

/// When GitHub last showed the runner idle (its latest `idle` history entry), or when
/// the record last changed if the history no longer says.
pub fn idle_since(record: &RunnerRecord) -> OffsetDateTime {
    record
        .history
        .iter()
        .rev()
        .find(|entry| entry.runner_status == Some(RunnerStatus::Idle))
        .map_or(record.updated_at, |entry| entry.at)
}

/// When a runner's bootstrap timeout starts: when its JIT config was stored, as an
/// instance cannot come online before it reads it, and under GitHub's registration
/// pace or EC2's launch bucket the config may be stored long after the record was
/// written; the record's creation when no config was stored yet.
pub fn bootstrap_started(record: &RunnerRecord) -> OffsetDateTime {
    crate::timeline::jit_stored_at(record).unwrap_or(record.created_at)
}

pub(super) fn older_than(at: OffsetDateTime, now: OffsetDateTime, limit: Duration) -> bool {
    now - at >= limit
}

/// The pool's settings, or the defaults for a pool no longer configured.
fn pool_or_default<'a>(config: &'a Config, name: &str, fallback: &'a PoolConfig) -> &'a PoolConfig {
    config.pool(name).unwrap_or(fallback)
}

/// Whether EC2's answer shows the record's instance alive; `None` when EC2 was not read.
fn instance_alive(record: &RunnerRecord, instances: &HashMap<&str, InstanceState>) -> bool {
    let Some(id) = record.instance_id.as_deref() else {
        return false;
    };
    matches!(
        instances.get(id),
        Some(InstanceState::Pending | InstanceState::Running)
    )
}

/// Whether EC2's answer still has the record's instance in any state but on its way out
/// (a stopped pool's instance is alive while stopped).
fn instance_present(record: &RunnerRecord, instances: &HashMap<&str, InstanceState>) -> bool {
    record.instance_id.as_deref().is_some_and(|id| {
        !matches!(
            instances.get(id),
            None | Some(InstanceState::ShuttingDown | InstanceState::Terminated)
        )
    })
}

/// Whether GitHub could give queued `job` to `runner`: same pool, registered where the
/// job is (its organization, or its repository for a repository-scoped runner), and with
/// labels that cover the job's (a sized job's sizing labels are on its own runners only;
/// a record that names no labels is taken to have its pool's).
fn could_take(runner: &RunnerRecord, job: &JobRecord) -> bool {
    job.pool == runner.pool
        && (runner.labels.is_empty() || crate::routing::runner_takes(&runner.labels, &job.labels))
        && job.owner.eq_ignore_ascii_case(&runner.owner)
        && runner
            .repo
            .as_ref()
            .is_none_or(|repo| job.repo.eq_ignore_ascii_case(repo))
}

/// Whether a runner of the job's pool that could take it has stood idle for
/// [`QUEUED_GRACE`]: GitHub gives a queued job to an idle runner at once, so a job the
/// table still holds as queued beside one has most likely moved on unseen (cancelled, or
/// run elsewhere, its webhooks lost).
pub fn idle_runner_could_take(live: &[RunnerRecord], job: &JobRecord, now: OffsetDateTime) -> bool {
    live.iter().any(|runner| {
        runner.status == InstanceStatus::Running
            && runner.runner_status == RunnerStatus::Idle
            && older_than(idle_since(runner), now, QUEUED_GRACE)
            && could_take(runner, job)
    })
}

/// The verdict on every live record that needs one (`never_online`,
/// `delete_interrupted`, `creation_failed`, `instance_gone`, `missed_completed`,
/// `static_idle`, `ephemeral_idle`, `warm_stalled`, `prepare_timeout`, `stopped_stale`, `instance_stopped`, `came_online`, `creation_stalled`
/// and `forgotten_by_github`).
/// `instances` is EC2's answer, `None` when it could not be read (`instance_gone` then waits);
/// `queued_jobs` every job the table holds as queued.
pub fn verdicts(
    config: &Config,
    live: &[RunnerRecord],
    instances: Option<&[Instance]>,
    queued_jobs: &[JobRecord],
    now: OffsetDateTime,
) -> Vec<(RunnerRecord, Verdict)> {
    let fallback = config.pools.first().cloned();
    let Some(fallback) = fallback else {
        return Vec::new();
    };
    let by_id: Option<HashMap<&str, InstanceState>> =
        instances.map(|list| list.iter().map(|i| (i.id.as_str(), i.state)).collect());
    let spared = kept_warm(config, live, queued_jobs, &fallback, now);
    let mut out = Vec::new();
    for record in live {
        let pool = pool_or_default(config, &record.pool, &fallback);
        let idle_work = IdleWork {
            queued_jobs,
            spared: spared.contains(record.name.as_str()),
        };
        if let Some(verdict) = verdict(config, pool, record, by_id.as_ref(), &idle_work, now) {
            out.push((record.clone(), verdict));
        }
    }
    out.extend(
        idle_static_runners(config, live, &spared, now)
            .into_iter()
            .map(|record| (record, Verdict::Clean(Cleanup::IdleStatic))),
    );
    out
}

/// What `ephemeral_idle` needs to know beyond the record.
struct IdleWork<'a> {
    /// Every job the table holds as queued.
    queued_jobs: &'a [JobRecord],
    /// The record is one of the `min_idle` idle runners its pool keeps.
    spared: bool,
}

fn verdict(
    config: &Config,
    pool: &PoolConfig,
    record: &RunnerRecord,
    instances: Option<&HashMap<&str, InstanceState>>,
    idle_work: &IdleWork<'_>,
    now: OffsetDateTime,
) -> Option<Verdict> {
    use InstanceStatus::*;
    let clean = |cleanup| Some(Verdict::Clean(cleanup));
    match record.status {
        Deleting if older_than(record.updated_at, now, config.reaper.stuck_deleting) => {
            clean(Cleanup::StuckDeleting)
        }
        Error => clean(Cleanup::CreationFailed),
        Preparing | Stopped | Starting
            if instances.is_some_and(|by_id| !instance_present(record, by_id))
                && older_than(record.updated_at, now, INSTANCE_GRACE) =>
        {
            clean(Cleanup::InstanceGone)
        }
        Preparing
            if record.instance_id.as_deref().is_some_and(|id| {
                instances.and_then(|by_id| by_id.get(id)) == Some(&InstanceState::Stopped)
            }) =>
        {
            Some(Verdict::Prepared)
        }
        Preparing if older_than(record.created_at, now, pool.bootstrap_timeout) => {
            clean(Cleanup::PrepareTimeout)
        }
        Stopped if older_than(record.created_at, now, pool.stopped_max_age) => {
            clean(Cleanup::StoppedStale)
        }
        PendingCreate | Creating | Running
            if record.runner_status == RunnerStatus::Pending
                && older_than(bootstrap_started(record), now, pool.bootstrap_timeout) =>
        {
            clean(Cleanup::BootstrapTimeout)
        }
        // A take (`starting`) that died after StartInstances, its runner since online
        // (chaos seed 136731), is recorded `running` the same way.
        Creating | Starting
            if record.runner_status != RunnerStatus::Pending
                && older_than(record.updated_at, now, CREATE_LEASE) =>
        {
            Some(Verdict::Created)
        }
        // A take (`starting`) whose delivery died is resumed the same way.
        PendingCreate | Creating | Starting
            if record.job_id.is_some()
                && record.runner_status == RunnerStatus::Pending
                && older_than(record.updated_at, now, CREATE_LEASE) =>
        {
            Some(Verdict::StalledCreation)
        }
        PendingCreate | Creating
            if record.job_id.is_none() && older_than(record.updated_at, now, WARM_STALL) =>
        {
            clean(Cleanup::WarmStalled)
        }
        Running
            if instances.is_some_and(|by_id| !instance_alive(record, by_id))
                && older_than(record.updated_at, now, INSTANCE_GRACE) =>
        {
            clean(Cleanup::InstanceGone)
        }
        Running
            if record.ephemeral
                && record.runner_status == RunnerStatus::Idle
                && older_than(idle_since(record), now, pool.idle_timeout)
                && !idle_work.spared
                && !idle_work
                    .queued_jobs
                    .iter()
                    .any(|job| could_take(record, job)) =>
        {
            clean(Cleanup::IdleNoWork)
        }
        // A runner seen busy before any `in_progress` named its job (a warm or static
        // runner) names no job: it is checked through GitHub's view of the runner.
        Running
            if record.runner_status == RunnerStatus::Active
                && (record.job_id.is_some() || record.github_runner_id.is_some())
                && record.next_attempt_at <= now =>
        {
            Some(Verdict::CheckJob)
        }
        Running
            if record.runner_status == RunnerStatus::Idle
                && record.github_runner_id.is_some()
                && record.next_attempt_at <= now =>
        {
            Some(Verdict::CheckRunner)
        }
        _ => None,
    }
}

/// `static_idle`: the idle static runners past their pool's `idle_timeout`, but for those the
/// pool keeps warm (`spared`).
fn idle_static_runners(
    config: &Config,
    live: &[RunnerRecord],
    spared: &HashSet<&str>,
    now: OffsetDateTime,
) -> Vec<RunnerRecord> {
    let fallback = config.pools.first();
    live.iter()
        .filter(|r| {
            r.status == InstanceStatus::Running
                && !r.ephemeral
                && r.runner_status == RunnerStatus::Idle
                && !spared.contains(r.name.as_str())
        })
        .filter(|r| {
            let timeout = config
                .pool(&r.pool)
                .or(fallback)
                .map_or(Duration::ZERO, |p| p.idle_timeout);
            older_than(idle_since(r), now, timeout)
        })
        .cloned()
        .collect()
}

/// Whether the runner is free for any job: it has none, or its own job is no longer
/// queued (it ended, or another runner took it). A runner whose queued job may still
/// come to it is spoken for.
pub(super) fn unbound(record: &RunnerRecord, queued: &HashSet<u64>) -> bool {
    record.job_id.is_none_or(|job| !queued.contains(&job))
}

/// Per pool, the `min_idle` most recently idle unbound runners (`static_idle` and `ephemeral_idle` spare
/// them, whatever their age): the warm pool that the reaper also tops up, so the two
/// never fight.
fn kept_warm<'a>(
    config: &Config,
    live: &'a [RunnerRecord],
    queued_jobs: &[JobRecord],
    fallback: &PoolConfig,
    now: OffsetDateTime,
) -> HashSet<&'a str> {
    let queued: HashSet<u64> = queued_jobs.iter().map(|j| j.job_id).collect();
    let mut idle_by_pool: BTreeMap<&str, Vec<&RunnerRecord>> = BTreeMap::new();
    for record in live {
        if record.status == InstanceStatus::Running
            && record.runner_status == RunnerStatus::Idle
            && unbound(record, &queued)
        {
            idle_by_pool.entry(&record.pool).or_default().push(record);
        }
    }
    let mut kept = HashSet::new();
    for (pool_name, mut idle) in idle_by_pool {
        let pool = pool_or_default(config, pool_name, fallback);
        idle.sort_by_key(|record| std::cmp::Reverse(idle_since(record)));
        let keep = usize::try_from(pool.min_idle_at(now)).unwrap_or(usize::MAX);
        kept.extend(idle.into_iter().take(keep).map(|r| r.name.as_str()));
    }
    kept
}

#[cfg(test)]
#[path = "decide_tests.rs"]
pub(super) mod tests;

#[cfg(test)]
#[path = "decide_stopped_tests.rs"]
mod stopped_tests;

//! The decisions of the sweeps after the record rules, as plain functions of what the
//! run read and `now`: how many warm runners each pool lacks ([`super::warm`]), which
//! instances and GitHub runners are orphans ([`super::orphans`]), and how many slots
//! each pool's live records hold ([`super::counters`]). No I/O here.

use super::decide::{older_than, unbound};
use crate::config::Config;
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::model::{JobRecord, RunnerRecord};
use crate::names;
use crate::ports::{ForgeRunner, Instance, InstanceState};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use time::OffsetDateTime;

/// One pool's warm supply against its `min_idle`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmShortfall {
    pub pool: String,
    /// Unbound runners idle, or on their way (in creation, or booting).
    pub ready: u32,
    /// How many more to launch: `min_idle - ready`.
    pub missing: u32,
}

/// The warm pool rule: for each pool with a `min_idle`, its unbound runners that are
/// idle or on their way (`pending_create`, `creating`, or `running` and not yet online),
/// leaving out the records sent to be deleted this run (`leaving`); the pools short of
/// `min_idle` (as its `min_idle_schedule` has it at `now`), with how many they lack.
pub fn warm_shortfall(
    config: &Config,
    live: &[RunnerRecord],
    queued_jobs: &[JobRecord],
    leaving: &HashSet<&str>,
    now: OffsetDateTime,
) -> Vec<WarmShortfall> {
    let queued: HashSet<u64> = queued_jobs.iter().map(|j| j.job_id).collect();
    let mut ready: HashMap<&str, u32> = HashMap::new();
    for record in live {
        use InstanceStatus::*;
        let warm = matches!(
            (record.status, record.runner_status),
            (Running, RunnerStatus::Idle | RunnerStatus::Pending) | (PendingCreate | Creating, _)
        );
        if warm
            && !record.prepare
            && unbound(record, &queued)
            && !leaving.contains(record.name.as_str())
        {
            *ready.entry(record.pool.as_str()).or_default() += 1;
        }
    }
    config
        .pools
        .iter()
        .filter(|pool| pool.min_idle_at(now) > 0)
        .filter_map(|pool| {
            let ready = ready.get(pool.name.as_str()).copied().unwrap_or(0);
            let missing = pool.min_idle_at(now).saturating_sub(ready);
            (missing > 0).then(|| WarmShortfall {
                pool: pool.name.clone(),
                ready,
                missing,
            })
        })
        .collect()
}

/// The stopped pool rule: for each pool that keeps stopped instances at `now` (its
/// `stopped`, as its `stopped_schedule` has it), its stopped pool records on their way or
/// ready (`pending_create`, `creating`, `preparing` or `stopped`, not taken by a job),
/// leaving out the records sent to be deleted this run; the pools short of their target,
/// with how many they lack. A taken record (`starting`, then `running`) no longer counts,
/// so each take is refilled.
pub fn stopped_shortfall(
    config: &Config,
    live: &[RunnerRecord],
    leaving: &HashSet<&str>,
    now: OffsetDateTime,
) -> Vec<WarmShortfall> {
    let mut ready: HashMap<&str, u32> = HashMap::new();
    for record in live {
        use InstanceStatus::*;
        let kept = record.prepare
            && record.job_id.is_none()
            && matches!(
                record.status,
                PendingCreate | Creating | Preparing | Stopped
            );
        if kept && !leaving.contains(record.name.as_str()) {
            *ready.entry(record.pool.as_str()).or_default() += 1;
        }
    }
    config
        .pools
        .iter()
        .filter(|pool| pool.stopped_at(now) > 0)
        .filter_map(|pool| {
            let ready = ready.get(pool.name.as_str()).copied().unwrap_or(0);
            let missing = pool.stopped_at(now).saturating_sub(ready);
            (missing > 0).then(|| WarmShortfall {
                pool: pool.name.clone(),
                ready,
                missing,
            })
        })
        .collect()
}

/// `orphan_instance`: instances of this deployment that no live record claims, launched more than
/// `grace` ago (`reaper.orphan_grace`: the scaler records the instance id right after
/// the launch call returns, so anything older lost its record) and not already on their
/// way out. (Candidates: the reaper acts
/// only on those seen twice, so a record caught between two index partitions is never
/// taken for missing.)
pub fn orphan_instances(
    instances: &[Instance],
    live: &[RunnerRecord],
    now: OffsetDateTime,
    grace: Duration,
) -> Vec<String> {
    let claimed: HashSet<&str> = live
        .iter()
        .filter_map(|r| r.instance_id.as_deref())
        .collect();
    instances
        .iter()
        .filter(|i| {
            !matches!(
                i.state,
                InstanceState::Terminated | InstanceState::ShuttingDown
            )
        })
        .filter(|i| !claimed.contains(i.id.as_str()))
        .filter(|i| i.launched_at.is_some_and(|at| older_than(at, now, grace)))
        .map(|i| i.id.clone())
        .collect()
}

/// `orphan_github_runner`: GitHub runners named for this deployment, offline, that no live record
/// names. (The reaper reads each record again, consistently, before removing one.)
pub fn orphan_runners<'a>(
    deployment: &str,
    listed: &'a [ForgeRunner],
    live: &[RunnerRecord],
) -> Vec<&'a ForgeRunner> {
    let named: HashSet<&str> = live.iter().map(|r| r.name.as_str()).collect();
    listed
        .iter()
        .filter(|r| names::is_ours(deployment, &r.name))
        .filter(|r| !r.online && !named.contains(r.name.as_str()))
        .collect()
}

/// `slot_drift`: the slots the live records of each pool hold (every configured pool
/// appears, at zero if it has none).
pub fn slots_held(config: &Config, live: &[RunnerRecord]) -> BTreeMap<String, u32> {
    let mut held: BTreeMap<String, u32> =
        config.pools.iter().map(|p| (p.name.clone(), 0)).collect();
    for record in live.iter().filter(|r| r.slot_held && r.status.is_live()) {
        *held.entry(record.pool.clone()).or_default() += 1;
    }
    held
}

#[cfg(test)]
#[path = "sweeps_tests.rs"]
mod tests;

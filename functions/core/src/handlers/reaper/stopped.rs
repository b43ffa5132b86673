//! The stopped pool's replacement rules, beside the per-record verdicts: a `stopped`
//! record whose instance runs another image than its pool launches now
//! (`stopped_outdated`), and the `stopped` records above the pool's target at `now`
//! (`stopped_surplus`: a `stopped_schedule` window ended, or `stopped` was lowered).
//! Plain functions of what the run read; `reconcile` reads the pools' images and acts.

use super::cleanup::Cleanup;
use crate::config::Config;
use crate::lifecycle::InstanceStatus;
use crate::model::RunnerRecord;
use crate::ports::Instance;
use std::collections::{BTreeMap, HashMap, HashSet};
use time::OffsetDateTime;

/// The pools with at least one `stopped` record: those whose current image the run
/// reads (one read a pool, none for a pool without stopped instances).
pub fn pools_with_stopped(live: &[RunnerRecord]) -> Vec<&str> {
    let mut pools: Vec<&str> = live
        .iter()
        .filter(|r| r.status == InstanceStatus::Stopped)
        .map(|r| r.pool.as_str())
        .collect();
    pools.sort_unstable();
    pools.dedup();
    pools
}

/// The `stopped` records to replace, each with its rule, leaving out those in `judged`
/// (given a verdict already this run).
///
/// - `stopped_outdated`: EC2 says the instance's image, `images` the image its pool
///   launches now, and they differ. A pool whose image could not be read (absent from
///   `images`), or an instance whose image EC2 did not say, is left alone this run.
/// - `stopped_surplus`: the pool's ready records (marked `prepare`, no job, on their way
///   or `stopped`, as the refill counts them) exceed the pool's `stopped` target at
///   `now` (0 outside its `stopped_schedule`, or for a pool no longer configured):
///   the oldest `stopped` ones above it go, and a record sent away by the first rule
///   counts toward the excess.
pub fn stopped_replacements(
    config: &Config,
    live: &[RunnerRecord],
    instances: &[Instance],
    images: &HashMap<String, String>,
    judged: &HashSet<&str>,
    now: OffsetDateTime,
) -> Vec<(RunnerRecord, Cleanup)> {
    let image_of: HashMap<&str, &str> = instances
        .iter()
        .filter_map(|i| Some((i.id.as_str(), i.image_id.as_deref()?)))
        .collect();
    let mut out = Vec::new();
    let mut ready_by_pool: BTreeMap<&str, u32> = BTreeMap::new();
    let mut stopped_by_pool: BTreeMap<&str, Vec<&RunnerRecord>> = BTreeMap::new();
    for record in live {
        use InstanceStatus::*;
        let ready = record.prepare
            && record.job_id.is_none()
            && matches!(
                record.status,
                PendingCreate | Creating | Preparing | Stopped
            );
        if !ready || judged.contains(record.name.as_str()) {
            continue;
        }
        *ready_by_pool.entry(record.pool.as_str()).or_default() += 1;
        if record.status != Stopped {
            continue;
        }
        let outdated = record
            .instance_id
            .as_deref()
            .and_then(|id| image_of.get(id))
            .zip(images.get(&record.pool))
            .is_some_and(|(runs, launches)| *runs != launches.as_str());
        if outdated {
            out.push((record.clone(), Cleanup::StoppedOutdated));
        } else {
            stopped_by_pool
                .entry(record.pool.as_str())
                .or_default()
                .push(record);
        }
    }
    for (pool, ready) in ready_by_pool {
        let target = config
            .pools
            .iter()
            .find(|p| p.name == pool)
            .map_or(0, |p| p.stopped_at(now));
        let mut excess = ready.saturating_sub(target) as usize;
        // The outdated ones already leave.
        let leaving = out.iter().filter(|(r, _)| r.pool == pool).count();
        excess = excess.saturating_sub(leaving);
        let mut stopped = stopped_by_pool.remove(pool).unwrap_or_default();
        stopped.sort_by_key(|r| (r.created_at, r.name.clone()));
        out.extend(
            stopped
                .into_iter()
                .take(excess)
                .map(|r| (r.clone(), Cleanup::StoppedSurplus)),
        );
    }
    out
}

#[cfg(test)]
#[path = "stopped_tests.rs"]
mod tests;

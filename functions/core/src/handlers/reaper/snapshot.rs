//! What a run reads first, once: the live records by status through the status index
//! (never the whole table, so its cost follows the live work and not the history), the
//! queued jobs, and the one describe of the deployment's instances; and what it records
//! of them (where runners are registered, the runners-by-status gauge).

use super::Reaper;
use crate::handlers::error_chain;
use crate::lifecycle::InstanceStatus;
use crate::metrics::{Dimension, Metric};
use crate::model::{JobRecord, JobStatus, RunnerRecord};
use crate::ports::{Instance, StoreError};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use time::OffsetDateTime;

/// Records read per live status per run. A status holding more than this makes the
/// snapshot incomplete, and the sweeps that trust it (orphans, counters) wait.
pub(super) const LIVE_LIMIT: usize = 2000;
/// How far ahead "every record, due or not" reaches in the status index.
pub(super) const EVERYTHING_DUE: Duration = Duration::from_secs(366 * 24 * 3600);

/// The statuses of records that still stand for something.
pub(super) const LIVE: [InstanceStatus; 10] = [
    InstanceStatus::PendingCreate,
    InstanceStatus::Creating,
    InstanceStatus::Preparing,
    InstanceStatus::Stopped,
    InstanceStatus::Starting,
    InstanceStatus::Running,
    InstanceStatus::Error,
    InstanceStatus::PendingDelete,
    InstanceStatus::PendingForceDelete,
    InstanceStatus::Deleting,
];

/// What the live part of the table looked like at the start of a run.
pub(super) struct Snapshot {
    pub(super) runners: Vec<RunnerRecord>,
    pub(super) queued_jobs: Vec<JobRecord>,
    /// False when a status held more than [`LIVE_LIMIT`] records.
    pub(super) complete: bool,
}

/// The statuses only a stopped pool's records are in.
const STOPPED_POOL: [InstanceStatus; 3] = [
    InstanceStatus::Preparing,
    InstanceStatus::Stopped,
    InstanceStatus::Starting,
];

impl Reaper {
    /// The live statuses read from the status index: a stopped pool's only while some
    /// pool keeps stopped instances (one read of the index per status a run, and none
    /// for what no configuration makes). A pool whose `stopped` is removed while it has
    /// such records: they are read no more, their instances are ended as orphans after
    /// `reaper.orphan_grace`, and `ephemera runners delete` removes the records.
    pub(super) fn live_statuses(&self) -> impl Iterator<Item = InstanceStatus> + '_ {
        let stopped_pools = self.config.pools.iter().any(|pool| pool.stopped > 0);
        LIVE.into_iter()
            .filter(move |status| stopped_pools || !STOPPED_POOL.contains(status))
    }

    /// Every live record (due or not) and every queued job, through the status index.
    pub(super) async fn read_snapshot(&self, now: OffsetDateTime) -> Result<Snapshot, StoreError> {
        let everything = now + EVERYTHING_DUE;
        let mut runners = Vec::new();
        let mut complete = true;
        for status in self.live_statuses() {
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

    /// The run's one describe of the deployment's instances; None when EC2 cannot be
    /// listed (the instance rules and the orphan sweep then wait).
    pub(super) async fn describe_instances(&self) -> Option<Vec<Instance>> {
        match self.fleet.describe_live().await {
            Ok(instances) => Some(instances),
            Err(err) => {
                tracing::warn!(error = %error_chain(&err), "cannot list instances; instance rules wait");
                None
            }
        }
    }

    /// Where runners were seen registered, for the GitHub orphan sweep.
    pub(super) fn remember_scopes(&self, snapshot: &Snapshot) {
        let mut memory = self.memory();
        for record in &snapshot.runners {
            memory.scopes.insert(crate::model::scope_of(record));
        }
    }

    /// The runners-by-status gauge: one value per configured pool and live status.
    pub(super) fn record_gauges(&self, snapshot: &Snapshot) {
        let mut counts: HashMap<(&str, InstanceStatus), usize> = HashMap::new();
        for record in &snapshot.runners {
            *counts
                .entry((record.pool.as_str(), record.status))
                .or_default() += 1;
        }
        let mut pools: HashSet<&str> = self.config.pools.iter().map(|p| p.name.as_str()).collect();
        pools.extend(snapshot.runners.iter().map(|r| r.pool.as_str()));
        for pool in pools {
            for status in self.live_statuses() {
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

#[cfg(test)]
mod tests {
    use super::LIVE;
    use crate::lifecycle::InstanceStatus;

    #[test]
    fn every_status_but_deleted_is_read_as_live() {
        let live: Vec<_> = InstanceStatus::ALL
            .into_iter()
            .filter(|status| status.is_live())
            .collect();
        assert_eq!(live.len(), LIVE.len());
        assert!(live.iter().all(|status| LIVE.contains(status)));
    }
}

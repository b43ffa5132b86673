//! What an operator reads of costs: one job's cost as `ephemera jobs show` says it, and
//! the costs of the runners deleted over a period, summed by repository and by pool
//! (`ephemera costs`). Both are computed from records and cached prices alone.
//!
//! A deleted runner's cost is the one the reaper wrote with its deletion (launch
//! requested → terminated); a runner still alive is priced from the cached prices up to
//! now, and says so.

use crate::lifecycle::InstanceStatus;
use crate::model::RunnerRecord;
use crate::prices::{self, JobCost, Price};
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// Until when a cost runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostUntil {
    /// The instance was terminated: the cost is final.
    Terminated,
    /// The instance lives: the cost so far.
    Now,
}

impl CostUntil {
    pub fn as_str(self) -> &'static str {
        match self {
            CostUntil::Terminated => "terminated",
            CostUntil::Now => "now",
        }
    }
}

/// A job's cost as shown: the figure when known, and one line that says what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownCost {
    pub cost: Option<JobCost>,
    pub until: Option<CostUntil>,
    pub note: String,
}

/// The cost of the instance of `runner` (the runner that ran a job, or was launched for
/// it), as `jobs show` says it at `now`.
pub fn shown(runner: Option<&RunnerRecord>, prices: &[Price], now: OffsetDateTime) -> ShownCost {
    let unshown = |note: &str| ShownCost {
        cost: None,
        until: None,
        note: note.to_owned(),
    };
    let Some(runner) = runner.filter(|r| r.instance_id.is_some()) else {
        return unshown("no instance yet (nothing to price)");
    };
    let (cost, until) = match (&runner.cost, runner.status) {
        (Some(cost), _) => (cost.clone(), CostUntil::Terminated),
        (None, InstanceStatus::Deleted) => {
            return unshown("not priced (deleted while the reaper kept no prices)")
        }
        (None, _) => match prices::cost_of(runner, now, prices, None) {
            Some(cost) => (cost, CostUntil::Now),
            None => return unshown("no instance yet (nothing to price)"),
        },
    };
    let note = match (cost.usd_micros, cost.usd_micros_per_hour, &cost.unpriced) {
        (Some(micros), Some(per_hour), _) => format!(
            "{}{} ({} {} at {}/h, {} s, launch requested → {})",
            prices::usd(micros),
            if until == CostUntil::Now {
                " so far"
            } else {
                ""
            },
            runner.instance_type.as_deref().unwrap_or("-"),
            runner.market.map(|m| m.as_str()).unwrap_or("-"),
            prices::usd(per_hour),
            cost.seconds,
            until.as_str()
        ),
        (_, _, Some(reason)) => reason.clone(),
        _ => "no price".to_owned(),
    };
    ShownCost {
        cost: Some(cost),
        until: Some(until),
        note,
    }
}

/// The costs of one repository or pool over a period.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostSum {
    /// Runners deleted in the period with a cost written.
    pub runners: u64,
    /// The sum of the priced ones, in millionths of a USD.
    pub usd_micros: u64,
    /// Runners whose cost has no figure (no price known): left out of `usd_micros`.
    pub unpriced: u64,
    /// Instance-seconds billed, priced or not.
    pub seconds: u64,
    /// Seconds stopped pool instances waited stopped (billed for their volume only).
    pub stopped_seconds: u64,
    /// What their volumes cost while stopped, in millionths of a USD (in `usd_micros`).
    pub volume_usd_micros: u64,
}

impl CostSum {
    fn add(&mut self, cost: &JobCost) {
        self.runners += 1;
        self.seconds += cost.seconds;
        self.stopped_seconds += cost.stopped_seconds;
        self.volume_usd_micros += cost.volume_usd_micros.unwrap_or(0);
        match cost.usd_micros {
            Some(micros) => self.usd_micros += micros,
            None => self.unpriced += 1,
        }
    }
}

/// Costs summed by repository and by pool; a runner that ran no job (a warm runner
/// that was never used) counts under the repository `-`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostSums {
    pub by_repository: BTreeMap<String, CostSum>,
    pub by_pool: BTreeMap<String, CostSum>,
    pub total: CostSum,
}

/// The costs of the runners among `runners` deleted at or after `since`.
pub fn sum_since(runners: &[RunnerRecord], since: OffsetDateTime) -> CostSums {
    let mut sums = CostSums::default();
    let deleted = runners
        .iter()
        .filter(|r| r.status == InstanceStatus::Deleted && r.updated_at >= since);
    for runner in deleted {
        let Some(cost) = &runner.cost else { continue };
        let repository = cost.repository.clone().unwrap_or_else(|| "-".to_owned());
        sums.by_repository.entry(repository).or_default().add(cost);
        sums.by_pool
            .entry(runner.pool.clone())
            .or_default()
            .add(cost);
        sums.total.add(cost);
    }
    sums
}

#[cfg(test)]
#[path = "costs_tests.rs"]
mod tests;

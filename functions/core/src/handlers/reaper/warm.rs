//! The warm pool: each pool with a `min_idle` keeps that many runners ready for any job.
//! Where [`decide::warm_shortfall`] finds a pool short, the reaper reserves each missing
//! runner — one transaction writes its job-less record and takes a pool slot with the
//! scaler's conditional counter, so a pool never goes above `max_runners` — and only then
//! asks the scaler, through a `warm` message, to create it. The scaler owns every launch
//! (the reaper has no launch capability), so a warm runner is made by the code, and with
//! the retries, that make a job's runner.
//!
//! Every crash leaves a record: a reservation whose message was never sent, or whose
//! creation died, stays job-less in `pending_create` or `creating` and counts as on its
//! way until [`WARM_STALL`] passes without progress; then `warm_stalled` cleans it (and whatever
//! was made for it) and the next top-up replaces it.
//!
//! A pool with `stopped` is refilled the same way ([`decide::stopped_shortfall`]): a
//! job-less record marked `prepare`, with its slot, then a `warm` message; the scaler
//! launches it on-demand to prepare and power off (docs/design.md, "Stopped pool").

#[cfg(doc)]
use super::decide::WARM_STALL;
use super::decide::{self, WarmShortfall};
use super::{Reaper, ReaperReport, Snapshot};
use crate::config::PoolConfig;
use crate::handlers::error_chain;
use crate::lifecycle::InstanceStatus;
use crate::message::QueueMessage;
use crate::model::{HistoryEntry, Market, RunnerRecord};
use crate::names;
use crate::ports::*;
use std::collections::HashSet;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// How often a reservation that lost a race on the pool item is tried again.
const RESERVE_TRIES: u64 = 5;

/// Which supply a reservation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Supply {
    /// A running runner kept for any job (`min_idle`).
    Warm,
    /// An instance to prepare and stop (`stopped`).
    Stopped,
}

/// How one reservation ended.
enum Reserved {
    Sent,
    PoolFull,
    Failed,
}

impl Reaper {
    /// Tops up every pool short of `min_idle`, until the deadline; returns how many warm
    /// runners were reserved and handed to the scaler. `leaving` names the records sent
    /// to be deleted this run (no longer ready, whatever the snapshot says).
    pub(super) async fn top_up_warm(
        &self,
        snapshot: &Snapshot,
        leaving: &HashSet<&str>,
        now: OffsetDateTime,
        deadline: Instant,
        report: &mut ReaperReport,
    ) -> usize {
        let short = decide::warm_shortfall(
            &self.config,
            &snapshot.runners,
            &snapshot.queued_jobs,
            leaving,
            now,
        );
        self.top_up(Supply::Warm, short, now, deadline, report)
            .await
    }

    /// Refills every pool short of its `stopped` instances, until the deadline; returns
    /// how many were reserved and handed to the scaler to prepare.
    pub(super) async fn top_up_stopped(
        &self,
        snapshot: &Snapshot,
        leaving: &HashSet<&str>,
        now: OffsetDateTime,
        deadline: Instant,
        report: &mut ReaperReport,
    ) -> usize {
        let short = decide::stopped_shortfall(&self.config, &snapshot.runners, leaving, now);
        self.top_up(Supply::Stopped, short, now, deadline, report)
            .await
    }

    async fn top_up(
        &self,
        supply: Supply,
        short: Vec<WarmShortfall>,
        now: OffsetDateTime,
        deadline: Instant,
        report: &mut ReaperReport,
    ) -> usize {
        let mut sent = 0;
        for shortfall in short {
            let Some(pool) = self.config.pool(&shortfall.pool) else {
                continue;
            };
            let Some(scope) = pool.warm_scope(self.config.github.scope) else {
                warn!(pool = %pool.name, min_idle = pool.min_idle, stopped = pool.stopped, ?supply, "min_idle or stopped is set but warm_owner (or warm_repo) is not: none launched");
                continue;
            };
            let (launched, done) = self
                .top_up_pool(supply, pool, &shortfall, &scope, now, deadline)
                .await;
            sent += launched;
            if !done {
                report.left_for_next_run = true;
                break;
            }
        }
        sent
    }

    /// Reserves and sends the runners one pool lacks; returns how many, and false when
    /// the deadline stopped it.
    async fn top_up_pool(
        &self,
        supply: Supply,
        pool: &PoolConfig,
        shortfall: &WarmShortfall,
        scope: &(String, Option<String>),
        now: OffsetDateTime,
        deadline: Instant,
    ) -> (usize, bool) {
        let mut sent = 0;
        for _ in 0..shortfall.missing {
            if Instant::now() >= deadline {
                return (sent, false);
            }
            match self.reserve_warm(supply, pool, scope, now).await {
                Reserved::Sent => sent += 1,
                Reserved::PoolFull => {
                    info!(pool = %pool.name, ?supply, ready = shortfall.ready, launched = sent, runner_cap = pool.runner_cap(), "pool at its runner cap: fewer launched than its min_idle or stopped asks");
                    break;
                }
                // Logged; the next run tries again.
                Reserved::Failed => break,
            }
        }
        if sent > 0 {
            info!(pool = %pool.name, ?supply, ready = shortfall.ready, launched = sent, "warm runners or stopped instances launching");
        }
        (sent, true)
    }

    /// One warm runner (or stopped pool instance): its record and slot in one
    /// transaction, then its message.
    async fn reserve_warm(
        &self,
        supply: Supply,
        pool: &PoolConfig,
        scope: &(String, Option<String>),
        now: OffsetDateTime,
    ) -> Reserved {
        let runner = warm_record(&self.config.deployment, supply, pool, scope, now);
        let mut tries = 0;
        let reserved = loop {
            tries += 1;
            match self.store.reserve_runner(&runner, pool.runner_cap()).await {
                Err(StoreError::Conflict(_)) if tries < RESERVE_TRIES => {
                    tokio::time::sleep(Duration::from_millis(20 * tries)).await;
                }
                other => break other,
            }
        };
        match reserved {
            Ok(true) => {}
            Ok(false) => return Reserved::PoolFull,
            Err(err) => {
                warn!(pool = %pool.name, error = %error_chain(&err), "cannot reserve a warm runner; next run tries again");
                return Reserved::Failed;
            }
        }
        if let Err(err) = self.queue.send(&QueueMessage::warm(&runner)).await {
            warn!(runner = %runner.name, pool = %pool.name, error = %error_chain(&err), "cannot hand the warm runner to the scaler; giving its slot back");
            self.withdraw(&runner, now).await;
            return Reserved::Failed;
        }
        info!(runner = %runner.name, pool = %pool.name, "warm runner reserved");
        Reserved::Sent
    }

    /// A reservation the scaler never heard of goes to be deleted (nothing exists outside
    /// the table yet, so the deletion only gives the slot back). If even that fails, the
    /// stall rule finds it later.
    async fn withdraw(&self, runner: &RunnerRecord, now: OffsetDateTime) {
        let to_delete = Transition::new(
            InstanceStatus::PendingCreate,
            InstanceStatus::PendingDelete,
            now,
        )
        .because("warm message not sent");
        if let Err(err) = self.store.transition(&runner.name, &to_delete).await {
            warn!(runner = %runner.name, error = %error_chain(&err), "cannot withdraw the warm reservation; the stall rule will clean it");
        }
    }
}

/// The record of a warm runner: like a job's runner, with no job, registered where the
/// pool's configuration says.
fn warm_record(
    deployment: &str,
    supply: Supply,
    pool: &PoolConfig,
    (owner, repo): &(String, Option<String>),
    now: OffsetDateTime,
) -> RunnerRecord {
    let mut runner = RunnerRecord::new(
        names::runner_name(deployment, &pool.name),
        pool.name.clone(),
        now,
    );
    runner.labels = crate::routing::registered_labels(pool);
    runner.ephemeral = pool.ephemeral;
    runner.owner = owner.clone();
    runner.repo = repo.clone();
    runner.reason = Some(match supply {
        Supply::Warm => format!("warm pool: min_idle {}", pool.min_idle),
        Supply::Stopped => format!("stopped pool: stopped {}", pool.stopped),
    });
    runner.prepare = supply == Supply::Stopped;
    if runner.prepare {
        // A stopped pool's instance is launched on-demand even in a spot pool: a spot
        // instance of an instant fleet cannot be stopped (docs/design.md, "Only
        // on-demand"). The record's market makes the scaler's launch on-demand.
        runner.market = Some(Market::OnDemand);
    }
    runner.history = vec![HistoryEntry::status(
        now,
        InstanceStatus::PendingCreate,
        runner.reason.clone(),
    )];
    runner
}

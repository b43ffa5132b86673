//! [`MemoryStore`]: the runners, jobs and pools table, held in maps.
//!
//! Every method is one critical section, as every DynamoDB call it stands for is one
//! conditional write or one transaction, and its conditions are the adapter's: a test
//! meets a refused transition, a taken job or a full pool exactly where production would.

use super::{lock, spend, InjectedFailure};
use crate::lifecycle::{ClaimMove, ClaimState, InstanceStatus};
use crate::model::{HistoryEntry, JobRecord, JobStatus, PoolRecord, RunnerRecord};
use crate::ports::{
    Claim, ClaimHandOver, HostStamps, PoolCounter, RunnerStore, RunnerUpdate, StoreError,
    Transition,
};
use crate::prices::JobCost;
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use time::OffsetDateTime;

/// A [`RunnerStore`] method, to aim an injected failure at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOp {
    RecordJob,
    GetJob,
    AdvanceJob,
    ClaimJob,
    ReserveRunner,
    UnclaimJob,
    HandOverClaim,
    TakeStopped,
    GetRunner,
    UpdateRunner,
    Transition,
    FinishDeletion,
    RunnersInStatus,
    RunnersOnInstance,
    GetPool,
    JobsInStatus,
    RecheckJob,
    RecheckRunner,
    PoolCounter,
    RepairPool,
}

impl StoreOp {
    fn as_str(self) -> &'static str {
        match self {
            StoreOp::RecordJob => "record_job",
            StoreOp::GetJob => "get_job",
            StoreOp::AdvanceJob => "advance_job",
            StoreOp::ClaimJob => "claim_job",
            StoreOp::ReserveRunner => "reserve_runner",
            StoreOp::UnclaimJob => "unclaim_job",
            StoreOp::HandOverClaim => "hand_over_claim",
            StoreOp::TakeStopped => "take_stopped",
            StoreOp::GetRunner => "get_runner",
            StoreOp::UpdateRunner => "update_runner",
            StoreOp::Transition => "transition",
            StoreOp::FinishDeletion => "finish_deletion",
            StoreOp::RunnersInStatus => "runners_in_status",
            StoreOp::RunnersOnInstance => "runners_on_instance",
            StoreOp::GetPool => "get_pool",
            StoreOp::JobsInStatus => "jobs_in_status",
            StoreOp::RecheckJob => "recheck_job_at",
            StoreOp::RecheckRunner => "recheck_runner_at",
            StoreOp::PoolCounter => "pool_counter",
            StoreOp::RepairPool => "repair_pool_counter",
        }
    }
}

/// The table in memory. Construct with [`MemoryStore::new`]; plant state with the
/// `put_*` helpers and read it back with [`runners`](MemoryStore::runners) and friends.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tables: Mutex<Tables>,
}

#[derive(Debug, Default)]
struct Tables {
    runners: BTreeMap<String, RunnerRecord>,
    jobs: BTreeMap<u64, JobRecord>,
    /// Slots used per pool; a pool never written is at zero.
    pools: BTreeMap<String, u32>,
    /// When each pool's counter was last written by a claim, release or repair.
    pools_touched: BTreeMap<String, OffsetDateTime>,
    /// When the reaper next looks at a queued job (when it was received until set).
    job_rechecks: BTreeMap<u64, OffsetDateTime>,
    /// Injected failures still to come, per method.
    failures: HashMap<StoreOp, u32>,
    /// Injected transaction conflicts still to come, per method.
    conflicts: HashMap<StoreOp, u32>,
    /// Calls still answered before every call fails (an outage, or the caller's death
    /// as far as the table can tell); `None` while there is none.
    outage_after: Option<u32>,
}

impl Tables {
    /// Fails this call with [`StoreError::Conflict`] or [`StoreError::Transient`] if one
    /// is pending for `op`; a failed call writes nothing.
    fn check(&mut self, op: StoreOp) -> Result<(), StoreError> {
        if let Some(left) = &mut self.outage_after {
            if *left == 0 {
                return Err(StoreError::Transient(Box::new(InjectedFailure("outage"))));
            }
            *left -= 1;
        }
        if self.conflicts.get_mut(&op).is_some_and(spend) {
            return Err(StoreError::Conflict(format!("{} (injected)", op.as_str())));
        }
        let fails = self.failures.get_mut(&op).is_some_and(spend);
        if fails {
            return Err(StoreError::Transient(Box::new(InjectedFailure(
                op.as_str(),
            ))));
        }
        Ok(())
    }
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Every runner record, deleted ones included, by name.
    pub fn runners(&self) -> Vec<RunnerRecord> {
        lock(&self.tables).runners.values().cloned().collect()
    }

    pub fn runner(&self, name: &str) -> Option<RunnerRecord> {
        lock(&self.tables).runners.get(name).cloned()
    }

    /// Every job record, by job id.
    pub fn jobs(&self) -> Vec<JobRecord> {
        lock(&self.tables).jobs.values().cloned().collect()
    }

    pub fn job(&self, job_id: u64) -> Option<JobRecord> {
        lock(&self.tables).jobs.get(&job_id).cloned()
    }

    /// Writes a runner record as it is, in any status, bypassing every condition (to
    /// set up what a crash or another writer left behind). Takes no pool slot.
    pub fn put_runner(&self, record: RunnerRecord) {
        lock(&self.tables)
            .runners
            .insert(record.name.clone(), record);
    }

    /// Writes a job record as it is, bypassing every condition.
    pub fn put_job(&self, record: JobRecord) {
        lock(&self.tables).jobs.insert(record.job_id, record);
    }

    /// The pool's counter (zero for a pool never used).
    pub fn slots_used(&self, pool: &str) -> u32 {
        lock(&self.tables).pools.get(pool).copied().unwrap_or(0)
    }

    /// Sets the pool's counter as it is (to set up drift).
    pub fn set_slots_used(&self, pool: &str, slots_used: u32) {
        lock(&self.tables).pools.insert(pool.to_owned(), slots_used);
    }

    /// Makes the next `times` calls of `op` fail with [`StoreError::Transient`] and
    /// write nothing; other methods are unaffected.
    pub fn fail(&self, op: StoreOp, times: u32) {
        lock(&self.tables).failures.insert(op, times);
    }

    /// Answers the next `calls` calls of any method, then fails every call with
    /// [`StoreError::Transient`] until [`MemoryStore::end_outage`]: nothing a caller
    /// does after call `calls` reaches the table, as when its process dies there.
    pub fn outage_after(&self, calls: u32) {
        lock(&self.tables).outage_after = Some(calls);
    }

    pub fn end_outage(&self) {
        lock(&self.tables).outage_after = None;
    }

    /// Makes the next `times` calls of `op` lose a race to another transaction
    /// ([`StoreError::Conflict`], DynamoDB's `TransactionConflict`) and write nothing.
    pub fn conflict(&self, op: StoreOp, times: u32) {
        lock(&self.tables).conflicts.insert(op, times);
    }
}

fn refused(name: &str, to: InstanceStatus, actual: Option<InstanceStatus>) -> StoreError {
    StoreError::TransitionRefused {
        name: name.to_owned(),
        to,
        actual: actual.map_or("missing", InstanceStatus::as_str).to_owned(),
    }
}

/// The conditions of a [`RunnerUpdate`] on the record as it is.
fn guard(
    name: &str,
    record: Option<&RunnerRecord>,
    update: &RunnerUpdate,
) -> Result<(), StoreError> {
    let Some(record) = record else {
        return Err(StoreError::NotFound(format!("runner {name}")));
    };
    let moved_on = update
        .unchanged_since
        .is_some_and(|seen| seen != record.updated_at);
    let other_instance = update
        .expect_instance
        .as_ref()
        .is_some_and(|expected| *expected != record.instance_id);
    if moved_on || other_instance {
        return Err(StoreError::Conflict(format!("runner {name}")));
    }
    // The runner status table, as the DynamoDB store's condition: refused like any
    // failed condition, a conflict for a guarded update and a missing record otherwise.
    let refused = update
        .runner_status
        .is_some_and(|to| !record.runner_status.can_move_to(to));
    if refused {
        let guarded = update.unchanged_since.is_some() || update.expect_instance.is_some();
        return Err(if guarded {
            StoreError::Conflict(format!("runner {name}"))
        } else {
            StoreError::NotFound(format!("runner {name}"))
        });
    }
    Ok(())
}

/// Writes a [`RunnerUpdate`] whose conditions hold.
fn apply(record: &mut RunnerRecord, update: &RunnerUpdate, at: OffsetDateTime) {
    if let Some(instance_id) = &update.instance_id {
        record.instance_id = Some(instance_id.clone());
    }
    if let Some(github_runner_id) = update.github_runner_id {
        record.github_runner_id = Some(github_runner_id);
    }
    if let Some(runner_status) = update.runner_status {
        record.runner_status = runner_status;
    }
    if let Some(entry) = HistoryEntry::of_update(at, update.runner_status, update.note.as_deref()) {
        record.note(entry);
    }
    if let Some(job_id) = update.job_id {
        record.job_id = Some(job_id);
    }
    record.online_at = record.online_at.or(update.online_at);
    record.interrupted_at = record.interrupted_at.or(update.interrupted_at);
    if let Some(root) = &update.root_volume {
        record.root_volume_gib = Some(root.gib);
        record.root_volume_type = root.volume_type.clone();
    }
    if let Some(instance_type) = &update.instance_type {
        record.instance_type = Some(instance_type.clone());
    }
    record.market = update.market.or(record.market);
    record.updated_at = at;
}

#[async_trait]
impl RunnerStore for MemoryStore {
    async fn record_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::RecordJob)?;
        Ok(tables
            .jobs
            .entry(job.job_id)
            .or_insert_with(|| job.clone())
            .clone())
    }

    async fn get_job(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::GetJob)?;
        Ok(tables.jobs.get(&job_id).cloned())
    }

    async fn advance_job(
        &self,
        job: &JobRecord,
        status: JobStatus,
        runner_name: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::AdvanceJob)?;
        let Some(record) = tables.jobs.get_mut(&job.job_id) else {
            // A job first seen past `queued` (its `queued` webhook was lost or late).
            let mut fresh = job.clone();
            fresh.status = status;
            if let Some(name) = runner_name {
                fresh.runner_name = Some(name.to_owned());
            }
            tables.jobs.insert(fresh.job_id, fresh);
            return Ok(());
        };
        // `IF status IN (earlier statuses)`: a late or repeated webhook changes nothing,
        // except that one naming its runner names it on a job already at its status (the
        // reaper may have advanced the job, from GitHub's answer, before the webhook came).
        let names_runner = record.status == status && runner_name.is_some();
        if !status.earlier().contains(&record.status) && !names_runner {
            return Ok(());
        }
        record.status = status;
        if let Some(name) = runner_name {
            record.runner_name = Some(name.to_owned());
        }
        record.updated_at = job.updated_at;
        record.github = record.github.or(job.github);
        Ok(())
    }

    async fn claim_job(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<Claim, StoreError> {
        let tables = &mut *lock(&self.tables);
        tables.check(StoreOp::ClaimJob)?;
        let Some(job) = tables.jobs.get_mut(&job_id) else {
            return Err(StoreError::NotFound(format!("job {job_id}")));
        };
        // The table allows a claim of an unclaimed job only.
        match (ClaimState::of(job), &job.runner_name) {
            (ClaimState::Bound, _) => return Ok(Claim::NotQueued(job.status)),
            (ClaimState::Claimed, Some(runner_name)) => {
                return Ok(Claim::AlreadyClaimed {
                    runner_name: runner_name.clone(),
                })
            }
            _ => debug_assert!(ClaimMove::Claim.allowed_on(job)),
        }
        if tables.runners.contains_key(&runner.name) {
            // The runner put is `attribute_not_exists(pk)`: names are never reused.
            return Err(StoreError::Conflict(format!("runner {}", runner.name)));
        }
        let slots_used = tables.pools.entry(runner.pool.clone()).or_default();
        if *slots_used >= max_runners {
            return Ok(Claim::PoolFull);
        }
        *slots_used += 1;
        tables
            .pools_touched
            .insert(runner.pool.clone(), runner.updated_at);
        job.runner_name = Some(runner.name.clone());
        job.launched_runner = Some(runner.name.clone());
        job.updated_at = runner.updated_at;
        job.claimed_at = Some(runner.created_at);
        tables.runners.insert(runner.name.clone(), runner.clone());
        Ok(Claim::Claimed)
    }

    async fn reserve_runner(
        &self,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<bool, StoreError> {
        let tables = &mut *lock(&self.tables);
        tables.check(StoreOp::ReserveRunner)?;
        if tables.runners.contains_key(&runner.name) {
            // The runner put is `attribute_not_exists(pk)`: names are never reused.
            return Err(StoreError::Conflict(format!("runner {}", runner.name)));
        }
        let slots_used = tables.pools.entry(runner.pool.clone()).or_default();
        if *slots_used >= max_runners {
            return Ok(false);
        }
        *slots_used += 1;
        tables
            .pools_touched
            .insert(runner.pool.clone(), runner.updated_at);
        tables.runners.insert(runner.name.clone(), runner.clone());
        Ok(true)
    }

    async fn unclaim_job(&self, job_id: u64, runner_name: &str) -> Result<(), StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::UnclaimJob)?;
        if let Some(job) = tables.jobs.get_mut(&job_id) {
            // A claim is on a queued job only; past that the name is the runner that ran it.
            if ClaimMove::Drop.allowed_on(job) && job.runner_name.as_deref() == Some(runner_name) {
                job.runner_name = None;
                job.launched_runner = None;
            }
        }
        Ok(())
    }

    async fn take_stopped(
        &self,
        job_id: u64,
        runner_name: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let tables = &mut *lock(&self.tables);
        tables.check(StoreOp::TakeStopped)?;
        let free = tables.runners.get(runner_name).is_some_and(|runner| {
            runner.status == InstanceStatus::Stopped && runner.job_id.is_none()
        });
        let claimable = tables
            .jobs
            .get(&job_id)
            .is_some_and(|job| ClaimMove::Claim.allowed_on(job) && job.runner_name.is_none());
        if !(free && claimable) {
            return Ok(false);
        }
        let reason = format!("job {job_id} queued: takes the stopped instance");
        if let Some(runner) = tables.runners.get_mut(runner_name) {
            runner.status = InstanceStatus::Starting;
            runner.job_id = Some(job_id);
            runner.updated_at = at;
            runner.reason = Some(reason.clone());
            runner.history.push(HistoryEntry::status(
                at,
                InstanceStatus::Starting,
                Some(reason),
            ));
        }
        if let Some(job) = tables.jobs.get_mut(&job_id) {
            job.runner_name = Some(runner_name.to_owned());
            job.launched_runner = Some(runner_name.to_owned());
            job.updated_at = at;
            job.claimed_at = Some(at);
        }
        Ok(true)
    }

    async fn hand_over_claim(
        &self,
        hand_over: &ClaimHandOver,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let tables = &mut *lock(&self.tables);
        tables.check(StoreOp::HandOverClaim)?;
        let taker = &hand_over.taker.0;
        let movement = match hand_over.to {
            Some(_) => ClaimMove::HandOver,
            None => ClaimMove::Drop,
        };
        let waits = tables.jobs.get(&hand_over.job_id).is_some_and(|job| {
            movement.allowed_on(job) && job.runner_name.as_deref() == Some(taker.as_str())
        });
        if !waits {
            return Ok(false);
        }
        // Every condition first, as the transaction checks them all before any write.
        let updates = std::iter::once(&hand_over.taker).chain(hand_over.to.as_ref());
        for (name, update) in updates.clone() {
            guard(name, tables.runners.get(name), update)?;
        }
        for (name, update) in updates {
            if let Some(record) = tables.runners.get_mut(name) {
                apply(record, update, at);
            }
        }
        if let Some(job) = tables.jobs.get_mut(&hand_over.job_id) {
            let to = hand_over.to.as_ref().map(|(name, _)| name.clone());
            job.runner_name.clone_from(&to);
            job.launched_runner = to;
        }
        Ok(true)
    }

    async fn get_runner(&self, name: &str) -> Result<Option<RunnerRecord>, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::GetRunner)?;
        Ok(tables.runners.get(name).cloned())
    }

    async fn update_runner(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<RunnerRecord, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::UpdateRunner)?;
        guard(name, tables.runners.get(name), update)?;
        let Some(record) = tables.runners.get_mut(name) else {
            return Err(StoreError::NotFound(format!("runner {name}")));
        };
        apply(record, update, at);
        Ok(record.clone())
    }

    async fn transition(
        &self,
        name: &str,
        transition: &Transition,
    ) -> Result<RunnerRecord, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::Transition)?;
        let Some(record) = tables.runners.get_mut(name) else {
            return Err(refused(name, transition.to, None));
        };
        let allowed = transition
            .to
            .allowed_predecessors()
            .contains(&record.status)
            && transition
                .expect
                .is_none_or(|expect| expect == record.status);
        if !allowed {
            return Err(refused(name, transition.to, Some(record.status)));
        }
        record.status = transition.to;
        record.updated_at = transition.at;
        record.next_attempt_at = transition.next_attempt_at;
        // Like the DynamoDB store: optional fields are written only when `Some`.
        if let Some(reason) = &transition.reason {
            record.reason = Some(reason.clone());
        }
        record.note(HistoryEntry::status(
            transition.at,
            transition.to,
            transition.reason.clone(),
        ));
        if let Some(attempts) = transition.attempts {
            record.attempts = attempts;
        }
        if let Some(error) = &transition.error {
            record.last_error = Some(error.clone());
        }
        if let Some(ttl) = transition.ttl {
            record.ttl = Some(ttl);
        }
        Ok(record.clone())
    }

    async fn fail_creation(
        &self,
        name: &str,
        at: OffsetDateTime,
        error: &str,
    ) -> Result<RunnerRecord, StoreError> {
        let tables = &mut *lock(&self.tables);
        tables.check(StoreOp::Transition)?;
        let to = InstanceStatus::Error;
        let Some(record) = tables.runners.get_mut(name) else {
            return Err(refused(name, to, None));
        };
        if record.status != InstanceStatus::Creating {
            return Err(refused(name, to, Some(record.status)));
        }
        record.status = to;
        record.updated_at = at;
        record.next_attempt_at = at;
        record.reason = Some("creation failed".to_owned());
        record.last_error = Some(error.to_owned());
        record.note(HistoryEntry::status(at, to, record.reason.clone()));
        if record.slot_held {
            record.slot_held = false;
            if let Some(slots_used) = tables.pools.get_mut(&record.pool) {
                *slots_used = slots_used.saturating_sub(1);
            }
            tables.pools_touched.insert(record.pool.clone(), at);
        }
        Ok(record.clone())
    }

    async fn finish_deletion(
        &self,
        name: &str,
        at: OffsetDateTime,
        ttl: OffsetDateTime,
        host: &HostStamps,
        cost: Option<&JobCost>,
    ) -> Result<(), StoreError> {
        let tables = &mut *lock(&self.tables);
        tables.check(StoreOp::FinishDeletion)?;
        let to = InstanceStatus::Deleted;
        let Some(record) = tables.runners.get_mut(name) else {
            return Err(refused(name, to, None));
        };
        if !to.allowed_predecessors().contains(&record.status) {
            return Err(refused(name, to, Some(record.status)));
        }
        record.status = to;
        record.updated_at = at;
        record.next_attempt_at = at;
        record.ttl = Some(ttl);
        record.cost = cost.cloned();
        record.instance_launched_at = host.instance_launched_at.or(record.instance_launched_at);
        record.jit_read_at = host.jit_read_at.or(record.jit_read_at);
        record.host_runner = host.runner.clone().or(&record.host_runner);
        record.note(HistoryEntry::status(at, to, None));
        if record.slot_held {
            record.slot_held = false;
            if let Some(slots_used) = tables.pools.get_mut(&record.pool) {
                *slots_used = slots_used.saturating_sub(1);
            }
            tables.pools_touched.insert(record.pool.clone(), at);
        }
        Ok(())
    }

    async fn runners_in_status(
        &self,
        status: InstanceStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::RunnersInStatus)?;
        let mut found: Vec<RunnerRecord> = tables
            .runners
            .values()
            .filter(|record| record.status == status && record.next_attempt_at <= due)
            .cloned()
            .collect();
        found.sort_by(|a, b| (a.next_attempt_at, &a.name).cmp(&(b.next_attempt_at, &b.name)));
        found.truncate(limit);
        Ok(found)
    }

    async fn runners_on_instance(
        &self,
        instance_id: &str,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::RunnersOnInstance)?;
        let on_instance = tables
            .runners
            .values()
            .filter(|record| record.instance_id.as_deref() == Some(instance_id));
        Ok(on_instance.cloned().collect())
    }

    async fn get_pool(&self, name: &str) -> Result<PoolRecord, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::GetPool)?;
        Ok(PoolRecord {
            name: name.to_owned(),
            slots_used: tables.pools.get(name).copied().unwrap_or(0),
        })
    }

    async fn jobs_in_status(
        &self,
        status: JobStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::JobsInStatus)?;
        let next_look = |job: &JobRecord| {
            tables
                .job_rechecks
                .get(&job.job_id)
                .copied()
                .unwrap_or(job.received_at)
        };
        let mut found: Vec<(OffsetDateTime, JobRecord)> = tables
            .jobs
            .values()
            .filter(|job| job.status == status && next_look(job) <= due)
            .map(|job| (next_look(job), job.clone()))
            .collect();
        found.sort_by_key(|(at, job)| (*at, job.job_id));
        found.truncate(limit);
        Ok(found.into_iter().map(|(_, job)| job).collect())
    }

    async fn recheck_job_at(&self, job_id: u64, at: OffsetDateTime) -> Result<bool, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::RecheckJob)?;
        let queued = tables
            .jobs
            .get(&job_id)
            .is_some_and(|job| job.status == JobStatus::Queued);
        if queued {
            tables.job_rechecks.insert(job_id, at);
        }
        Ok(queued)
    }

    async fn recheck_runner_at(
        &self,
        name: &str,
        status: InstanceStatus,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::RecheckRunner)?;
        match tables.runners.get_mut(name) {
            Some(record) if record.status == status => {
                record.next_attempt_at = at;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn pool_counter(&self, name: &str) -> Result<PoolCounter, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::PoolCounter)?;
        Ok(PoolCounter {
            slots_used: tables.pools.get(name).copied().unwrap_or(0),
            updated_at: tables.pools_touched.get(name).copied(),
        })
    }

    async fn repair_pool_counter(
        &self,
        name: &str,
        observed: &PoolCounter,
        slots_used: u32,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut tables = lock(&self.tables);
        tables.check(StoreOp::RepairPool)?;
        let current = PoolCounter {
            slots_used: tables.pools.get(name).copied().unwrap_or(0),
            updated_at: tables.pools_touched.get(name).copied(),
        };
        if &current != observed {
            return Ok(false);
        }
        tables.pools.insert(name.to_owned(), slots_used);
        tables.pools_touched.insert(name.to_owned(), at);
        Ok(true)
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "moves_tests.rs"]
mod moves_tests;

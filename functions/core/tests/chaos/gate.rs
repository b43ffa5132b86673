//! The ports as the handlers see them in a schedule: every call goes through a [`Gate`]
//! to the in-memory fakes. The gate's [`CrashSwitch`], armed with `n`, lets `n` calls
//! through and stops the caller dead before call `n + 1` — that call never starts and
//! never returns, as when a Lambda dies there; the schedule then drops the handler's
//! future. The gate also watches `terminate`: an instance whose runner GitHub shows busy
//! must never be terminated (the suite never force-deletes). A redelivery the reaper
//! asks for through the gate goes to GitHub's outbox, for the schedule to deliver.

use crate::world::World;
use async_trait::async_trait;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::message::QueueMessage;
use ephemera_core::model::{JobRecord, JobStatus, PoolRecord, RunnerRecord};
use ephemera_core::ports::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::Notify;

/// Counts a handler's external calls and stops the one past the armed count.
pub struct CrashSwitch {
    calls: AtomicUsize,
    crash_before: AtomicUsize,
    crashed: Notify,
}

impl CrashSwitch {
    /// A switch that crashes before call `after + 1`, or never.
    pub fn new(after: Option<usize>) -> Arc<CrashSwitch> {
        let switch = Arc::new(CrashSwitch {
            calls: AtomicUsize::new(0),
            crash_before: AtomicUsize::new(usize::MAX),
            crashed: Notify::new(),
        });
        switch.arm(after);
        switch
    }

    pub fn arm(&self, after: Option<usize>) {
        self.calls.store(0, Ordering::SeqCst);
        let before = after.map_or(usize::MAX, |n| n.saturating_add(1));
        self.crash_before.store(before, Ordering::SeqCst);
    }

    /// Resolves once a call has been stopped.
    pub async fn crashed(&self) {
        self.crashed.notified().await;
    }

    /// Before each external call: returns at once, or never if this is the crash.
    async fn pass(&self) {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if call >= self.crash_before.load(Ordering::SeqCst) {
            self.crashed.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

/// Every port of the handlers, wired to the world's fakes through one crash switch.
pub struct Gate {
    world: Arc<World>,
    switch: Arc<CrashSwitch>,
}

impl Gate {
    pub fn new(world: &Arc<World>, switch: &Arc<CrashSwitch>) -> Arc<Gate> {
        Arc::new(Gate {
            world: world.clone(),
            switch: switch.clone(),
        })
    }
}

#[async_trait]
impl RunnerStore for Gate {
    async fn record_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError> {
        self.switch.pass().await;
        self.world.store.record_job(job).await
    }
    async fn get_job(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        self.switch.pass().await;
        self.world.store.get_job(job_id).await
    }
    async fn advance_job(
        &self,
        job: &JobRecord,
        status: JobStatus,
        runner_name: Option<&str>,
    ) -> Result<(), StoreError> {
        self.switch.pass().await;
        self.world.store.advance_job(job, status, runner_name).await
    }
    async fn claim_job(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<Claim, StoreError> {
        self.switch.pass().await;
        self.world
            .store
            .claim_job(job_id, runner, max_runners)
            .await
    }
    async fn reserve_runner(
        &self,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.world.store.reserve_runner(runner, max_runners).await
    }
    async fn unclaim_job(&self, job_id: u64, runner_name: &str) -> Result<(), StoreError> {
        self.switch.pass().await;
        self.world.store.unclaim_job(job_id, runner_name).await
    }
    async fn hand_over_claim(
        &self,
        hand_over: &ClaimHandOver,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.world.store.hand_over_claim(hand_over, at).await
    }
    async fn get_runner(&self, name: &str) -> Result<Option<RunnerRecord>, StoreError> {
        self.switch.pass().await;
        self.world.store.get_runner(name).await
    }
    async fn update_runner(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<RunnerRecord, StoreError> {
        self.switch.pass().await;
        self.world.store.update_runner(name, update, at).await
    }
    async fn transition(
        &self,
        name: &str,
        transition: &Transition,
    ) -> Result<RunnerRecord, StoreError> {
        self.switch.pass().await;
        self.world.store.transition(name, transition).await
    }
    async fn fail_creation(
        &self,
        name: &str,
        at: OffsetDateTime,
        error: &str,
    ) -> Result<RunnerRecord, StoreError> {
        self.switch.pass().await;
        self.world.store.fail_creation(name, at, error).await
    }
    async fn finish_deletion(
        &self,
        name: &str,
        at: OffsetDateTime,
        ttl: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.switch.pass().await;
        self.world.store.finish_deletion(name, at, ttl).await
    }
    async fn runners_in_status(
        &self,
        status: InstanceStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        self.switch.pass().await;
        self.world.store.runners_in_status(status, due, limit).await
    }
    async fn get_pool(&self, name: &str) -> Result<PoolRecord, StoreError> {
        self.switch.pass().await;
        self.world.store.get_pool(name).await
    }
    async fn jobs_in_status(
        &self,
        status: JobStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.switch.pass().await;
        self.world.store.jobs_in_status(status, due, limit).await
    }
    async fn recheck_job_at(&self, job_id: u64, at: OffsetDateTime) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.world.store.recheck_job_at(job_id, at).await
    }
    async fn recheck_runner_at(
        &self,
        name: &str,
        status: InstanceStatus,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.world.store.recheck_runner_at(name, status, at).await
    }
    async fn pool_counter(&self, name: &str) -> Result<PoolCounter, StoreError> {
        self.switch.pass().await;
        self.world.store.pool_counter(name).await
    }
    async fn repair_pool_counter(
        &self,
        name: &str,
        observed: &PoolCounter,
        slots_used: u32,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.switch.pass().await;
        let store = &self.world.store;
        store
            .repair_pool_counter(name, observed, slots_used, at)
            .await
    }
}

#[async_trait]
impl Launcher for Gate {
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError> {
        self.switch.pass().await;
        self.world.fleet.launch(request).await
    }
}

#[async_trait]
impl Fleet for Gate {
    async fn terminate(&self, instance_id: &str) -> Result<(), FleetError> {
        self.switch.pass().await;
        let busy_before = self.world.busy_runner_on(instance_id);
        self.world.fleet.terminate(instance_id).await?;
        if let Some(runner) = busy_before {
            self.world.breach(format!(
                "busy runner {runner} had its instance {instance_id} terminated without force"
            ));
        }
        Ok(())
    }
    async fn describe(&self) -> Result<Vec<Instance>, FleetError> {
        self.switch.pass().await;
        self.world.fleet.describe().await
    }
}

#[async_trait]
impl Forge for Gate {
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request: &JitRequest,
    ) -> Result<JitConfig, ForgeError> {
        self.switch.pass().await;
        self.world.forge.generate_jit_config(scope, request).await
    }
    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError> {
        self.switch.pass().await;
        self.world.forge.remove_runner(scope, runner_id).await
    }
    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        self.switch.pass().await;
        self.world.forge.get_runner(scope, runner_id).await
    }
    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError> {
        self.switch.pass().await;
        self.world.forge.list_runners(scope).await
    }
    async fn job_state(
        &self,
        installation_id: Option<u64>,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError> {
        self.switch.pass().await;
        let forge = &self.world.forge;
        forge.job_state(installation_id, owner, repo, job_id).await
    }
}

#[async_trait]
impl JitConfigStore for Gate {
    async fn put(
        &self,
        instance_id: &str,
        runner_name: &str,
        jit: &JitConfig,
    ) -> Result<(), JitStoreError> {
        self.switch.pass().await;
        self.world
            .jit_store
            .put(instance_id, runner_name, jit)
            .await
    }
    async fn delete(&self, instance_id: &str) -> Result<(), JitStoreError> {
        self.switch.pass().await;
        self.world.jit_store.delete(instance_id).await
    }
}

#[async_trait]
impl JobQueue for Gate {
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError> {
        self.switch.pass().await;
        self.world.queue.send(message).await
    }
    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError> {
        self.switch.pass().await;
        self.world.queue.send_after(message, delay).await
    }
}

#[async_trait]
impl HookDeliveries for Gate {
    async fn list_deliveries(&self, cursor: Option<&str>) -> Result<DeliveryPage, ForgeError> {
        self.switch.pass().await;
        self.world.deliveries.list_deliveries(cursor).await
    }
    /// GitHub takes the request and, later, makes the delivery (the schedule plays it).
    async fn redeliver(&self, id: u64) -> Result<(), ForgeError> {
        self.switch.pass().await;
        self.world.deliveries.redeliver(id).await?;
        self.world.redeliver(id);
        Ok(())
    }
}

//! Crash injection for the scaler: wrappers around every port it calls (store, launcher,
//! forge, JIT secrets, queue) that share one [`CrashSwitch`]. Armed with `n`, the switch
//! lets `n` external calls through and stops the caller dead before call `n + 1`: that
//! call never starts and never returns, as when the process dies there. A test races the
//! handler against [`CrashSwitch::crashed`] and drops the handler when it fires — a
//! crash between two external calls, by a hook and not by a sleep.

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

/// Counts external calls and stops the one past the armed count.
#[derive(Debug)]
pub struct CrashSwitch {
    calls: AtomicUsize,
    crash_before: AtomicUsize,
    crashed: Notify,
}

impl Default for CrashSwitch {
    fn default() -> Self {
        CrashSwitch {
            calls: AtomicUsize::new(0),
            crash_before: AtomicUsize::new(usize::MAX),
            crashed: Notify::new(),
        }
    }
}

impl CrashSwitch {
    pub fn new() -> Arc<CrashSwitch> {
        Arc::new(CrashSwitch::default())
    }

    /// Lets the next `calls` external calls through and stops the one after.
    pub fn arm(&self, calls: usize) {
        self.calls.store(0, Ordering::SeqCst);
        self.crash_before
            .store(calls.saturating_add(1), Ordering::SeqCst);
    }

    /// Lets every call through.
    pub fn disarm(&self) {
        self.crash_before.store(usize::MAX, Ordering::SeqCst);
    }

    /// External calls made (or stopped) since the last `arm`.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
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

/// A port wrapped with the switch.
pub struct Crashing<T: ?Sized> {
    inner: Arc<T>,
    switch: Arc<CrashSwitch>,
}

impl<T: ?Sized> Crashing<T> {
    pub fn new(inner: Arc<T>, switch: &Arc<CrashSwitch>) -> Arc<Crashing<T>> {
        Arc::new(Crashing {
            inner,
            switch: switch.clone(),
        })
    }
}

#[async_trait]
impl RunnerStore for Crashing<dyn RunnerStore> {
    async fn record_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError> {
        self.switch.pass().await;
        self.inner.record_job(job).await
    }
    async fn get_job(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        self.switch.pass().await;
        self.inner.get_job(job_id).await
    }
    async fn advance_job(
        &self,
        job: &JobRecord,
        status: JobStatus,
        runner_name: Option<&str>,
    ) -> Result<(), StoreError> {
        self.switch.pass().await;
        self.inner.advance_job(job, status, runner_name).await
    }
    async fn claim_job(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<Claim, StoreError> {
        self.switch.pass().await;
        self.inner.claim_job(job_id, runner, max_runners).await
    }
    async fn reserve_runner(
        &self,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.inner.reserve_runner(runner, max_runners).await
    }
    async fn unclaim_job(&self, job_id: u64, runner_name: &str) -> Result<(), StoreError> {
        self.switch.pass().await;
        self.inner.unclaim_job(job_id, runner_name).await
    }
    async fn hand_over_claim(
        &self,
        hand_over: &ClaimHandOver,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.inner.hand_over_claim(hand_over, at).await
    }
    async fn get_runner(&self, name: &str) -> Result<Option<RunnerRecord>, StoreError> {
        self.switch.pass().await;
        self.inner.get_runner(name).await
    }
    async fn update_runner(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<RunnerRecord, StoreError> {
        self.switch.pass().await;
        self.inner.update_runner(name, update, at).await
    }
    async fn transition(
        &self,
        name: &str,
        transition: &Transition,
    ) -> Result<RunnerRecord, StoreError> {
        self.switch.pass().await;
        self.inner.transition(name, transition).await
    }
    async fn fail_creation(
        &self,
        name: &str,
        at: OffsetDateTime,
        error: &str,
    ) -> Result<RunnerRecord, StoreError> {
        self.switch.pass().await;
        self.inner.fail_creation(name, at, error).await
    }
    async fn finish_deletion(
        &self,
        name: &str,
        at: OffsetDateTime,
        ttl: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.switch.pass().await;
        self.inner.finish_deletion(name, at, ttl).await
    }
    async fn runners_in_status(
        &self,
        status: InstanceStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        self.switch.pass().await;
        self.inner.runners_in_status(status, due, limit).await
    }
    async fn get_pool(&self, name: &str) -> Result<PoolRecord, StoreError> {
        self.switch.pass().await;
        self.inner.get_pool(name).await
    }
    async fn jobs_in_status(
        &self,
        status: JobStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.switch.pass().await;
        self.inner.jobs_in_status(status, due, limit).await
    }
    async fn recheck_job_at(&self, job_id: u64, at: OffsetDateTime) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.inner.recheck_job_at(job_id, at).await
    }
    async fn recheck_runner_at(
        &self,
        name: &str,
        status: InstanceStatus,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.inner.recheck_runner_at(name, status, at).await
    }
    async fn pool_counter(&self, name: &str) -> Result<PoolCounter, StoreError> {
        self.switch.pass().await;
        self.inner.pool_counter(name).await
    }
    async fn repair_pool_counter(
        &self,
        name: &str,
        observed: &PoolCounter,
        slots_used: u32,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.switch.pass().await;
        self.inner
            .repair_pool_counter(name, observed, slots_used, at)
            .await
    }
}

#[async_trait]
impl Launcher for Crashing<dyn Launcher> {
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError> {
        self.switch.pass().await;
        self.inner.launch(request).await
    }
}

#[async_trait]
impl Forge for Crashing<dyn Forge> {
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request: &JitRequest,
    ) -> Result<JitConfig, ForgeError> {
        self.switch.pass().await;
        self.inner.generate_jit_config(scope, request).await
    }
    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError> {
        self.switch.pass().await;
        self.inner.remove_runner(scope, runner_id).await
    }
    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        self.switch.pass().await;
        self.inner.get_runner(scope, runner_id).await
    }
    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError> {
        self.switch.pass().await;
        self.inner.list_runners(scope).await
    }
    async fn find_runner(
        &self,
        scope: &RunnerScope,
        name: &str,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        self.switch.pass().await;
        self.inner.find_runner(scope, name).await
    }
    async fn job_state(
        &self,
        installation_id: Option<u64>,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError> {
        self.switch.pass().await;
        self.inner
            .job_state(installation_id, owner, repo, job_id)
            .await
    }
}

#[async_trait]
impl JitConfigStore for Crashing<dyn JitConfigStore> {
    async fn put(
        &self,
        instance_id: &str,
        runner_name: &str,
        jit: &JitConfig,
    ) -> Result<(), JitStoreError> {
        self.switch.pass().await;
        self.inner.put(instance_id, runner_name, jit).await
    }
    async fn delete(&self, instance_id: &str) -> Result<(), JitStoreError> {
        self.switch.pass().await;
        self.inner.delete(instance_id).await
    }
}

#[async_trait]
impl JobQueue for Crashing<dyn JobQueue> {
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError> {
        self.switch.pass().await;
        self.inner.send(message).await
    }
    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError> {
        self.switch.pass().await;
        self.inner.send_after(message, delay).await
    }
}

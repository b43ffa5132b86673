//! The claims of one batch take the pool item one after another: DynamoDB cancels a
//! transaction on an item another transaction holds, so claims sent all at once would
//! mostly conflict with each other.

use super::*;
use crate::handlers::test_support::{message, now, World};
use crate::lifecycle::InstanceStatus;
use crate::memory::MemoryStore;
use crate::message::MessageKind;
use crate::model::{JobRecord, JobStatus, PoolRecord};
use std::sync::atomic::{AtomicU32, Ordering};

/// A table whose claims take a while and are refused while another claim is under way,
/// as DynamoDB refuses overlapping transactions on the pool item.
struct OverlapRefusingStore {
    inner: Arc<MemoryStore>,
    claiming: AtomicU32,
    overlaps: AtomicU32,
}

#[async_trait::async_trait]
impl RunnerStore for OverlapRefusingStore {
    async fn claim_job(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
        max: u32,
    ) -> Result<Claim, StoreError> {
        if self.claiming.fetch_add(1, Ordering::SeqCst) > 0 {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
        self.claiming.fetch_sub(1, Ordering::SeqCst);
        self.inner.claim_job(job_id, runner, max).await
    }
    async fn record_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError> {
        self.inner.record_job(job).await
    }
    async fn get_job(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        self.inner.get_job(job_id).await
    }
    async fn advance_job(
        &self,
        job: &JobRecord,
        status: JobStatus,
        runner: Option<&str>,
    ) -> Result<(), StoreError> {
        self.inner.advance_job(job, status, runner).await
    }
    async fn reserve_runner(&self, runner: &RunnerRecord, max: u32) -> Result<bool, StoreError> {
        self.inner.reserve_runner(runner, max).await
    }
    async fn unclaim_job(&self, job_id: u64, runner: &str) -> Result<(), StoreError> {
        self.inner.unclaim_job(job_id, runner).await
    }
    async fn hand_over_claim(
        &self,
        hand_over: &ClaimHandOver,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.inner.hand_over_claim(hand_over, at).await
    }
    async fn get_runner(&self, name: &str) -> Result<Option<RunnerRecord>, StoreError> {
        self.inner.get_runner(name).await
    }
    async fn update_runner(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<RunnerRecord, StoreError> {
        self.inner.update_runner(name, update, at).await
    }
    async fn transition(
        &self,
        name: &str,
        transition: &Transition,
    ) -> Result<RunnerRecord, StoreError> {
        self.inner.transition(name, transition).await
    }
    async fn fail_creation(
        &self,
        name: &str,
        at: OffsetDateTime,
        error: &str,
    ) -> Result<RunnerRecord, StoreError> {
        self.inner.fail_creation(name, at, error).await
    }
    async fn finish_deletion(
        &self,
        name: &str,
        at: OffsetDateTime,
        ttl: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.inner.finish_deletion(name, at, ttl).await
    }
    async fn runners_in_status(
        &self,
        status: InstanceStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        self.inner.runners_in_status(status, due, limit).await
    }
    async fn get_pool(&self, name: &str) -> Result<PoolRecord, StoreError> {
        self.inner.get_pool(name).await
    }
    async fn jobs_in_status(
        &self,
        status: JobStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.inner.jobs_in_status(status, due, limit).await
    }
    async fn recheck_job_at(&self, job_id: u64, at: OffsetDateTime) -> Result<bool, StoreError> {
        self.inner.recheck_job_at(job_id, at).await
    }
    async fn recheck_runner_at(
        &self,
        name: &str,
        status: InstanceStatus,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.inner.recheck_runner_at(name, status, at).await
    }
    async fn pool_counter(&self, name: &str) -> Result<PoolCounter, StoreError> {
        self.inner.pool_counter(name).await
    }
    async fn repair_pool_counter(
        &self,
        name: &str,
        observed: &PoolCounter,
        slots: u32,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.inner
            .repair_pool_counter(name, observed, slots, at)
            .await
    }
}

#[tokio::test(start_paused = true)]
async fn the_claims_of_a_batch_never_hold_the_pool_item_at_once() {
    let world = World::new(20);
    let store = Arc::new(OverlapRefusingStore {
        inner: world.store.clone(),
        claiming: AtomicU32::new(0),
        overlaps: AtomicU32::new(0),
    });
    let scaler = Arc::new(Scaler::new(
        world.config.clone(),
        store.clone(),
        world.fleet.clone(),
        world.forge.clone(),
        world.jit_store.clone(),
        world.queue.clone(),
    ));
    let items = (1..=10)
        .map(|job| BatchItem {
            message_id: format!("m{job}"),
            body: message(MessageKind::Queued, job, None).encode(),
        })
        .collect();
    let failed = scaler.handle_batch(items, now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(world.fleet.launched(), 10);
    assert_eq!(
        store.overlaps.load(Ordering::SeqCst),
        0,
        "claims overlapped"
    );
}

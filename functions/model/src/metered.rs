//! The AWS ports behind AWS's quotas: each call is counted, waits a drawn latency, and is
//! refused (as the SDK would, after its own retries) when its bucket is empty. The
//! in-memory fakes behind them keep every contract; only time and refusals are added.

use crate::bucket::BucketSpec;
use crate::cloud::{Caller, Cloud};
use crate::report::Timeline;
use crate::sqs::SimQueue;
use async_trait::async_trait;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::memory::{FakeFleet, InjectedFailure, MemoryJitStore, MemoryStore};
use ephemera_core::message::QueueMessage;
use ephemera_core::model::{JobRecord, JobStatus, PoolRecord, RunnerRecord};
use ephemera_core::ports::*;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::mpsc::UnboundedSender;

/// The SDK's standard retry mode: 3 attempts, jittered exponential backoff (assumed
/// base of one second).
const SDK_ATTEMPTS: u32 = 3;

/// The one pool's item: every claim and release is a transaction on it.
const POOL_ITEM: &str = "POOL#linux";

/// Spends a bucket as the SDK would: retried with backoff, then refused.
async fn sdk_take(
    cloud: &Cloud,
    service: &'static str,
    name: &str,
    spec: BucketSpec,
    cost: f64,
) -> bool {
    for attempt in 1..=SDK_ATTEMPTS {
        if cloud.take(name, spec, cost).is_ok() {
            return true;
        }
        cloud.throttled(service);
        if attempt < SDK_ATTEMPTS {
            let backoff = cloud.uniform() * f64::from(1u32 << (attempt - 1));
            tokio::time::sleep(Duration::from_secs_f64(backoff)).await;
        }
    }
    false
}

fn refused(what: &'static str) -> Cause {
    Box::new(InjectedFailure(what))
}

/// The table: DynamoDB's operations, its per-partition write rate on the pool item and
/// conflicts between transactions that hold it at once.
pub struct MeteredStore {
    pub inner: Arc<MemoryStore>,
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
    pub timeline: Arc<Timeline>,
}

impl MeteredStore {
    async fn call(&self, operation: &'static str) {
        self.cloud.count(self.caller, "DynamoDB", operation);
        self.cloud.wait(self.cloud.latencies.dynamodb).await;
    }

    /// A TransactWriteItems that writes the pool item.
    async fn transact(&self) -> Result<(), StoreError> {
        self.cloud
            .count(self.caller, "DynamoDB", "TransactWriteItems");
        let latency = self.cloud.draw(self.cloud.latencies.dynamodb_transaction);
        let spec = BucketSpec {
            capacity: self.cloud.quotas.dynamodb_partition_wcu,
            per_second: self.cloud.quotas.dynamodb_partition_wcu,
        };
        if !sdk_take(&self.cloud, "DynamoDB", POOL_ITEM, spec, 2.0).await {
            return Err(StoreError::Throttled(refused("pool partition")));
        }
        let held = self.cloud.hold(POOL_ITEM, latency);
        tokio::time::sleep(latency).await;
        if held {
            Ok(())
        } else {
            Err(StoreError::Conflict(POOL_ITEM.to_owned()))
        }
    }
}

#[async_trait]
impl RunnerStore for MeteredStore {
    async fn record_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError> {
        self.call("PutItem").await;
        self.inner.record_job(job).await
    }
    async fn get_job(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        self.call("GetItem").await;
        self.inner.get_job(job_id).await
    }
    async fn advance_job(
        &self,
        job: &JobRecord,
        status: JobStatus,
        runner: Option<&str>,
    ) -> Result<(), StoreError> {
        self.call("UpdateItem").await;
        self.inner.advance_job(job, status, runner).await
    }
    async fn claim_job(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
        max: u32,
    ) -> Result<Claim, StoreError> {
        self.transact().await?;
        self.inner.claim_job(job_id, runner, max).await
    }
    async fn reserve_runner(&self, runner: &RunnerRecord, max: u32) -> Result<bool, StoreError> {
        self.transact().await?;
        self.inner.reserve_runner(runner, max).await
    }
    async fn unclaim_job(&self, job_id: u64, runner: &str) -> Result<(), StoreError> {
        self.call("UpdateItem").await;
        self.inner.unclaim_job(job_id, runner).await
    }
    async fn hand_over_claim(
        &self,
        hand_over: &ClaimHandOver,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.call("TransactWriteItems").await;
        self.inner.hand_over_claim(hand_over, at).await
    }
    async fn get_runner(&self, name: &str) -> Result<Option<RunnerRecord>, StoreError> {
        self.call("GetItem").await;
        self.inner.get_runner(name).await
    }
    async fn update_runner(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<RunnerRecord, StoreError> {
        self.call("UpdateItem").await;
        let record = self.inner.update_runner(name, update, at).await?;
        if update.instance_id.is_some() {
            self.timeline.launched(record.job_queued_at);
        }
        Ok(record)
    }
    async fn transition(
        &self,
        name: &str,
        transition: &Transition,
    ) -> Result<RunnerRecord, StoreError> {
        self.call("UpdateItem").await;
        let record = self.inner.transition(name, transition).await?;
        if transition.to == InstanceStatus::Running {
            self.timeline.registered();
        }
        Ok(record)
    }
    async fn fail_creation(
        &self,
        name: &str,
        at: OffsetDateTime,
        error: &str,
    ) -> Result<RunnerRecord, StoreError> {
        self.transact().await?;
        self.inner.fail_creation(name, at, error).await
    }
    async fn finish_deletion(
        &self,
        name: &str,
        at: OffsetDateTime,
        ttl: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.transact().await?;
        self.inner.finish_deletion(name, at, ttl).await
    }
    async fn runners_in_status(
        &self,
        status: InstanceStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        self.call("Query").await;
        self.inner.runners_in_status(status, due, limit).await
    }
    async fn get_pool(&self, name: &str) -> Result<PoolRecord, StoreError> {
        self.call("GetItem").await;
        self.inner.get_pool(name).await
    }
    async fn jobs_in_status(
        &self,
        status: JobStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.call("Query").await;
        self.inner.jobs_in_status(status, due, limit).await
    }
    async fn recheck_job_at(&self, job_id: u64, at: OffsetDateTime) -> Result<bool, StoreError> {
        self.call("UpdateItem").await;
        self.inner.recheck_job_at(job_id, at).await
    }
    async fn recheck_runner_at(
        &self,
        name: &str,
        status: InstanceStatus,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.call("UpdateItem").await;
        self.inner.recheck_runner_at(name, status, at).await
    }
    async fn pool_counter(&self, name: &str) -> Result<PoolCounter, StoreError> {
        self.call("GetItem").await;
        self.inner.pool_counter(name).await
    }
    async fn repair_pool_counter(
        &self,
        name: &str,
        observed: &PoolCounter,
        slots: u32,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.call("UpdateItem").await;
        self.inner
            .repair_pool_counter(name, observed, slots, at)
            .await
    }
}

/// EC2: CreateFleet's request bucket and the instances it launches (resource bucket),
/// TerminateInstances' two buckets, DescribeInstances'. Each launched instance is
/// announced on `launched`, for its runner agent.
pub struct MeteredFleet {
    pub inner: Arc<FakeFleet>,
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
    pub timeline: Arc<Timeline>,
    pub launched: UnboundedSender<String>,
}

#[async_trait]
impl Launcher for MeteredFleet {
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError> {
        let cloud = &self.cloud;
        cloud.count(self.caller, "EC2", "CreateFleet");
        let quotas = &cloud.quotas;
        let allowed = sdk_take(cloud, "EC2", "CreateFleet", quotas.ec2_create_fleet, 1.0).await
            && sdk_take(
                cloud,
                "EC2",
                "launch-resource",
                quotas.ec2_launch_resource,
                f64::from(request.count),
            )
            .await;
        cloud.wait(cloud.latencies.ec2_create_fleet).await;
        if !allowed {
            return Err(FleetError::Throttled(refused("RequestLimitExceeded")));
        }
        self.inner.launch_at(self.timeline.now());
        let launch = self.inner.launch(request).await?;
        for id in &launch.instance_ids {
            let _ = self.launched.send(id.clone());
        }
        Ok(launch)
    }
}

#[async_trait]
impl Fleet for MeteredFleet {
    async fn terminate(&self, instance_id: &str) -> Result<(), FleetError> {
        let cloud = &self.cloud;
        cloud.count(self.caller, "EC2", "TerminateInstances");
        let quotas = &cloud.quotas;
        let allowed = sdk_take(
            cloud,
            "EC2",
            "TerminateInstances",
            quotas.ec2_terminate,
            1.0,
        )
        .await
            && sdk_take(
                cloud,
                "EC2",
                "terminate-resource",
                quotas.ec2_terminate_resource,
                1.0,
            )
            .await;
        cloud.wait(cloud.latencies.ec2_other).await;
        if !allowed {
            return Err(FleetError::Throttled(refused("RequestLimitExceeded")));
        }
        self.inner.terminate(instance_id).await
    }

    async fn describe(&self) -> Result<Vec<Instance>, FleetError> {
        let cloud = &self.cloud;
        cloud.count(self.caller, "EC2", "DescribeInstances");
        let allowed = sdk_take(
            cloud,
            "EC2",
            "DescribeInstances",
            cloud.quotas.ec2_describe,
            1.0,
        )
        .await;
        cloud.wait(cloud.latencies.ec2_other).await;
        if !allowed {
            return Err(FleetError::Throttled(refused("RequestLimitExceeded")));
        }
        self.inner.describe().await
    }
}

/// Where JIT configs wait: one DynamoDB item per instance (ephemera, after the JIT
/// delivery change), or an SSM parameter (the peer), written at SSM's rate.
pub struct MeteredJitStore {
    pub inner: Arc<MemoryJitStore>,
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
    pub through_ssm: bool,
}

#[async_trait]
impl JitConfigStore for MeteredJitStore {
    async fn put(
        &self,
        instance_id: &str,
        runner: &str,
        config: &JitConfig,
    ) -> Result<(), JitStoreError> {
        let cloud = &self.cloud;
        if self.through_ssm {
            cloud.count(self.caller, "SSM", "PutParameter");
            let allowed = sdk_take(cloud, "SSM", "PutParameter", cloud.quotas.ssm_put, 1.0).await;
            cloud.wait(cloud.latencies.ssm).await;
            if !allowed {
                return Err(JitStoreError::Throttled(refused("ThrottlingException")));
            }
        } else {
            cloud.count(self.caller, "DynamoDB", "PutItem");
            cloud.wait(cloud.latencies.dynamodb).await;
        }
        self.inner.put(instance_id, runner, config).await
    }

    async fn delete(&self, instance_id: &str) -> Result<(), JitStoreError> {
        let (service, operation) = if self.through_ssm {
            ("SSM", "DeleteParameter")
        } else {
            ("DynamoDB", "DeleteItem")
        };
        self.cloud.count(self.caller, service, operation);
        self.cloud.wait(self.cloud.latencies.dynamodb).await;
        self.inner.delete(instance_id).await
    }
}

/// SQS SendMessage into the model's queue (standard queues are not throttled).
pub struct MeteredQueue {
    pub inner: Arc<SimQueue>,
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
}

#[async_trait]
impl JobQueue for MeteredQueue {
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError> {
        self.send_after(message, Duration::ZERO).await
    }

    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError> {
        self.cloud.count(self.caller, "SQS", "SendMessage");
        self.cloud.wait(self.cloud.latencies.sqs).await;
        self.inner.push(message, delay);
        Ok(())
    }
}

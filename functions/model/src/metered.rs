//! The AWS ports behind AWS's quotas: each call is counted, waits a drawn latency, and is
//! refused (as the SDK would, after its own retries) when its bucket is empty. The
//! in-memory fakes behind them keep every contract; only time and refusals are added,
//! by a hook per service around the port ([`Intercept`]).

use crate::bucket::BucketSpec;
use crate::cloud::{Caller, Cloud};
use crate::report::Timeline;
use crate::sqs::SimQueue;
use async_trait::async_trait;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::memory::{
    Arg, Call, FakeFleet, Hook, InjectedFailure, Intercept, MemoryJitStore, MemoryStore, Refusal,
};
use ephemera_core::message::QueueMessage;
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::*;
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// The SDK's standard retry mode: 3 attempts, jittered exponential backoff (assumed
/// base of one second).
pub const SDK_ATTEMPTS: u32 = 3;

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
pub type MeteredStore = Intercept<MemoryStore, StoreMeter>;

/// What [`MeteredStore`] adds to each call.
pub struct StoreMeter {
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
    pub timeline: Arc<Timeline>,
}

impl StoreMeter {
    async fn call(&self, operation: &'static str) {
        self.cloud.count(self.caller, "DynamoDB", operation);
        self.cloud.wait(self.cloud.latencies.dynamodb).await;
    }

    /// A TransactWriteItems that writes the pool item.
    async fn transact(&self) -> Result<(), Refusal> {
        self.cloud
            .count(self.caller, "DynamoDB", "TransactWriteItems");
        let latency = self.cloud.draw(self.cloud.latencies.dynamodb_transaction);
        let spec = BucketSpec {
            capacity: self.cloud.quotas.dynamodb_partition_wcu,
            per_second: self.cloud.quotas.dynamodb_partition_wcu,
        };
        if !sdk_take(&self.cloud, "DynamoDB", POOL_ITEM, spec, 2.0).await {
            return Err(Refusal::Throttled(refused("pool partition")));
        }
        let held = self.cloud.hold(POOL_ITEM, latency);
        tokio::time::sleep(latency).await;
        if held {
            Ok(())
        } else {
            Err(Refusal::Conflict(POOL_ITEM.to_owned()))
        }
    }
}

#[async_trait]
impl Hook for StoreMeter {
    async fn before(&self, call: &Call<'_>) -> Result<(), Refusal> {
        let operation = match call.name {
            "claim_job" | "reserve_runner" | "fail_creation" | "finish_deletion" => {
                return self.transact().await;
            }
            // The hand-over's job item and two runner records, no pool item.
            "hand_over_claim" => "TransactWriteItems",
            "record_job" => "PutItem",
            "get_job" | "get_runner" | "get_pool" | "pool_counter" => "GetItem",
            "runners_in_status" | "jobs_in_status" => "Query",
            _ => "UpdateItem",
        };
        self.call(operation).await;
        Ok(())
    }

    fn after(&self, call: &Call<'_>, outcome: &dyn Any) {
        let Some(Ok(record)) = outcome.downcast_ref::<Result<RunnerRecord, StoreError>>() else {
            return;
        };
        match call.args {
            [_, Arg::Update(update), _] if update.instance_id.is_some() => {
                self.timeline.launched(record.job_queued_at);
            }
            [_, Arg::Transition(transition)] if transition.to == InstanceStatus::Running => {
                self.timeline.registered();
            }
            _ => {}
        }
    }
}

/// EC2: CreateFleet's request bucket and the instances it launches (resource bucket),
/// TerminateInstances' two buckets, DescribeInstances'. Each launched instance is
/// announced on `launched`, for its runner agent.
pub type MeteredFleet = Intercept<FakeFleet, FleetMeter>;

/// What [`MeteredFleet`] adds to each call.
pub struct FleetMeter {
    pub fleet: Arc<FakeFleet>,
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
    pub timeline: Arc<Timeline>,
    pub launched: UnboundedSender<String>,
}

impl FleetMeter {
    async fn launch(&self, request: &FleetRequest) -> Result<(), Refusal> {
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
            return Err(Refusal::Throttled(refused("RequestLimitExceeded")));
        }
        self.fleet.launch_at(self.timeline.now());
        Ok(())
    }

    async fn terminate(&self) -> Result<(), Refusal> {
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
            return Err(Refusal::Throttled(refused("RequestLimitExceeded")));
        }
        Ok(())
    }

    async fn describe(&self) -> Result<(), Refusal> {
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
            return Err(Refusal::Throttled(refused("RequestLimitExceeded")));
        }
        Ok(())
    }
}

#[async_trait]
impl Hook for FleetMeter {
    async fn before(&self, call: &Call<'_>) -> Result<(), Refusal> {
        match (call.name, call.args) {
            ("launch", [Arg::Launch(request)]) => self.launch(request).await,
            ("terminate", _) => self.terminate().await,
            _ => self.describe().await,
        }
    }

    fn after(&self, _call: &Call<'_>, outcome: &dyn Any) {
        if let Some(Ok(launch)) = outcome.downcast_ref::<Result<FleetLaunch, FleetError>>() {
            for id in &launch.instance_ids {
                let _ = self.launched.send(id.clone());
            }
        }
    }
}

/// Where JIT configs wait: one DynamoDB item per instance (ephemera, after the JIT
/// delivery change), or an SSM parameter (the peer), written at SSM's rate.
pub type MeteredJitStore = Intercept<MemoryJitStore, JitStoreMeter>;

/// What [`MeteredJitStore`] adds to each call.
pub struct JitStoreMeter {
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
    pub through_ssm: bool,
}

#[async_trait]
impl Hook for JitStoreMeter {
    async fn before(&self, call: &Call<'_>) -> Result<(), Refusal> {
        let cloud = &self.cloud;
        if call.is("delete") {
            let (service, operation) = if self.through_ssm {
                ("SSM", "DeleteParameter")
            } else {
                ("DynamoDB", "DeleteItem")
            };
            cloud.count(self.caller, service, operation);
            cloud.wait(cloud.latencies.dynamodb).await;
        } else if self.through_ssm {
            cloud.count(self.caller, "SSM", "PutParameter");
            let allowed = sdk_take(cloud, "SSM", "PutParameter", cloud.quotas.ssm_put, 1.0).await;
            cloud.wait(cloud.latencies.ssm).await;
            if !allowed {
                return Err(Refusal::Throttled(refused("ThrottlingException")));
            }
        } else {
            cloud.count(self.caller, "DynamoDB", "PutItem");
            cloud.wait(cloud.latencies.dynamodb).await;
        }
        Ok(())
    }
}

/// SQS SendMessage into the model's queue (standard queues are not throttled).
pub type MeteredQueue = Intercept<SimQueue, QueueMeter>;

/// What [`MeteredQueue`] adds to each call.
pub struct QueueMeter {
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
}

#[async_trait]
impl Hook for QueueMeter {
    async fn before(&self, _call: &Call<'_>) -> Result<(), Refusal> {
        self.cloud.count(self.caller, "SQS", "SendMessage");
        self.cloud.wait(self.cloud.latencies.sqs).await;
        Ok(())
    }
}

#[async_trait]
impl JobQueue for SimQueue {
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError> {
        self.send_after(message, Duration::ZERO).await
    }

    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError> {
        self.push(message, delay);
        Ok(())
    }
}

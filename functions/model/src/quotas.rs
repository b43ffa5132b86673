//! Every figure the model runs on, with where it comes from. A figure nobody publishes
//! is marked "assumed". [`figures()`] lists them, each value written from the structs
//! below, into `bench/model.json`'s `quotas`, from which docs/performance.md's "The
//! quotas it runs on" table is rendered (`make docs-figures`).

use crate::bucket::BucketSpec;
use std::time::Duration;

/// The account's and the App's limits.
#[derive(Debug, Clone)]
pub struct Quotas {
    /// GitHub: points per minute per REST endpoint (a POST or DELETE costs 5, a GET 1).
    pub github_points: BucketSpec,
    /// GitHub: REST calls per hour per App installation in the `core` bucket (everything
    /// but runner registrations).
    pub github_core_hourly: u32,
    /// GitHub: runner registrations (generate-jitconfig) per hour per installation, in
    /// the `actions_runner_registration` bucket.
    pub github_registration_hourly: u32,
    /// GitHub's content-creation limit (80 a minute, 500 an hour), when it is applied to
    /// generate-jitconfig; GitHub does not say whether it is, so it is a setting, off
    /// by default.
    pub github_content_creation: Option<ContentCreation>,
    /// GitHub: runner registrations per organization, 1,500 every 5 minutes, shared by
    /// every App of the organization (a bucket of 1,500 refilled at 5 a second is
    /// assumed: GitHub gives the count and the window, not the shape); `None` lifts it.
    pub github_org_registrations: Option<BucketSpec>,
    /// GitHub: self-hosted runners registered at the same time in one runner group;
    /// generate-jitconfig past it is refused, not delayed.
    pub github_runners_per_group: u32,
    /// GitHub: concurrent requests.
    pub github_concurrent: u32,
    /// GitHub: the wait a secondary rate limit answer asks for.
    pub github_retry_after: Duration,
    /// EC2 CreateFleet: a mutating action's request bucket.
    pub ec2_create_fleet: BucketSpec,
    /// EC2: instances launched (the RunInstances resource bucket, which an instant fleet
    /// spends).
    pub ec2_launch_resource: BucketSpec,
    /// EC2 DescribeInstances with filters: a non-mutating action's bucket.
    pub ec2_describe: BucketSpec,
    /// EC2 TerminateInstances: request bucket, and resource bucket (instances).
    pub ec2_terminate: BucketSpec,
    pub ec2_terminate_resource: BucketSpec,
    /// DynamoDB: write capacity units per second on one partition (the pool item's).
    pub dynamodb_partition_wcu: f64,
    /// SSM PutParameter per second (standard throughput), the peer's JIT channel.
    pub ssm_put: BucketSpec,
    /// Lambda: concurrent executions in the account.
    pub lambda_account_concurrency: u32,
    /// Lambda SQS event source: concurrent batches at first, and added per minute.
    pub esm_initial: u32,
    pub esm_added_per_minute: u32,
}

impl Default for Quotas {
    fn default() -> Quotas {
        Quotas {
            github_points: BucketSpec {
                capacity: 900.0,
                per_second: 15.0,
            },
            github_core_hourly: 5_000,
            github_registration_hourly: 10_000,
            github_content_creation: None,
            github_org_registrations: Some(ORG_REGISTRATIONS),
            github_runners_per_group: 10_000,
            github_concurrent: 100,
            github_retry_after: Duration::from_secs(60),
            ec2_create_fleet: BucketSpec {
                capacity: 50.0,
                per_second: 5.0,
            },
            ec2_launch_resource: BucketSpec {
                capacity: 1_000.0,
                per_second: 2.0,
            },
            ec2_describe: BucketSpec {
                capacity: 100.0,
                per_second: 20.0,
            },
            ec2_terminate: BucketSpec {
                capacity: 100.0,
                per_second: 5.0,
            },
            ec2_terminate_resource: BucketSpec {
                capacity: 1_000.0,
                per_second: 20.0,
            },
            dynamodb_partition_wcu: 1_000.0,
            ssm_put: BucketSpec {
                capacity: 3.0,
                per_second: 3.0,
            },
            lambda_account_concurrency: 1_000,
            esm_initial: 5,
            esm_added_per_minute: 300,
        }
    }
}

/// GitHub's "Actions limits": 1,500 runner registrations every 5 minutes per
/// repository, organization or enterprise, as a bucket of 1,500 refilled at 1,500 / 300 s.
pub const ORG_REGISTRATIONS: BucketSpec = BucketSpec {
    capacity: 1_500.0,
    per_second: 1_500.0 / 300.0,
};

/// GitHub's secondary limit on requests that create content.
#[derive(Debug, Clone, Copy)]
pub struct ContentCreation {
    pub per_minute: BucketSpec,
    pub per_hour: u32,
}

impl ContentCreation {
    /// The figures of GitHub's "Rate limits for the REST API": no more than 80
    /// content-generating requests a minute and 500 an hour.
    pub fn documented() -> ContentCreation {
        ContentCreation {
            per_minute: BucketSpec {
                capacity: 80.0,
                per_second: 80.0 / 60.0,
            },
            per_hour: 500,
        }
    }
}

/// A latency distribution: log-normal with this median and 99th percentile.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub median: Duration,
    pub p99: Duration,
}

const fn ms(median: u64, p99: u64) -> Latency {
    Latency {
        median: Duration::from_millis(median),
        p99: Duration::from_millis(p99),
    }
}

/// How long each kind of call takes (none of these is published: all assumed).
#[derive(Debug, Clone, Copy)]
pub struct Latencies {
    pub dynamodb: Latency,
    pub dynamodb_transaction: Latency,
    pub sqs: Latency,
    pub ec2_create_fleet: Latency,
    pub ec2_other: Latency,
    pub github: Latency,
    pub ssm: Latency,
    /// Lambda's own start of an invocation (warm).
    pub lambda_invoke: Latency,
    /// From an instance's launch to its bootstrap reading the JIT config: the stock
    /// host's stages ([`crate::host::boot_stages`]).
    pub instance_boot: Latency,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies {
            dynamodb: ms(6, 25),
            dynamodb_transaction: ms(15, 60),
            sqs: ms(10, 40),
            ec2_create_fleet: ms(1_500, 5_000),
            ec2_other: ms(300, 1_200),
            github: ms(250, 1_200),
            ssm: ms(30, 120),
            lambda_invoke: ms(5, 30),
            instance_boot: crate::host::boot_latency(crate::host::Host::Stock),
        }
    }
}

/// What an operator sets: the scaler's event source and its pace.
#[derive(Debug, Clone)]
pub struct Settings {
    pub name: String,
    /// `ScalerMaxConcurrency` in template.yaml (SQS event source maximum concurrency).
    pub scaler_max_concurrency: u32,
    /// The event source's batch size (template.yaml: 10).
    pub batch_size: usize,
    /// The queue's visibility timeout (template.yaml: 180 s).
    pub visibility: Duration,
    /// The redrive policy's maxReceiveCount (template.yaml: 5).
    pub max_receives: u32,
    /// The scaler's timeout (template.yaml: 30 s).
    pub scaler_timeout: Duration,
    /// Registrations a minute for the App, shared by the scaler's invocations; `None`
    /// runs the scaler unpaced.
    pub registrations_per_minute: Option<f64>,
    /// `WebhookReservedConcurrency` in template.yaml: the webhook's executions at most,
    /// kept from the rest of the account; `None` reserves nothing (the template's 0).
    pub webhook_reserved_concurrency: Option<u32>,
    /// GitHub Apps with the same installations, each with its own buckets and pace; the
    /// scaler's execution environments take them in turn (the reaper uses the first).
    pub github_apps: u32,
}

impl Settings {
    /// ephemera's defaults: template.yaml's, and the pace at GitHub's documented 900
    /// points a minute (180 registrations).
    pub fn default_settings() -> Settings {
        Settings {
            name: "default".to_owned(),
            scaler_max_concurrency: 5,
            batch_size: 10,
            visibility: Duration::from_secs(180),
            max_receives: 5,
            scaler_timeout: Duration::from_secs(30),
            registrations_per_minute: Some(180.0),
            webhook_reserved_concurrency: Some(50),
            github_apps: 1,
        }
    }
}

pub mod figures;
pub use figures::{figures, Figure};

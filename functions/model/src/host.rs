//! The host in the model: what happens between a job being queued on GitHub and GitHub
//! starting it on a runner, split into stages, each a latency distribution with its source
//! (or marked assumed, with the reason). [`crate::start`] draws and adds them up.
//!
//! The ways ephemera can host a job, and the peer's one:
//! - [`Host::Stock`]: the stock AMI; `infra/runner/bootstrap.sh` installs the packages and
//!   downloads the runner from the deployment's bucket at boot (today's default);
//! - [`Host::Baked`]: the image `infra/image/template.yaml` bakes, its runner the newest
//!   release; nothing installed at boot;
//! - [`Host::BakedStale`]: the same image once GitHub has released a newer runner: the
//!   bootstrap swaps the runner from the deployment's bucket before it starts;
//! - [`Host::BakedStaleSelfUpdate`]: the stale image without the bucket (before it): GitHub
//!   has the runner update itself once the job is assigned, on the job's time;
//! - [`Host::Stopped`]: an instance of the baked image that booted once, ran the bootstrap
//!   up to reading its JIT config with Docker up, and stopped: the scaler takes it, writes
//!   its JIT config under its ARN and starts it; cloud-init's per-boot copy of the bootstrap resumes it;
//! - [`Host::Warm`]: a warm pool runner, already online: GitHub only assigns the job;
//! - [`peer_stages`]: terraform-aws-github-runner as its defaults deploy it.
//!
//! The stages' figures and sources are in [`crate::stages`].
//!
//! Each mode is one job on a quiet pool: the burst tables say what queueing behind the
//! quotas adds.

use crate::quotas::{Latencies, Latency};
use crate::stages::*;
use std::time::Duration;

/// Where a stage's figure comes from: a published source, or assumed with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Cited(&'static str),
    Assumed(&'static str),
}

impl Source {
    /// As bench/model.json and the pages write it.
    pub fn text(self) -> String {
        match self {
            Source::Cited(source) => source.to_owned(),
            Source::Assumed(reason) => format!("assumed: {reason}"),
        }
    }
}

/// What a stage waits on, for the composition: the control plane before the launch, the
/// JIT config's delivery (which runs while the instance boots), or the host itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Track {
    /// From the job queued to the launch requested (CreateFleet answered).
    Control,
    /// From the launch to the JIT config written where the instance reads it.
    Registration,
    /// From the launch to the instance ready to read its JIT config.
    Boot,
    /// On the instance, once both the boot and the JIT config are done: the read, the
    /// runner's start and registration.
    Online,
    /// From the runner online to the job started.
    Assignment,
}

/// One stage of a job's start.
#[derive(Debug, Clone, Copy)]
pub struct Stage {
    pub name: &'static str,
    pub track: Track,
    /// The stage's latency (its body, when it has a [`Late`] share).
    pub latency: Latency,
    /// A share of draws from a second, later distribution, where the source publishes a
    /// bimodal one that no single log-normal fits.
    pub late: Option<Late>,
    pub source: Source,
}

/// The late part of a bimodal stage: `share` of its draws come from `latency`.
#[derive(Debug, Clone, Copy)]
pub struct Late {
    pub share: f64,
    pub latency: Latency,
}

/// How ephemera hosts a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Stock,
    Baked,
    /// A baked image behind the newest runner release, its runner swapped from the bucket.
    BakedStale,
    /// A baked image behind the newest runner release, updated by GitHub after assignment.
    BakedStaleSelfUpdate,
    /// A stopped instance of the baked image, started for the job.
    Stopped,
    Warm,
}

impl Host {
    pub const ALL: [Host; 6] = [
        Host::Stock,
        Host::Baked,
        Host::BakedStale,
        Host::BakedStaleSelfUpdate,
        Host::Stopped,
        Host::Warm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Host::Stock => "stock",
            Host::Baked => "baked",
            Host::BakedStale => "baked-stale",
            Host::BakedStaleSelfUpdate => "baked-stale-self-update",
            Host::Stopped => "stopped",
            Host::Warm => "warm",
        }
    }

    /// ephemera's goal for queued → started at p50, where it sets one: a stale image that
    /// swaps from the bucket is held to the baked goal; the self-update is the behaviour
    /// the bucket ended, shown for comparison; a stopped instance is held to the
    /// stopped pool's 15 s.
    pub fn goal_p50(self) -> Option<Duration> {
        match self {
            Host::Stock | Host::BakedStaleSelfUpdate => None,
            Host::Baked | Host::BakedStale => Some(Duration::from_secs(30)),
            Host::Stopped => Some(Duration::from_secs(15)),
            Host::Warm => Some(Duration::from_secs(10)),
        }
    }
}

const ASSUMED_CALLS: Source =
    Source::Assumed("the model's call latencies (functions/model/src/quotas.rs)");

const JIT_READ: Stage = Stage {
    name: "JIT config read and its item stamped (GetItem, UpdateItem)",
    track: Track::Online,
    latency: Latency {
        median: Duration::from_millis(12),
        p99: Duration::from_millis(50),
    },
    late: None,
    source: ASSUMED_CALLS,
};

/// A call whose latency is the model's (assumed) call latency.
fn call(name: &'static str, track: Track, latency: Latency) -> Stage {
    Stage {
        name,
        track,
        latency,
        late: None,
        source: ASSUMED_CALLS,
    }
}

/// ephemera's control plane on a quiet pool: the webhook, the queue, the scaler's claim
/// and launch, then its registration while the instance boots.
fn ephemera_control(latencies: &Latencies) -> Vec<Stage> {
    vec![
        WEBHOOK_DELIVERY,
        call(
            "webhook function: invoked, message sent to SQS",
            Track::Control,
            sum(latencies.lambda_invoke, latencies.sqs),
        ),
        EVENT_SOURCE,
        call(
            "scaler: job claimed (TransactWriteItems)",
            Track::Control,
            latencies.dynamodb_transaction,
        ),
        call(
            "scaler: CreateFleet",
            Track::Control,
            latencies.ec2_create_fleet,
        ),
        call(
            "scaler: generate-jitconfig",
            Track::Registration,
            latencies.github,
        ),
        call(
            "scaler: JIT item written (PutItem)",
            Track::Registration,
            latencies.dynamodb,
        ),
    ]
}

/// The instance's stages from its launch (or its start, stopped) to its bootstrap reading
/// the JIT config.
pub fn boot_stages(host: Host) -> Vec<Stage> {
    match host {
        Host::Stock => vec![LAUNCH_TO_USER_DATA, STOCK_INSTALLS, RUNNER_DOWNLOAD],
        Host::Baked | Host::BakedStaleSelfUpdate => {
            vec![LAUNCH_TO_USER_DATA, EBS_INITIALIZATION, DOCKER_START]
        }
        Host::BakedStale => vec![
            LAUNCH_TO_USER_DATA,
            EBS_INITIALIZATION,
            DOCKER_START,
            RUNNER_SWAP,
        ],
        Host::Stopped => vec![START_TO_USER_DATA, DOCKER_START],
        Host::Warm => Vec::new(),
    }
}

/// [`boot_stages`] as one log-normal through the p50 and p99 of their drawn sum: the
/// burst's runner agents boot on it (`Latencies::instance_boot`).
pub fn boot_latency(host: Host) -> Latency {
    let (p50, p99) = crate::start::percentiles(&boot_stages(host), 2_000, 0);
    Latency {
        median: Duration::from_secs_f64(p50),
        p99: Duration::from_secs_f64(p99),
    }
}

/// A stopped instance taken for a job: the claim, its JIT config written under the
/// instance's ARN, then StartInstances, all before the instance runs (the stopped pool's order, docs/design.md).
fn stopped_control(latencies: &Latencies) -> Vec<Stage> {
    let mut control = ephemera_control(latencies);
    control.retain(|stage| stage.track == Track::Control && stage.name != "scaler: CreateFleet");
    for stage in &mut control {
        if stage.name.starts_with("scaler: job claimed") {
            stage.name = "scaler: stopped instance taken for the job (conditional write)";
        }
    }
    control.extend([
        call(
            "scaler: generate-jitconfig",
            Track::Control,
            latencies.github,
        ),
        call(
            "scaler: JIT item written under the instance's ARN (PutItem)",
            Track::Control,
            latencies.dynamodb,
        ),
        call(
            "scaler: StartInstances",
            Track::Control,
            latencies.ec2_other,
        ),
    ]);
    control
}

/// The stages of a job's start on `host`.
pub fn stages(host: Host, latencies: &Latencies) -> Vec<Stage> {
    let mut all = Vec::new();
    match host {
        Host::Warm => {}
        Host::Stopped => all.extend(stopped_control(latencies)),
        _ => all.extend(ephemera_control(latencies)),
    }
    all.extend(boot_stages(host));
    if host != Host::Warm {
        all.extend([JIT_READ, RUNNER_START]);
    }
    all.push(ASSIGNMENT);
    if host == Host::BakedStaleSelfUpdate {
        all.push(RUNNER_SELF_UPDATE);
    }
    all
}

/// terraform-aws-github-runner as its defaults deploy it: the webhook's message hidden
/// for `delay_webhook_event`, the scale-up function's GitHub and EC2 calls, the stock
/// Amazon Linux 2023 AMI with its user data's installs, the runner from its S3 cache,
/// then its start script. Its defaults are non-ephemeral runners (`enable_ephemeral_runners`
/// false), which get a registration token rather than a JIT config and register with
/// `config.sh`: these are the figures of a job that gets a new instance; a later job may
/// find a runner an earlier job left idle, as a warm runner, on a host not made afresh.
pub fn peer_stages(latencies: &Latencies) -> Vec<Stage> {
    vec![
        WEBHOOK_DELIVERY,
        call(
            "webhook function: invoked, message sent to SQS",
            Track::Control,
            sum(latencies.lambda_invoke, latencies.sqs),
        ),
        Stage {
            name: "message hidden on the queue (delay_webhook_event)",
            track: Track::Control,
            latency: Latency {
                median: Duration::from_secs(30),
                p99: Duration::from_secs(30),
            },
            late: None,
            source: Source::Cited(
                "terraform-aws-github-runner variables.tf: delay_webhook_event defaults to 30 s",
            ),
        },
        EVENT_SOURCE,
        call(
            "scale-up: installation token, queued check (GitHub)",
            Track::Control,
            sum(latencies.github, latencies.github),
        ),
        call(
            "scale-up: DescribeInstances",
            Track::Control,
            latencies.ec2_other,
        ),
        call(
            "scale-up: CreateFleet",
            Track::Control,
            latencies.ec2_create_fleet,
        ),
        call(
            "scale-up: registration token (non-ephemeral default: no JIT config)",
            Track::Registration,
            latencies.github,
        ),
        call(
            "scale-up: SSM PutParameter",
            Track::Registration,
            latencies.ssm,
        ),
        LAUNCH_TO_USER_DATA,
        PEER_INSTALLS,
        PEER_DOWNLOAD,
        PEER_CLI_CALLS,
        PEER_CLOUDWATCH_AGENT,
        PEER_CONFIG_SH,
        RUNNER_START,
        ASSIGNMENT,
    ]
}

/// Two calls one after the other, as one latency (medians and p99s added: close enough
/// for calls of milliseconds).
fn sum(a: Latency, b: Latency) -> Latency {
    Latency {
        median: a.median + b.median,
        p99: a.p99 + b.p99,
    }
}

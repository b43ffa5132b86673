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
//! - [`Host::Warm`]: a warm pool runner, already online: GitHub only assigns the job;
//! - [`peer_stages`]: terraform-aws-github-runner as its defaults deploy it.
//!
//! Each mode is one job on a quiet pool: the burst tables say what queueing behind the
//! quotas adds.

use crate::quotas::{Latencies, Latency};
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
    pub latency: Latency,
    pub source: Source,
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
    Warm,
}

impl Host {
    pub const ALL: [Host; 5] = [
        Host::Stock,
        Host::Baked,
        Host::BakedStale,
        Host::BakedStaleSelfUpdate,
        Host::Warm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Host::Stock => "stock",
            Host::Baked => "baked",
            Host::BakedStale => "baked-stale",
            Host::BakedStaleSelfUpdate => "baked-stale-self-update",
            Host::Warm => "warm",
        }
    }

    /// The goal for queued → started at p50, where it sets one: a stale image that
    /// swaps from the bucket is held to the baked goal; the self-update is the behaviour
    /// the bucket ended, shown for comparison.
    pub fn goal_p50(self) -> Option<Duration> {
        match self {
            Host::Stock | Host::BakedStaleSelfUpdate => None,
            Host::Baked | Host::BakedStale => Some(Duration::from_secs(30)),
            Host::Warm => Some(Duration::from_secs(10)),
        }
    }
}

const fn secs(median: f64, p99: f64) -> Latency {
    Latency {
        median: Duration::from_millis((median * 1_000.0) as u64),
        p99: Duration::from_millis((p99 * 1_000.0) as u64),
    }
}

/// The runner tarball's size, and the throughput it is fetched and unpacked at.
pub const RUNNER_TARBALL_MB: f64 = 200.0;
pub const RUNNER_FETCH_MB_PER_S: f64 = 20.0;

const ASSUMED_CALLS: Source =
    Source::Assumed("the model's call latencies (functions/model/src/quotas.rs)");

const WEBHOOK_DELIVERY: Stage = Stage {
    name: "GitHub's webhook delivery (queued → received)",
    track: Track::Control,
    latency: secs(1.0, 5.0),
    source: Source::Assumed("GitHub publishes no delivery latency; hooks arrive within seconds"),
};

const EVENT_SOURCE: Stage = Stage {
    name: "SQS event source hands the message to the scale-up function",
    track: Track::Control,
    latency: secs(0.5, 2.0),
    source: Source::Assumed("the event source long-polls; AWS publishes no pick-up latency"),
};

const PENDING_TO_RUNNING: Stage = Stage {
    name: "EC2 pending → running",
    track: Track::Boot,
    latency: secs(9.0, 25.0),
    source: Source::Cited(
        "median the geometric mean of two published measurements: 4.9 s (ec2-boot-bench's sample run on c5.xlarge, daemonology.net/blog/2021-08-12-EC2-boot-time-benchmarking.html) and 16.4-16.6 s on six types (github.com/brevdev/ec2-coldboot-research); p99 assumed above the slower",
    ),
};

const OS_BOOT: Stage = Stage {
    name: "OS boot to user data (cloud-init)",
    track: Track::Boot,
    latency: secs(5.0, 15.0),
    source: Source::Cited(
        "github.com/brevdev/ec2-coldboot-research: 3.2 s from boot to SSH with cloud-init; cloud-init's final stage (user data) after it assumed +2 s; p99 assumed",
    ),
};

const STOCK_INSTALLS: Stage = Stage {
    name: "package installs (dnf: git, Docker, the runner's libraries; Docker started)",
    track: Track::Boot,
    latency: secs(40.0, 120.0),
    source: Source::Assumed(
        "bootstrap.sh's install phase; no published timing of dnf's metadata and ~100 MB of packages from the regional mirror",
    ),
};

const RUNNER_DOWNLOAD: Stage = Stage {
    name: "runner download from the deployment's bucket and unpack (~200 MB at ~20 MB/s)",
    track: Track::Boot,
    latency: secs(RUNNER_TARBALL_MB / RUNNER_FETCH_MB_PER_S, 30.0),
    source: Source::Assumed(
        "bootstrap.sh reads runner/latest-<arch> and the tarball from S3 in the region, taken as no faster than GitHub's CDN (actions/runner-images#8415: a 120 MB release asset downloads and unpacks in under 10 s on a hosted runner); p99 assumed",
    ),
};

/// A baked image behind the newest release: the bootstrap replaces the image's runner from
/// the bucket before it starts (one in-region download, the same as the stock host's).
const RUNNER_SWAP: Stage = Stage {
    name: "runner swapped from the deployment's bucket (image behind the newest release)",
    ..RUNNER_DOWNLOAD
};

/// The runner's own update once GitHub assigns it a job, when its version is behind the
/// newest release: "When a new version is released, the runner application automatically
/// updates itself when a job is assigned to the runner" (docs.github.com, "Communicating
/// with self-hosted runners"); a JIT runner cannot turn it off (`--disableupdate` is a
/// `config.sh` option). No one publishes its duration.
pub const RUNNER_SELF_UPDATE: Stage = Stage {
    name: "runner self-update after assignment (image behind the newest release)",
    track: Track::Assignment,
    latency: secs(30.0, 300.0),
    source: Source::Assumed(
        "docs.github.com \"Communicating with self-hosted runners\" says the runner updates itself when a job is assigned, with no duration; the ~180 MB tarball from GitHub's CDN (~10 s, as the download above), its unpack over the install (~10 s), the listener's restart and new broker session (~5-10 s, as the runner's start): median 30 s; p99 300 s from a terraform-aws-github-runner user's report of about 5 minutes a boot (#4076, not found to cite; #4052 shows an image's v2.318.0 updating to v2.319.0 after launch)",
    ),
};

const JIT_READ: Stage = Stage {
    name: "JIT config read and its item stamped (GetItem, UpdateItem)",
    track: Track::Online,
    latency: secs(0.012, 0.05),
    source: ASSUMED_CALLS,
};

const RUNNER_START: Stage = Stage {
    name: "runner start and registration (JIT config → online)",
    track: Track::Online,
    latency: secs(4.0, 12.0),
    source: Source::Assumed(
        "Runner.Listener's .NET start and broker session; GitHub and actions/runner publish no timing",
    ),
};

const ASSIGNMENT: Stage = Stage {
    name: "GitHub's assignment (online → job started)",
    track: Track::Assignment,
    latency: secs(2.0, 10.0),
    source: Source::Assumed(
        "the runner long-polls the broker; GitHub publishes no assignment latency",
    ),
};

/// A call whose latency is the model's (assumed) call latency.
fn call(name: &'static str, track: Track, latency: Latency) -> Stage {
    Stage {
        name,
        track,
        latency,
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

/// The instance's stages from its launch to its bootstrap reading the JIT config.
pub fn boot_stages(host: Host) -> Vec<Stage> {
    match host {
        Host::Stock => vec![PENDING_TO_RUNNING, OS_BOOT, STOCK_INSTALLS, RUNNER_DOWNLOAD],
        Host::Baked | Host::BakedStaleSelfUpdate => vec![PENDING_TO_RUNNING, OS_BOOT],
        Host::BakedStale => vec![PENDING_TO_RUNNING, OS_BOOT, RUNNER_SWAP],
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

/// The stages of a job's start on `host`.
pub fn stages(host: Host, latencies: &Latencies) -> Vec<Stage> {
    let mut all = Vec::new();
    if host != Host::Warm {
        all.extend(ephemera_control(latencies));
        all.extend(boot_stages(host));
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
/// the JIT config through SSM.
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
            latency: secs(30.0, 30.0),
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
        call("scale-up: DescribeInstances", Track::Control, latencies.ec2_other),
        call("scale-up: CreateFleet", Track::Control, latencies.ec2_create_fleet),
        call(
            "scale-up: generate-jitconfig",
            Track::Registration,
            latencies.github,
        ),
        call("scale-up: SSM PutParameter", Track::Registration, latencies.ssm),
        PENDING_TO_RUNNING,
        OS_BOOT,
        Stage {
            name: "package installs (dnf upgrade-minimal; Docker, CloudWatch agent, jq, git, zip, curl)",
            track: Track::Boot,
            latency: secs(50.0, 150.0),
            source: Source::Assumed(
                "its user-data.sh; ephemera's stock installs plus upgrade-minimal and the CloudWatch agent",
            ),
        },
        Stage {
            name: "runner download from its S3 cache and unpack",
            source: Source::Assumed("the same tarball; S3 in the region taken as no faster than GitHub's CDN"),
            ..RUNNER_DOWNLOAD
        },
        Stage {
            name: "JIT config read from SSM (GetParameter)",
            track: Track::Online,
            latency: latencies.ssm,
            source: ASSUMED_CALLS,
        },
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

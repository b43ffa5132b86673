//! The stages of a job's start that do not come from the model's own call latencies,
//! each with its figure and where the figure comes from: a published measurement quoted
//! with its method (what was timed, from where to where), or marked assumed with the
//! reason. [`crate::host`] puts them together per host mode.
//!
//! A stage is a log-normal through its median and p99 ([`crate::start`] draws it). Where
//! a source publishes an average or a p90/p95 rather than a median and a p99, the source
//! text says how the two figures were derived from it.

use crate::host::{Late, Source, Stage, Track};
use crate::quotas::Latency;
use std::time::Duration;

pub(crate) const fn secs(median: f64, p99: f64) -> Latency {
    Latency {
        median: Duration::from_millis((median * 1_000.0) as u64),
        p99: Duration::from_millis((p99 * 1_000.0) as u64),
    }
}

/// The runner tarball's size (actions/runner's linux-x64 release asset, about 180 MB),
/// and the throughput it is fetched from the bucket and unpacked at (assumed).
pub const RUNNER_TARBALL_MB: f64 = 180.0;
pub const RUNNER_FETCH_MB_PER_S: f64 = 20.0;

pub const WEBHOOK_DELIVERY: Stage = Stage {
    name: "GitHub's webhook delivery (queued → received)",
    track: Track::Control,
    latency: secs(2.0, 3.2),
    late: Some(Late {
        share: 0.08,
        latency: secs(200.0, 3_600.0),
    }),
    source: Source::Cited(
        "carbonrunner.io/stats, \"GitHub Webhook Delay\", timed by CarbonRunner over its customers' jobs as \"the time it takes Github to generate and send us a webhook\" (the page does not say from which timestamp): p50 2 s, p90 3 s, p95 143-162 s, mean 655-968 s (two readings of the page). No log-normal fits that (one through 2 s and 162 s puts the p90 at ~22 s): most deliveries arrive within 3 s and about one in twenty minutes late. So 92% are drawn through a median of 2 s and a p99 of 3.2 s (which keeps the p90 at 3 s), and a late 8% through a median of 200 s and a p99 of an hour (assumed: GitHub's incident of 5 July 2024 delayed deliveries by 24 minutes on average, 71 at most, githubstatus.com), which puts the p95 near 143 s. The published mean needs still longer delays than this tail",
    ),
};

pub const EVENT_SOURCE: Stage = Stage {
    name: "SQS event source hands the message to the scale-up function",
    track: Track::Control,
    latency: secs(0.5, 2.0),
    late: None,
    source: Source::Assumed("the event source long-polls; AWS publishes no pick-up latency"),
};

/// The instance's launch to its user data starting: one stage, because the published
/// split of it is an artefact of how it was timed.
pub const LAUNCH_TO_USER_DATA: Stage = Stage {
    name: "launch → SSH / cloud-init user data start",
    track: Track::Boot,
    latency: secs(20.0, 40.0),
    late: None,
    source: Source::Cited(
        "github.com/brevdev/ec2-coldboot-research (2026, Amazon Linux 2023), timed from `aws ec2 run-instances` returning to the first SSH login: 21.0 s on m7i.large (3 runs, docs/cold-baseline-results.md) and 19.0-19.4 s on six types (one run each, docs/instance-type-sweep-results.md); median 20 s. ec2-boot-bench's sample output (daemonology.net/blog/2021-08-12-EC2-boot-time-benchmarking.html, c5.xlarge, 2021), timed from RunInstances answered to TCP/22 open: 27.7 s. The split into pending → running and the OS boot is unknown: brevdev times `aws ec2 wait instance-running`, which polls every 15 s, so its 16-18 s \"pending → running\" is mostly the waiter's poll and its 3.2 s \"boot → SSH\" starts when the waiter returns. cloud-init runs user data in its final stage, after sshd starts; no published gap, taken as none. p99 assumed: twice the median, above ec2-boot-bench's 27.7 s",
    ),
};

/// A stopped instance's start to its boot done: the same source's start-from-stopped run.
pub const START_TO_USER_DATA: Stage = Stage {
    name: "StartInstances → running → SSH (a stopped instance started)",
    track: Track::Boot,
    latency: secs(19.4, 40.0),
    late: None,
    source: Source::Cited(
        "github.com/brevdev/ec2-coldboot-research docs/start-stopped-results.md (one run, m7i.large, Amazon Linux 2023), timed from `aws ec2 start-instances` returning to the first SSH login: 19.4 s (16.4 s to `aws ec2 wait instance-running` returning, then 3.0 s to SSH), against 19.0-21.0 s for a launch; docs/hibernate-results.md: 18.7 s resuming a hibernated instance. The same 15 s waiter poll hides the split. EC2's StartInstances API reference says instances with EBS root volumes \"can be quickly stopped and started\", the root volume \"remains, continues to persist your data\" and RAM is not preserved (so the OS boots again); it gives no duration. RunsOn claims under 15 s queued → started from its stopped pools (runs-on.com/runners/pools, no method given), which this figure cannot reach. p99 assumed as the launch's",
    ),
};

/// The baked image's first reads of what the bootstrap starts, from a volume made from
/// the image's snapshot.
pub const EBS_INITIALIZATION: Stage = Stage {
    name: "first reads of the image's runner and Docker from the snapshot (EBS initialization)",
    track: Track::Boot,
    latency: secs(2.5, 15.0),
    late: None,
    source: Source::Assumed(
        "the EBS user guide (\"Initialize Amazon EBS volumes\") says a volume created from a snapshot has its blocks downloaded from Amazon S3 on first access, with \"increased I/O latency\" until then, at a default rate that \"fluctuates\"; it publishes no default rate. The OS's own first reads are inside the launch → SSH figures (those instances booted from snapshots too); this stage is the baked image's extra first reads when the bootstrap starts Docker and the runner (~250 MB of the engine, containerd and the runner's .NET files, assumed) at ~100 MiB/s (the lowest Provisioned Rate for Volume Initialization, 100-300 MiB/s, taken for the default's): median 2.5 s; p99 assumed 15 s. A stopped instance read them when it was prepared, so its volume has them",
    ),
};

/// `systemctl start docker` in the bootstrap's start phase, on a host whose Docker is
/// installed but not running (a baked image; a stopped instance after its stop).
pub const DOCKER_START: Stage = Stage {
    name: "Docker started by the bootstrap (systemctl start docker)",
    track: Track::Boot,
    latency: secs(0.9, 10.0),
    late: None,
    source: Source::Cited(
        "bottlerocket-os/bottlerocket#4163, `systemd-analyze blame` of an EC2 (aws-dev) boot, each unit's start to ready as systemd times it: docker.service 467 ms, host-containerd.service 439 ms; dockerd needs containerd, so median 0.9 s. p99 assumed 10 s (moby/moby#45143 reports rare dockerd starts of tens of seconds)",
    ),
};

pub const STOCK_INSTALLS: Stage = Stage {
    name: "package installs (dnf: git, Docker, the runner's libraries; Docker started)",
    track: Track::Boot,
    latency: secs(40.0, 120.0),
    late: None,
    source: Source::Assumed(
        "bootstrap.sh's install phase; no published timing of dnf's metadata and ~100 MB of packages from the regional mirror",
    ),
};

pub const RUNNER_DOWNLOAD: Stage = Stage {
    name: "runner download from the deployment's bucket and unpack (~180 MB at ~20 MB/s)",
    track: Track::Boot,
    latency: secs(RUNNER_TARBALL_MB / RUNNER_FETCH_MB_PER_S, 30.0),
    late: None,
    source: Source::Assumed(
        "bootstrap.sh reads runner/latest-<arch> and the ~180 MB tarball from the deployment's S3 bucket in the region and unpacks it; no published timing of either: 20 MB/s assumed for the fetch and the unpack together, median 9 s; p99 assumed 30 s",
    ),
};

/// A baked image behind the newest release: the bootstrap replaces the image's runner from
/// the bucket before it starts (one in-region download, the same as the stock host's).
pub const RUNNER_SWAP: Stage = Stage {
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
    late: None,
    source: Source::Assumed(
        "docs.github.com \"Communicating with self-hosted runners\" says the runner updates itself when a job is assigned, with no duration; the ~180 MB tarball from GitHub's CDN (~9 s, as the download above), its unpack over the install (~10 s), the listener's restart and new broker session (~5-10 s): median 30 s; p99 300 s from a terraform-aws-github-runner user's report of about 5 minutes a boot (#4076, not found to cite; #4052 shows an image's v2.318.0 updating to v2.319.0 after launch)",
    ),
};

pub const RUNNER_START: Stage = Stage {
    name: "runner start and registration (JIT config → online)",
    track: Track::Online,
    latency: secs(1.22, 39.0),
    late: None,
    source: Source::Cited(
        "depot.dev/blog/reducing-queue-time-with-cached-schemas, the runner's initialization before it long-polls for a job (download the API schema, get an OAuth token, create a session), timed by Depot over all its customers' jobs before it cached the schema: average 3.7 s, p99 39 s, longest 121 s. The log-normal with that mean and that p99 has a median of 1.22 s (sigma 1.49), the median used here; the listener's process start is outside Depot's steps and not added",
    ),
};

pub const ASSIGNMENT: Stage = Stage {
    name: "GitHub's assignment (online → job started)",
    track: Track::Assignment,
    latency: secs(2.0, 60.0),
    late: None,
    source: Source::Cited(
        "carbonrunner.io/stats splits its p50 \"time to start\" (GitHub creating the job → the job running on a runner of its ready pool) into the webhook, its VM's pick-up (<2 s) and JIT config (~0.7 s), then \"the Github runner contacting Github and saying it's started the job ~2s\": median 2 s. Its time to start has p50 5-6 s and p90 55-60 s while its webhook's p90 is 3 s, so up to ~55 s of that tail comes after the webhook, between its on-the-fly starts (45-90 s, which it names), its runner's start and GitHub's assignment; nothing published splits it, so the assignment takes a p99 of 60 s, the top of that p90 (an upper bound). RunsOn's \"under 6 s\" for hot instances (runs-on.com/runners/pools, no method given) includes its webhook and runner start, and agrees with the median",
    ),
};

/// terraform-aws-github-runner's user data on the stock AMI.
pub const PEER_INSTALLS: Stage = Stage {
    name: "package installs (dnf upgrade-minimal; Docker, CloudWatch agent, jq, git, zip, curl)",
    track: Track::Boot,
    latency: secs(50.0, 150.0),
    late: None,
    source: Source::Assumed(
        "its modules/runners/templates/user-data.sh; ephemera's stock installs plus upgrade-minimal and the CloudWatch agent",
    ),
};

pub const PEER_DOWNLOAD: Stage = Stage {
    name: "runner download from its S3 cache and unpack",
    source: Source::Assumed(
        "the same ~180 MB tarball from S3 in the region, at the rate assumed above",
    ),
    ..RUNNER_DOWNLOAD
};

/// The peer's start-runner.sh before the runner starts, with its defaults (instance
/// metadata tags on, so no describe-tags; the CloudWatch agent on; non-ephemeral runners,
/// so no JIT config and a `config.sh` registration).
pub const PEER_CLI_CALLS: Stage = Stage {
    name: "start-runner.sh: four AWS CLI calls (ssm get-parameters-by-path, get-parameter, delete-parameter; ec2 create-tags)",
    track: Track::Online,
    latency: secs(4.0, 12.0),
    late: None,
    source: Source::Assumed(
        "modules/runners/templates/start-runner.sh with its default metadata tags makes these four calls, each a new AWS CLI process; no published timing, ~1 s a call assumed (the interpreter's start and one HTTPS call). Its #4637 reports 45-60 s to start on a custom AMI with the CloudWatch agent off, \"half of this\" in the start script: the medians of its start-script stages here (calls, agent, config.sh, runner start: 9.4 s) stay under that half (22-30 s), so the model does not overstate it",
    ),
};

pub const PEER_CLOUDWATCH_AGENT: Stage = Stage {
    name: "CloudWatch agent: fetch-config from SSM and start (enable_cloudwatch_agent defaults to true)",
    track: Track::Online,
    latency: secs(3.0, 10.0),
    late: None,
    source: Source::Assumed(
        "start-runner.sh runs `amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s` before the runner; no published timing",
    ),
};

pub const PEER_CONFIG_SH: Stage = Stage {
    name: "config.sh registers the runner with its registration token (non-ephemeral default)",
    track: Track::Online,
    latency: secs(1.22, 39.0),
    late: None,
    source: Source::Assumed(
        "enable_ephemeral_runners defaults to false and enable_jit_config to null (JIT only for ephemeral runners), so start-runner.sh runs config.sh, whose calls to GitHub are taken as the runner's start (Depot's figures above); no published timing of config.sh",
    ),
};

//! The metrics ephemera emits: name, unit, dimensions and how values combine.
//!
//! This table is a contract. The dashboard in `template.yaml` and operators' alarms find
//! metrics by these names and dimension names, so renaming one blanks their graphs.

/// The CloudWatch namespace of every ephemera metric.
pub const NAMESPACE: &str = "ephemera";

/// The units CloudWatch accepts (`StandardUnit`); anything else invalidates the document.
pub const CLOUDWATCH_UNITS: &[&str] = &[
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// A dimension of ephemera's metrics. `Deployment` is set by the [`Metrics`] handle;
/// callers give the others.
///
/// [`Metrics`]: super::Metrics
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dimension {
    /// The deployment's name (`Config::deployment`).
    Deployment,
    /// The pool's name.
    Pool,
    /// Why a launch failed or the webhook refused a request, a short snake_case word such
    /// as `capacity`, `provider` or `no_signature`.
    Reason,
    /// How a runner was deleted: `graceful` or `forced`.
    Mode,
    /// What kind of orphan was reaped: `instance`, `github_runner` or `record`.
    Kind,
    /// The GitHub API call, a fixed snake_case name such as `generate_jit_config`.
    Endpoint,
    /// How a GitHub call ended: `ok`, `not_found`, `conflict`, `throttled` or `error`.
    Outcome,
    /// A runner status, as the lifecycle spells it.
    Status,
    /// A repository, `owner/name`.
    Repository,
    /// GitHub's rate-limit bucket an answer spent, as its `x-ratelimit-resource` names
    /// it: `core`, `actions_runner_registration`.
    Resource,
    /// An EC2 instance type, e.g. `m7i.large` (`unknown` when the record has none).
    InstanceType,
    /// A GitHub App's id: a deployment may run several, each with its own buckets.
    App,
}

impl Dimension {
    /// The dimension's name in CloudWatch.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Deployment => "Deployment",
            Dimension::Pool => "Pool",
            Dimension::Reason => "Reason",
            Dimension::Mode => "Mode",
            Dimension::Kind => "Kind",
            Dimension::Endpoint => "Endpoint",
            Dimension::Outcome => "Outcome",
            Dimension::Status => "Status",
            Dimension::Repository => "Repository",
            Dimension::Resource => "Resource",
            Dimension::InstanceType => "InstanceType",
            Dimension::App => "App",
        }
    }
}

/// How the values recorded for one metric within one flush become its EMF value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    /// Summed into one number: counts, and gauges recorded once per flush.
    Sum,
    /// Kept one by one, as an array of values, so percentiles and minimums stay right.
    Samples,
}

/// One metric ephemera emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Jobs the webhook queued for a pool.
    JobsQueued,
    /// `queued` jobs no pool takes (their labels are in no pool's), by repository.
    JobsUnrouted,
    /// Runners the scaler launched.
    RunnersLaunched,
    /// Launches that failed, by reason.
    LaunchFailures,
    /// Launches that fell back from spot to on-demand.
    SpotFallbacks,
    /// Time from the job's `queued` event to its instance launching.
    QueuedToLaunched,
    /// Time from the job's `queued` event to its runner coming online.
    QueuedToOnline,
    /// GitHub's queued → started of a job (`created_at` to `started_at`), in seconds,
    /// when its `in_progress` arrives: how long the job said "Waiting for a runner".
    QueueToStartSeconds,
    /// A runner's launch requested (its record to `creating`) → first known online, in
    /// seconds: the instance's boot, the bootstrap's JIT read and the registration.
    BootSeconds,
    /// EC2's launch time → the instance's JIT config read, in seconds, recorded when the
    /// reaper deletes the runner (it learns both then): the OS boot and the bootstrap,
    /// installs included on a stock image.
    HostBootSeconds,
    /// Runners whose host named the runner version it ran in its JIT tombstone, counted
    /// when the reaper deletes the runner: the boots the two below are a share of.
    RunnerBootsReported,
    /// Of those, boots whose image's baked runner was behind the one that ran (the start
    /// phase replaced it from the deployment's copy), by pool.
    BootsImageBehind,
    /// [`Metric::BootsImageBehind`] for the whole deployment, which the stale-image alarm
    /// divides by [`Metric::RunnerBootsReported`].
    RunnerBootsBehind,
    /// Graceful deletions put off because the runner was running a job.
    BusyDeferrals,
    /// Runners deleted, by mode (`graceful` or `forced`).
    RunnersDeleted,
    /// What a job's instance cost, in USD, once per priced job when its runner is
    /// deleted, by the job's repository.
    JobCost,
    /// Orphans removed by reconciliation, by kind.
    OrphansReaped,
    /// Jobs reconciliation queued again after their event was lost.
    Reenqueued,
    /// Jobs put off because the pool was at `max_runners` or had no capacity.
    CapacityDeferrals,
    /// Calls to GitHub's API, by endpoint and outcome.
    GitHubCalls,
    /// GitHub's `x-ratelimit-remaining`, one sample per response that carried it, by the
    /// bucket (`Resource`) the response names.
    GitHubRateLimitRemaining,
    /// Runners per status, a gauge the reaper records once per pool and status each run.
    RunnersByStatus,
    /// Failed `workflow_job` webhook deliveries the reaper asked GitHub to redeliver.
    Redeliveries,
    /// Failed `workflow_job` events the redelivery sweep gave up, by reason:
    /// `unauthorized` (refused with 401 each time: the webhook secrets differ),
    /// `refused` (another 4xx each time) or `window_over` (still failing an hour on).
    RedeliveriesGivenUp,
    /// Requests the webhook refused, by reason (`crate::screen::Rejection::reason`):
    /// `no_signature`, `bad_signature`, `too_large`, `unknown_event`.
    WebhookRejected,
    /// Spot interruption warnings EC2 sent for the deployment's runners, by pool and
    /// instance type.
    SpotInterruptions,
    /// A pool's spot circuit breaker opened: its launches go on-demand for its cool-down.
    SpotBreakerOpened,
    /// What became of the re-runs of jobs spot interruptions failed, by pool and outcome:
    /// `asked` (GitHub re-runs the job), `given_up` (its run never completed in time, or
    /// was re-run by someone else).
    InterruptedJobsRerun,
}

use Dimension::{
    App, Deployment, Endpoint, InstanceType, Kind, Mode, Outcome, Pool, Reason, Repository,
    Resource, Status,
};

const BY_POOL: &[Dimension] = &[Deployment, Pool];

/// One row of the table.
struct Spec {
    name: &'static str,
    unit: &'static str,
    dimensions: &'static [Dimension],
    aggregation: Aggregation,
}

const fn count(name: &'static str, dimensions: &'static [Dimension]) -> Spec {
    Spec {
        name,
        unit: "Count",
        dimensions,
        aggregation: Aggregation::Sum,
    }
}

const fn timing(name: &'static str) -> Spec {
    Spec {
        name,
        unit: "Milliseconds",
        dimensions: BY_POOL,
        aggregation: Aggregation::Samples,
    }
}

/// A timing in seconds, by pool, kept one value at a time (for percentiles).
const fn seconds(name: &'static str) -> Spec {
    Spec {
        unit: "Seconds",
        ..timing(name)
    }
}

impl Metric {
    /// Every metric, for tests and documentation.
    pub const ALL: [Metric; 28] = [
        Metric::JobsQueued,
        Metric::JobsUnrouted,
        Metric::RunnersLaunched,
        Metric::LaunchFailures,
        Metric::SpotFallbacks,
        Metric::QueuedToLaunched,
        Metric::QueuedToOnline,
        Metric::QueueToStartSeconds,
        Metric::BootSeconds,
        Metric::HostBootSeconds,
        Metric::RunnerBootsReported,
        Metric::BootsImageBehind,
        Metric::RunnerBootsBehind,
        Metric::BusyDeferrals,
        Metric::RunnersDeleted,
        Metric::JobCost,
        Metric::OrphansReaped,
        Metric::Reenqueued,
        Metric::CapacityDeferrals,
        Metric::GitHubCalls,
        Metric::GitHubRateLimitRemaining,
        Metric::RunnersByStatus,
        Metric::Redeliveries,
        Metric::RedeliveriesGivenUp,
        Metric::WebhookRejected,
        Metric::SpotInterruptions,
        Metric::SpotBreakerOpened,
        Metric::InterruptedJobsRerun,
    ];

    fn spec(self) -> Spec {
        match self {
            Metric::JobsQueued => count("JobsQueued", BY_POOL),
            Metric::JobsUnrouted => count("JobsUnrouted", &[Deployment, Repository]),
            Metric::RunnersLaunched => count("RunnersLaunched", BY_POOL),
            Metric::LaunchFailures => count("LaunchFailures", &[Deployment, Pool, Reason]),
            Metric::SpotFallbacks => count("SpotFallbacks", BY_POOL),
            Metric::QueuedToLaunched => timing("QueuedToLaunched"),
            Metric::QueuedToOnline => timing("QueuedToOnline"),
            Metric::QueueToStartSeconds => seconds("QueueToStartSeconds"),
            Metric::BootSeconds => seconds("BootSeconds"),
            Metric::HostBootSeconds => seconds("HostBootSeconds"),
            Metric::RunnerBootsReported => count("RunnerBootsReported", &[Deployment]),
            Metric::BootsImageBehind => count("BootsImageBehind", BY_POOL),
            Metric::RunnerBootsBehind => count("RunnerBootsBehind", &[Deployment]),
            Metric::BusyDeferrals => count("BusyDeferrals", BY_POOL),
            Metric::RunnersDeleted => count("RunnersDeleted", &[Deployment, Pool, Mode]),
            // CloudWatch has no currency unit: the value is USD.
            Metric::JobCost => Spec {
                unit: "None",
                aggregation: Aggregation::Samples,
                ..count("JobCost", &[Deployment, Repository])
            },
            Metric::OrphansReaped => count("OrphansReaped", &[Deployment, Kind]),
            Metric::Reenqueued => count("Reenqueued", BY_POOL),
            Metric::CapacityDeferrals => count("CapacityDeferrals", BY_POOL),
            Metric::Redeliveries => count("Redeliveries", &[Deployment]),
            Metric::RedeliveriesGivenUp => count("RedeliveriesGivenUp", &[Deployment, Reason]),
            Metric::WebhookRejected => count("WebhookRejected", &[Deployment, Reason]),
            Metric::SpotBreakerOpened => count("SpotBreakerOpened", BY_POOL),
            Metric::InterruptedJobsRerun => {
                count("InterruptedJobsRerun", &[Deployment, Pool, Outcome])
            }
            Metric::SpotInterruptions => {
                count("SpotInterruptions", &[Deployment, Pool, InstanceType])
            }
            Metric::GitHubCalls => count("GitHubCalls", &[Deployment, Endpoint, Outcome]),
            Metric::GitHubRateLimitRemaining => Spec {
                aggregation: Aggregation::Samples,
                ..count("GitHubRateLimitRemaining", &[Deployment, App, Resource])
            },
            Metric::RunnersByStatus => count("RunnersByStatus", &[Deployment, Pool, Status]),
        }
    }

    /// The metric's name in CloudWatch.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The metric's CloudWatch unit.
    pub fn unit(self) -> &'static str {
        self.spec().unit
    }

    /// The metric's one dimension set, `Deployment` first.
    pub fn dimensions(self) -> &'static [Dimension] {
        self.spec().dimensions
    }

    /// How values recorded within one flush combine.
    pub fn aggregation(self) -> Aggregation {
        self.spec().aggregation
    }
}

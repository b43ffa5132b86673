//! `ephemera pools` and `ephemera jobs list`: how full each pool is, what waits, and
//! which jobs no pool takes.
//!
//! Pools are those of the configuration (`--config FILE` or the deployment's parameter),
//! in its order, then any pool known only from records (a pool since removed from the
//! configuration still has runners to reap). Counts come from the status index and the
//! pool counters; nothing scans the table.

use crate::errors::aws;
use crate::exit::Outcome;
use crate::render::{age, colour_stdout, or_dash, Cell, Table};
use crate::target::{
    ConfigFileArg, ConfigParameterArg, Deployment, GitHubArgs, QueueArg, StackArgs, TableArg,
    TargetArgs,
};
use crate::views::{print_json, JobRow, PoolRow, UNROUTED};
use anyhow::Context;
use clap::{Args, ValueEnum};
use ephemera_aws::DynamoUnroutedJobs;
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
use ephemera_core::model::{JobRecord, JobStatus, RunnerRecord};
use ephemera_core::ports::RunnerStore;
use ephemera_core::unrouted::{UnroutedJob, UnroutedJobs};
use serde::Serialize;
use std::collections::BTreeMap;
use time::OffsetDateTime;

#[derive(Args, Debug)]
pub struct PoolsArgs {
    /// JSON on stdout: `{"pools": [...], "queue": {...}}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    queue: QueueArg,
    #[command(flatten)]
    config_parameter: ConfigParameterArg,
    #[command(flatten)]
    config: ConfigFileArg,
}

impl PoolsArgs {
    pub fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
            .table(&self.table)
            .queue(&self.queue)
            .config_parameter(&self.config_parameter)
    }

    pub fn github(&self) -> GitHubArgs {
        GitHubArgs::new(&self.config, None)
    }
}

/// A job status on the command line: the statuses of job records, and `unrouted` for
/// the jobs no pool takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JobFilter {
    Queued,
    #[value(name = "in_progress")]
    InProgress,
    Completed,
    /// Jobs no pool takes (kept 7 days).
    Unrouted,
}

impl JobFilter {
    fn status(self) -> Option<JobStatus> {
        match self {
            JobFilter::Queued => Some(JobStatus::Queued),
            JobFilter::InProgress => Some(JobStatus::InProgress),
            JobFilter::Completed => Some(JobStatus::Completed),
            JobFilter::Unrouted => None,
        }
    }
}

#[derive(Args, Debug)]
pub struct JobsListArgs {
    /// Only jobs in these statuses (repeatable or comma-separated; default: queued and
    /// in_progress). `unrouted`: jobs no pool has all the labels of, with their labels.
    #[arg(long, value_name = "STATUS", value_delimiter = ',', value_enum)]
    status: Vec<JobFilter>,
    /// Only jobs routed to this pool.
    #[arg(long, value_name = "POOL")]
    pool: Option<String>,
    /// JSON on stdout: `{"jobs": [...]}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
}

impl JobsListArgs {
    pub fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack).table(&self.table)
    }
}

#[derive(Serialize)]
struct PoolList {
    pools: Vec<PoolRow>,
    /// Messages waiting in the jobs queue, when the queue is known.
    queue: Option<QueueDepth>,
}

#[derive(Serialize)]
struct QueueDepth {
    visible: u64,
    in_flight: u64,
    delayed: u64,
    /// Messages in the queue's dead-letter queue, when it has one.
    dead_letter: Option<u64>,
}

#[derive(Serialize)]
struct JobList {
    jobs: Vec<JobRow>,
}

pub async fn pools(deployment: &mut Deployment, args: PoolsArgs) -> Outcome {
    let store = deployment.store().await?;
    let limits: Vec<(String, Option<u32>, Option<u32>)> = if deployment.has_config_source() {
        let config = deployment.config().await?;
        config
            .pools
            .iter()
            .map(|p| (p.name.clone(), Some(p.max_runners), Some(p.min_idle)))
            .collect()
    } else {
        Vec::new()
    };
    let live: Vec<InstanceStatus> = InstanceStatus::ALL
        .into_iter()
        .filter(|s| s.is_live())
        .collect();
    deployment.progress.wait("reading runners and queued jobs");
    let runners = store.list_runners(&live).await?;
    let queued = store.list_jobs(&[JobStatus::Queued]).await?;
    let mut names: Vec<(String, Option<u32>, Option<u32>)> = limits;
    for pool in runners
        .iter()
        .map(|r| &r.pool)
        .chain(queued.iter().map(|j| &j.pool))
    {
        if !names.iter().any(|(name, _, _)| name == pool) {
            names.push((pool.clone(), None, None));
        }
    }
    let mut rows = Vec::new();
    for (name, max_runners, min_idle) in names {
        let slots_used = store.get_pool(&name).await?.slots_used;
        rows.push(pool_row(
            name,
            max_runners,
            min_idle,
            slots_used,
            &runners,
            &queued,
        ));
    }
    let queue = queue_depth(deployment).await?;
    deployment.progress.clear();
    if args.json {
        print_json(&PoolList { pools: rows, queue })?;
        return Ok(());
    }
    let mut table = Table::new(&[
        "POOL",
        "MAX",
        "MIN IDLE",
        "SLOTS",
        "LIVE",
        "IDLE",
        "ACTIVE",
        "QUEUED",
        "BY STATUS",
    ]);
    for row in &rows {
        let by_status: Vec<String> = row
            .by_status
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        table.row(vec![
            row.name.as_str().into(),
            or_dash(row.max_runners).into(),
            or_dash(row.min_idle).into(),
            row.slots_used.to_string().into(),
            row.live.to_string().into(),
            row.idle.to_string().into(),
            row.active.to_string().into(),
            row.queued_jobs.to_string().into(),
            Cell::plain(if by_status.is_empty() {
                "-".to_owned()
            } else {
                by_status.join(", ")
            }),
        ]);
    }
    if table.is_empty() {
        println!("no pools");
    } else {
        print!("{}", table.render(colour_stdout()));
    }
    if let Some(q) = queue {
        println!(
            "\njobs queue: {} waiting, {} being handled, {} delayed",
            q.visible, q.in_flight, q.delayed
        );
        if let Some(dead) = q.dead_letter {
            println!("dead-letter queue: {dead} (jobs the scaler gave up on)");
        }
    }
    Ok(())
}

fn pool_row(
    name: String,
    max_runners: Option<u32>,
    min_idle: Option<u32>,
    slots_used: u32,
    runners: &[RunnerRecord],
    queued: &[JobRecord],
) -> PoolRow {
    let mine: Vec<&RunnerRecord> = runners.iter().filter(|r| r.pool == name).collect();
    let mut by_status = BTreeMap::new();
    for runner in &mine {
        *by_status.entry(runner.status.to_string()).or_insert(0) += 1;
    }
    let count = |status: RunnerStatus| mine.iter().filter(|r| r.runner_status == status).count();
    PoolRow {
        live: mine.len(),
        idle: count(RunnerStatus::Idle),
        active: count(RunnerStatus::Active),
        queued_jobs: queued.iter().filter(|j| j.pool == name).count(),
        name,
        max_runners,
        min_idle,
        slots_used,
        by_status,
    }
}

/// The jobs queue's depth, when the queue is known.
async fn queue_depth(
    deployment: &mut Deployment,
) -> Result<Option<QueueDepth>, crate::exit::Failure> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let Some(url) = deployment.queue_url().await? else {
        return Ok(None);
    };
    let attributes = aws_sdk_sqs::Client::new(&deployment.sdk)
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(A::ApproximateNumberOfMessagesDelayed)
        .attribute_names(A::RedrivePolicy)
        .send()
        .await
        .map_err(aws("SQS", "GetQueueAttributes"))
        .with_context(|| format!("reading the depth of {url}"))?
        .attributes
        .unwrap_or_default();
    let get = |name: A| -> u64 {
        attributes
            .get(&name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let dead_letter = match attributes.get(&A::RedrivePolicy) {
        Some(policy) => {
            let sqs = aws_sdk_sqs::Client::new(&deployment.sdk);
            let dlq = crate::dlq::dead_letter_url(&sqs, policy).await?;
            Some(crate::dlq::depth(&sqs, &dlq).await?)
        }
        None => None,
    };
    Ok(Some(QueueDepth {
        visible: get(A::ApproximateNumberOfMessages),
        in_flight: get(A::ApproximateNumberOfMessagesNotVisible),
        delayed: get(A::ApproximateNumberOfMessagesDelayed),
        dead_letter,
    }))
}

pub async fn jobs(deployment: &mut Deployment, args: JobsListArgs) -> Outcome {
    let store = deployment.store().await?;
    let filters = if args.status.is_empty() {
        vec![JobFilter::Queued, JobFilter::InProgress]
    } else {
        args.status
    };
    let statuses: Vec<JobStatus> = filters.iter().filter_map(|f| f.status()).collect();
    deployment.progress.wait("reading jobs");
    let mut jobs = store.list_jobs(&statuses).await?;
    let unrouted = if filters.contains(&JobFilter::Unrouted) {
        let table = deployment.table().await?;
        DynamoUnroutedJobs::new(aws_sdk_dynamodb::Client::new(&deployment.sdk), table)
            .list_unrouted()
            .await?
    } else {
        Vec::new()
    };
    deployment.progress.clear();
    jobs.retain(|j| args.pool.as_ref().is_none_or(|pool| &j.pool == pool));
    jobs.sort_by_key(|j| (j.received_at, j.job_id));
    let now = OffsetDateTime::now_utc();
    // An unrouted job has no pool: `--pool` leaves none of them.
    let unrouted: Vec<&UnroutedJob> = unrouted.iter().filter(|_| args.pool.is_none()).collect();
    if args.json {
        let mut rows: Vec<JobRow> = jobs.iter().map(|j| JobRow::new(j, now)).collect();
        rows.extend(unrouted.iter().map(|j| JobRow::unrouted(j, now)));
        print_json(&JobList { jobs: rows })?;
        return Ok(());
    }
    if jobs.is_empty() && unrouted.is_empty() {
        println!("no jobs");
        return Ok(());
    }
    let mut table = Table::new(&["JOB", "STATUS", "POOL", "REPO", "RUNNER", "AGE", "LABELS"]);
    for j in &jobs {
        table.row(vec![
            j.job_id.to_string().into(),
            Cell::status(j.status.as_str()),
            j.pool.as_str().into(),
            format!("{}/{}", j.owner, j.repo).into(),
            or_dash(j.runner_name.as_deref()).into(),
            age(j.received_at, now).into(),
            j.labels.join(",").into(),
        ]);
    }
    for j in &unrouted {
        table.row(vec![
            j.job_id.to_string().into(),
            Cell::status(UNROUTED),
            "-".into(),
            format!("{}/{}", j.owner, j.repo).into(),
            "-".into(),
            age(j.received_at, now).into(),
            j.labels.join(",").into(),
        ]);
    }
    print!("{}", table.render(colour_stdout()));
    if !unrouted.is_empty() {
        println!(
            "\nunrouted: no pool has all of these labels (a pool takes a job when its labels \
             contain all of the job's); check runs-on against the pools' labels"
        );
    }
    Ok(())
}

//! `ephemera jobs list`: the jobs the webhook recorded, by status and pool, with how long
//! each waited (queued → started, or → now), and the jobs no pool takes (`--status
//! unrouted`). Read from the status index and the unrouted
//! items; nothing scans the table.

use crate::exit::Outcome;
use crate::render::{age, colour_stdout, gap, or_dash, Cell, Table};
use crate::target::{table_command, Deployment, StackArgs, TableArg};
use crate::views::{print_json, JobRow, UNROUTED};
use clap::{Args, ValueEnum};
use ephemera_aws::DynamoUnroutedJobs;
use ephemera_core::model::JobStatus;
use ephemera_core::ports::UnroutedJobs;
use ephemera_core::timeline::Timeline;
use ephemera_core::unrouted::UnroutedJob;
use serde::Serialize;
use time::OffsetDateTime;

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
    /// in_progress). `unrouted`: jobs meant for self-hosted runners that no pool takes,
    /// with their labels and the reason.
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

table_command!(JobsListArgs, jobs);

#[derive(Serialize)]
struct JobList {
    jobs: Vec<JobRow>,
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
    let mut table = Table::new(&[
        "JOB", "STATUS", "POOL", "REPO", "RUNNER", "AGE", "WAIT", "LABELS",
    ]);
    for j in &jobs {
        table.row(vec![
            j.job_id.to_string().into(),
            Cell::status(j.status.as_str()),
            j.pool.as_str().into(),
            format!("{}/{}", j.owner, j.repo).into(),
            or_dash(j.runner_name.as_deref()).into(),
            age(j.received_at, now).into(),
            or_dash(Timeline::wait(j, now).map(gap)).into(),
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
            age(j.received_at, now).into(),
            j.labels.join(",").into(),
        ]);
    }
    print!("{}", table.render(colour_stdout()));
    if !unrouted.is_empty() {
        println!(
            "\nunrouted: no pool has all of these labels (a pool takes a job when its labels \
             contain all of the job's, and its sizing policy allows the job's sizing labels); \
             check runs-on against the pools' labels and sizing"
        );
        for j in unrouted.iter().filter(|j| !j.reason.is_empty()) {
            println!("  job {}: {}", j.job_id, j.reason);
        }
    }
    Ok(())
}

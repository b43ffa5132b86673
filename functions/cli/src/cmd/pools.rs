//! `ephemera pools`: how full each pool is and what waits in the jobs queue.
//!
//! Pools are those of the configuration (`--config FILE` or the deployment's parameter),
//! in its order, then any pool known only from records (a pool since removed from the
//! configuration still has runners to reap). Counts come from the status index and the
//! pool counters; nothing scans the table.

use crate::errors::aws;
use crate::exit::Outcome;
use crate::render::{colour_stdout, or_dash, Cell, Table};
use crate::target::{
    ConfigFileArg, ConfigParameterArg, Deployment, DeploymentCommand, GitHubArgs, QueueArg,
    StackArgs, TableArg, TargetArgs,
};
use crate::views::{print_json, PoolRow};
use anyhow::Context;
use clap::Args;
use ephemera_aws::breaker::DynamoSpotBreakers;
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
use ephemera_core::model::{JobRecord, JobStatus, RunnerRecord};
use ephemera_core::ports::RunnerStore;
use ephemera_core::ports::SpotBreakerStore;
use serde::Serialize;
use std::collections::BTreeMap;
use time::format_description::well_known::Rfc3339;
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

impl DeploymentCommand for PoolsArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
            .table(&self.table)
            .queue(&self.queue)
            .config_parameter(&self.config_parameter)
    }

    fn github(&self) -> GitHubArgs {
        GitHubArgs::new(&self.config, None)
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        pools(deployment, self).await
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

pub async fn pools(deployment: &mut Deployment, args: PoolsArgs) -> Outcome {
    let store = deployment.store().await?;
    let mut stopped_targets = BTreeMap::new();
    let limits: Vec<(String, Option<u32>, Option<u32>)> = if deployment.has_config_source() {
        let config = deployment.config().await?;
        stopped_targets.extend(config.pools.iter().map(|p| (p.name.clone(), p.stopped)));
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
    let breakers = DynamoSpotBreakers::new(
        aws_sdk_dynamodb::Client::new(&deployment.sdk),
        deployment.table().await?,
    );
    let now = OffsetDateTime::now_utc();
    let mut rows = Vec::new();
    for (name, max_runners, min_idle) in names {
        let slots_used = store.get_pool(&name).await?.slots_used;
        let breaker = breakers.breaker_state(&name).await?;
        let stopped_target = stopped_targets.get(&name).copied();
        let mut row = pool_row(name, max_runners, min_idle, slots_used, &runners, &queued);
        row.stopped_target = stopped_target;
        row.spot_interruptions = breaker.interrupted.len();
        row.spot_paused_until = breaker
            .paused_until
            .filter(|_| breaker.paused(now))
            .and_then(|until| until.format(&Rfc3339).ok());
        rows.push(row);
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
        "STOPPED",
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
            match row.stopped_target {
                Some(target) if target > 0 => format!("{}/{target}", row.stopped),
                _ => row.stopped.to_string(),
            }
            .into(),
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
    for row in &rows {
        if let Some(until) = &row.spot_paused_until {
            println!(
                "\n{}: spot paused until {until} ({} spot interruptions counted): launches go on-demand",
                row.name, row.spot_interruptions
            );
        }
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
        stopped: mine
            .iter()
            .filter(|r| r.status == InstanceStatus::Stopped)
            .count(),
        stopped_target: None,
        queued_jobs: queued.iter().filter(|j| j.pool == name).count(),
        name,
        max_runners,
        min_idle,
        slots_used,
        by_status,
        spot_paused_until: None,
        spot_interruptions: 0,
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
            let dlq = super::dlq::dead_letter_url(&sqs, policy).await?;
            Some(super::dlq::depth(&sqs, &dlq).await?)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(name: &str, status: InstanceStatus, runner_status: RunnerStatus) -> RunnerRecord {
        let mut record = RunnerRecord::new(
            name.to_owned(),
            "linux".to_owned(),
            OffsetDateTime::UNIX_EPOCH,
        );
        record.status = status;
        record.runner_status = runner_status;
        record
    }

    #[test]
    fn a_pool_row_counts_stopped_warm_and_busy_apart() {
        let runners = [
            runner("a", InstanceStatus::Stopped, RunnerStatus::Pending),
            runner("b", InstanceStatus::Stopped, RunnerStatus::Pending),
            runner("c", InstanceStatus::Preparing, RunnerStatus::Pending),
            runner("d", InstanceStatus::Running, RunnerStatus::Idle),
            runner("e", InstanceStatus::Running, RunnerStatus::Active),
        ];
        let row = pool_row("linux".to_owned(), Some(5), Some(1), 5, &runners, &[]);
        assert_eq!((row.stopped, row.idle, row.active, row.live), (2, 1, 1, 5));
    }
}

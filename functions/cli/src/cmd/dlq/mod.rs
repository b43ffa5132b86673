//! `ephemera jobs dlq list | redrive`: the scaler's dead-letter queue, which holds the
//! queue messages the scaler failed on too many times (the jobs queue's
//! `RedrivePolicy` names it and its `maxReceiveCount`).
//!
//! `list` reads without consuming: it receives every message with a short visibility
//! timeout ([`PEEK_SECONDS`]), then makes each visible again at once (visibility 0).
//! The only trace is one more receive in each message's `ApproximateReceiveCount`.
//! `redrive` sends each message's body, unchanged, to the jobs queue and deletes it
//! from the dead-letter queue only once that send succeeded: a crash in between leaves
//! the message in both queues, never in neither, and the duplicate is harmless because
//! the scaler's handling of a job is idempotent (it reads the job's record first).
//! [`queue`] holds the SQS calls both make.

use crate::errors::aws;
use crate::exit::{Failure, Outcome, USAGE};
use crate::render::{age, colour_stdout, Cell, Table};
use crate::target::{Deployment, DeploymentCommand, QueueArg, StackArgs, TableArg, TargetArgs};
use crate::views::print_json;
use anyhow::Context;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use aws_sdk_sqs::Client;
use clap::Args;
use ephemera_core::message::QueueMessage;
use ephemera_core::ports::RunnerStore;
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};
use time::OffsetDateTime;

mod queue;

pub use queue::{dead_letter_url, depth};
use queue::{peek, queues, receive, release, system_attribute};

/// How long a listed message stays hidden should `list` stop before making it visible
/// again (SQS allows 0 to 43 200 s).
pub const PEEK_SECONDS: i32 = 30;
/// How long a message being redriven stays hidden: the send and the delete take far less.
pub const REDRIVE_SECONDS: i32 = 60;
/// SQS returns at most 10 messages per receive.
const BATCH: i32 = 10;
/// The most messages `list` shows (and `redrive` moves in one run).
pub const MOST: usize = 1000;

#[derive(Args, Debug)]
pub struct ListArgs {
    /// JSON on stdout: `{"dead_letter_queue": URL, "messages": [...]}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    queue: QueueArg,
    #[command(flatten)]
    table: TableArg,
}

impl DeploymentCommand for ListArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
            .queue(&self.queue)
            .table(&self.table)
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        list(deployment, self).await
    }
}

#[derive(Args, Debug)]
pub struct RedriveArgs {
    /// Do not ask: redrive every message (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    yes: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    queue: QueueArg,
}

impl DeploymentCommand for RedriveArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack).queue(&self.queue)
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        redrive(deployment, self).await
    }
}

/// One message of the dead-letter queue, as `list --json` shows it.
#[derive(Debug, Serialize)]
pub struct DeadLetterRow {
    pub message_id: String,
    /// The job, when the body is a queue message this build reads.
    pub job_id: Option<u64>,
    /// `queued`, `in_progress`, `completed`, `warm`…
    pub kind: Option<String>,
    /// `owner/repo`.
    pub repo: Option<String>,
    pub pool: Option<String>,
    pub labels: Vec<String>,
    /// Receives before this listing (across both queues).
    pub receives: u64,
    #[serde(with = "time::serde::rfc3339::option")]
    pub sent_at: Option<OffsetDateTime>,
    /// Why it failed, when known: an unreadable body, or what the job's record and its
    /// runner's record say.
    pub reason: Option<String>,
}

#[derive(Serialize)]
struct DeadLetterList {
    dead_letter_queue: String,
    messages: Vec<DeadLetterRow>,
}

/// What is known of why the message's job was given up on.
async fn reason(
    store: Option<&ephemera_aws::DynamoRunnerStore>,
    decoded: &Result<QueueMessage, ephemera_core::message::MessageError>,
) -> Option<String> {
    let message = match decoded {
        Ok(message) => message,
        Err(err) => return Some(format!("unreadable message: {err}")),
    };
    let store = store?;
    let job = match store.get_job(message.job_id).await {
        Ok(Some(job)) => job,
        Ok(None) => return Some("no job record (dead-lettered before it was recorded)".into()),
        Err(err) => return Some(format!("job record unreadable: {err}")),
    };
    let Some(runner_name) = &job.runner_name else {
        return Some(format!("job {}, no runner launched", job.status));
    };
    match store.get_runner(runner_name).await {
        Ok(Some(runner)) => Some(match &runner.last_error {
            Some(error) => format!(
                "job {}; runner {runner_name} {}: {error}",
                job.status, runner.status
            ),
            None => format!("job {}; runner {runner_name} {}", job.status, runner.status),
        }),
        _ => Some(format!("job {}; runner {runner_name} gone", job.status)),
    }
}

pub async fn list(deployment: &mut Deployment, args: ListArgs) -> Outcome {
    let (_, dlq) = queues(deployment).await?;
    let store = match deployment.table_if_known().await? {
        Some(_) => Some(deployment.store().await?),
        None => None,
    };
    let sqs = Client::new(&deployment.sdk);
    deployment
        .progress
        .wait(format!("reading the dead-letter queue {dlq}"));
    let messages = peek(&sqs, &dlq).await?;
    let mut rows = Vec::new();
    for message in &messages {
        let body = message.body().unwrap_or_default();
        let decoded = QueueMessage::decode(body);
        let receives =
            system_attribute(message, MessageSystemAttributeName::ApproximateReceiveCount)
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(1);
        let sent_at = system_attribute(message, MessageSystemAttributeName::SentTimestamp)
            .and_then(|ms| ms.parse::<i128>().ok())
            .and_then(|ms| OffsetDateTime::from_unix_timestamp_nanos(ms * 1_000_000).ok());
        let reason = reason(store.as_ref(), &decoded).await;
        let ok = decoded.as_ref().ok();
        rows.push(DeadLetterRow {
            message_id: message.message_id().unwrap_or_default().to_owned(),
            job_id: ok.map(|m| m.job_id),
            kind: ok.and_then(|m| {
                serde_json::to_value(m.kind)
                    .ok()?
                    .as_str()
                    .map(str::to_owned)
            }),
            repo: ok.map(|m| format!("{}/{}", m.owner, m.repo)),
            pool: ok.map(|m| m.pool.clone()),
            labels: ok.map(|m| m.labels.clone()).unwrap_or_default(),
            // This listing's own receive is not one of the failures.
            receives: receives.saturating_sub(1),
            sent_at,
            reason,
        });
    }
    deployment.progress.clear();
    if args.json {
        print_json(&DeadLetterList {
            dead_letter_queue: dlq,
            messages: rows,
        })?;
        return Ok(());
    }
    if rows.is_empty() {
        println!("dead-letter queue {dlq}: empty");
        return Ok(());
    }
    let now = OffsetDateTime::now_utc();
    let dash = || "-".to_owned();
    let mut table = Table::new(&[
        "JOB", "KIND", "REPO", "POOL", "LABELS", "RECEIVES", "AGE", "WHY",
    ]);
    for row in &rows {
        table.row(vec![
            row.job_id.map_or_else(dash, |id| id.to_string()).into(),
            Cell::plain(row.kind.clone().unwrap_or_else(dash)),
            row.repo.clone().unwrap_or_else(dash).into(),
            row.pool.clone().unwrap_or_else(dash).into(),
            row.labels.join(",").into(),
            row.receives.to_string().into(),
            row.sent_at.map_or_else(dash, |at| age(at, now)).into(),
            row.reason.clone().unwrap_or_else(dash).into(),
        ]);
    }
    println!("dead-letter queue {dlq}: {} message(s)", rows.len());
    print!("{}", table.render(colour_stdout()));
    println!("\nput them back on the jobs queue: ephemera jobs dlq redrive");
    Ok(())
}

/// Asks on the terminal; `false` unless the answer is yes.
fn confirmed(question: &str) -> anyhow::Result<bool> {
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

pub async fn redrive(deployment: &mut Deployment, args: RedriveArgs) -> Outcome {
    let (queue, dlq) = queues(deployment).await?;
    let sqs = Client::new(&deployment.sdk);
    let waiting = depth(&sqs, &dlq).await?;
    if waiting == 0 {
        println!("dead-letter queue {dlq}: empty; nothing to redrive");
        return Ok(());
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::msg(
                USAGE,
                format!(
                    "not redriving {waiting} message(s) without confirmation: stdin is not a \
                     terminal to ask on; pass --yes to redrive them"
                ),
            ));
        }
        let question =
            format!("put {waiting} message(s) from {dlq} back on the jobs queue {queue}?");
        if !confirmed(&question)? {
            return Err(Failure::msg(
                crate::exit::REFUSED,
                "not redriven: not confirmed",
            ));
        }
    }
    let mut moved = 0usize;
    while moved < MOST {
        let batch = receive(&sqs, &dlq, REDRIVE_SECONDS).await?;
        if batch.is_empty() {
            break;
        }
        for message in &batch {
            let (Some(body), Some(receipt)) = (message.body(), message.receipt_handle()) else {
                continue;
            };
            let sent = sqs
                .send_message()
                .queue_url(&queue)
                .message_body(body)
                .send()
                .await
                .map_err(aws("SQS", "SendMessage"));
            if let Err(err) = sent {
                let _ = release(&sqs, &dlq, receipt).await;
                return Err(Failure::from(err.context(format!(
                    "{moved} message(s) redriven; the next stays in the dead-letter queue"
                ))));
            }
            // Only now: the body is safe on the jobs queue.
            sqs.delete_message()
                .queue_url(&dlq)
                .receipt_handle(receipt)
                .send()
                .await
                .map_err(aws("SQS", "DeleteMessage"))
                .with_context(|| {
                    format!(
                        "message {} is on the jobs queue but still in the dead-letter queue \
                         (a duplicate is harmless)",
                        message.message_id().unwrap_or_default()
                    )
                })?;
            moved += 1;
            deployment.progress.wait(format!("{moved} redriven"));
        }
    }
    deployment.progress.clear();
    println!("redriven {moved} message(s) from {dlq} to the jobs queue {queue}");
    Ok(())
}

//! `ephemera runners logs NAME`: what a runner's host shipped to CloudWatch Logs — the
//! bootstrap's log and the runner's `_diag` logs, one line an event, oldest first.
//!
//! The bootstrap names its stream after the instance id (the one identity it and the
//! instance role know), so the runner's name is turned into its instance by the runner's
//! record. A deleted runner's record stays `reaper.deleted_ttl` (7 days by default);
//! after that, `--instance ID` reads the stream of an instance id taken from anywhere
//! else (`jobs show`, the console output, the bill). The stream outlives both, for the
//! group's retention (`RunnerLogRetentionDays`).
//!
//! When the stream is not there, the command says why as far as it can tell: no such
//! group (`DescribeLogGroups`), a runner deleted before its host shipped anything, or a
//! host that has not shipped yet; on an emulator (`AWS_ENDPOINT_URL`, e.g. `make up`'s)
//! that the simulated hosts ship no logs at all. The service's own message is not
//! repeated: moto answers a missing stream with "The specified log group does not
//! exist." even when the group exists.
//!
//! The reading is [`read_stream`]: `GetLogEvents` from the head, page after page until
//! the forward token comes back unchanged (the end of the stream, as the API documents
//! it), at most [`MAX_PAGES`] pages. The CloudWatch Logs call is in [`cloudwatch`].

use crate::exit::{Failure, Outcome, FAILURE, NOT_FOUND};
use crate::target::{Deployment, DeploymentCommand, LogGroupArg, StackArgs, TableArg, TargetArgs};
use crate::views::{print_json, LogLineRow, RunnerLogsView};
use async_trait::async_trait;
use clap::Args;
use time::OffsetDateTime;

mod cloudwatch;

pub use cloudwatch::CloudWatchStreams;

/// At most this many `GetLogEvents` pages (up to 1 MB or 10,000 events each) are read.
pub const MAX_PAGES: usize = 200;

#[derive(Args, Debug)]
pub struct LogsArgs {
    /// The runner's name.
    #[arg(required_unless_present = "instance")]
    name: Option<String>,
    /// Read the stream of this instance id instead (when the runner's record is gone).
    #[arg(long, value_name = "ID", conflicts_with = "name")]
    instance: Option<String>,
    /// JSON on stdout: `{"runner", "instance_id", "log_group", "complete", "events":
    /// [{"shipped_at", "message"}]}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    log_group: LogGroupArg,
}

impl DeploymentCommand for LogsArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
            .table(&self.table)
            .log_group(&self.log_group)
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        logs(deployment, self).await
    }
}

/// One line a host shipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEvent {
    /// When it was shipped, epoch milliseconds.
    pub timestamp: i64,
    pub message: String,
}

/// One `GetLogEvents` answer.
#[derive(Debug, Default)]
pub struct Page {
    pub events: Vec<LogEvent>,
    pub next_forward_token: Option<String>,
}

/// Why a stream could not be read; the command turns each into its own message.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// No such stream (the host has shipped nothing yet) or no such group.
    #[error("{0}")]
    NotFound(String),
    /// The caller's credentials may not read the group.
    #[error("{0}")]
    AccessDenied(String),
    #[error(transparent)]
    Other(anyhow::Error),
}

/// Reads a log stream, a page at a time.
#[async_trait]
pub trait LogStreams {
    /// The page of `stream` in `group` after `token` (from the head when `None`);
    /// read-only, so safe to repeat.
    async fn page(
        &self,
        group: &str,
        stream: &str,
        token: Option<&str>,
    ) -> Result<Page, StreamError>;

    /// Whether the log group `group` exists.
    async fn group_exists(&self, group: &str) -> Result<bool, StreamError>;
}

/// Every event of a stream, oldest first.
#[derive(Debug, Default)]
pub struct StreamRead {
    pub events: Vec<LogEvent>,
    /// False when [`MAX_PAGES`] were read before the end.
    pub complete: bool,
}

/// Reads `stream` from its head until the forward token repeats (or is absent), at most
/// `max_pages` pages.
pub async fn read_stream(
    streams: &impl LogStreams,
    group: &str,
    stream: &str,
    max_pages: usize,
) -> Result<StreamRead, StreamError> {
    let mut read = StreamRead::default();
    let mut token: Option<String> = None;
    for _ in 0..max_pages {
        let page = streams.page(group, stream, token.as_deref()).await?;
        read.events.extend(page.events);
        if page.next_forward_token.is_none() || page.next_forward_token == token {
            read.complete = true;
            return Ok(read);
        }
        token = page.next_forward_token;
    }
    Ok(read)
}

/// The instance whose stream holds the runner's logs, from `--instance` or the record,
/// and whether the record says the runner was deleted.
async fn instance_of(
    deployment: &mut Deployment,
    args: &LogsArgs,
) -> Result<(String, bool), Failure> {
    if let Some(instance) = &args.instance {
        return Ok((instance.clone(), false));
    }
    let name = args.name.as_deref().unwrap_or_default();
    let store = deployment.store().await?;
    let record = super::find_runner(deployment, &store, name).await?;
    let record = record.ok_or_else(|| {
        Failure::msg(
            NOT_FOUND,
            format!(
                "no runner named {name} (a deleted runner's record is kept for \
                 reaper.deleted_ttl; with its instance id, --instance ID reads its logs)"
            ),
        )
    })?;
    let deleted = record.status == ephemera_core::lifecycle::InstanceStatus::Deleted;
    let instance = record.instance_id.ok_or_else(|| {
        Failure::msg(
            NOT_FOUND,
            format!("runner {name} has no instance (it never launched): no logs"),
        )
    })?;
    Ok((instance, deleted))
}

pub async fn logs(deployment: &mut Deployment, args: LogsArgs) -> Outcome {
    let (instance, deleted) = instance_of(deployment, &args).await?;
    let group = deployment.runner_log_group().await?;
    let streams = CloudWatchStreams::new(aws_sdk_cloudwatchlogs::Client::new(&deployment.sdk));
    let who = args
        .name
        .as_deref()
        .map_or_else(|| format!("instance {instance}"), |n| format!("runner {n}"));
    deployment
        .progress
        .wait(format!("reading the logs of {who}"));
    let read = match read_stream(&streams, &group, &instance, MAX_PAGES).await {
        Err(StreamError::NotFound(_)) => {
            let missing = Missing {
                who: &who,
                instance: &instance,
                group: &group,
                group_exists: streams.group_exists(&group).await.ok(),
                deleted,
                emulator: deployment.target.endpoint_url.as_deref(),
            };
            deployment.progress.clear();
            return Err(missing.failure());
        }
        read => read,
    };
    deployment.progress.clear();
    let read = read.map_err(|err| stream_failure(err, &group))?;
    if args.json {
        return Ok(print_json(&json_view(args.name, instance, group, read))?);
    }
    if read.events.is_empty() {
        eprintln!("no log lines yet in stream {instance} of {group}");
    }
    for event in &read.events {
        println!("{}", event.message);
    }
    if !read.complete {
        eprintln!("… stopped after {MAX_PAGES} pages; the stream goes on");
    }
    Ok(())
}

/// A stream that is not there, and what is known of why.
struct Missing<'a> {
    /// `runner NAME` or `instance ID`.
    who: &'a str,
    instance: &'a str,
    group: &'a str,
    /// `None`: could not be told.
    group_exists: Option<bool>,
    /// The runner's record says it was deleted.
    deleted: bool,
    /// The AWS endpoint, when it is an emulator's.
    emulator: Option<&'a str>,
}

impl Missing<'_> {
    /// What the operator is told (exit code 4).
    fn failure(&self) -> Failure {
        let Missing {
            who,
            instance,
            group,
            ..
        } = self;
        let mut text = if self.group_exists == Some(false) {
            format!(
                "no log group {group}: the stack's RunnerLogGroupName names it (or give \
                 --log-group NAME)"
            )
        } else if self.deleted {
            format!(
                "no logs for {who}: it was deleted, and its host shipped none (no stream \
                 {instance} in log group {group}); a host ships its first lines when its \
                 runner starts"
            )
        } else {
            format!(
                "no logs yet for {who}: no stream {instance} in log group {group}; a host \
                 ships its first lines when its runner starts"
            )
        };
        if let (Some(endpoint), false) = (self.emulator, self.group_exists == Some(false)) {
            text.push_str(&format!(
                ". On the emulator at {endpoint} the instances are simulated (make up, make \
                 demo): their hosts ship no logs"
            ));
        }
        Failure::msg(NOT_FOUND, text)
    }
}

/// What the operator is told when the stream cannot be read, and the exit code.
fn stream_failure(err: StreamError, group: &str) -> Failure {
    match err {
        StreamError::NotFound(message) => Failure::msg(NOT_FOUND, message),
        StreamError::AccessDenied(message) => Failure::msg(
            FAILURE,
            format!(
                "access denied reading log group {group}: {message} (reading needs \
                 logs:GetLogEvents on it)"
            ),
        ),
        StreamError::Other(err) => Failure::new(FAILURE, err),
    }
}

fn json_view(
    runner: Option<String>,
    instance: String,
    group: String,
    read: StreamRead,
) -> RunnerLogsView {
    let events = read
        .events
        .into_iter()
        .map(|e| LogLineRow {
            shipped_at: OffsetDateTime::from_unix_timestamp_nanos(
                i128::from(e.timestamp) * 1_000_000,
            )
            .unwrap_or(OffsetDateTime::UNIX_EPOCH),
            message: e.message,
        })
        .collect();
    RunnerLogsView {
        runner,
        instance_id: instance,
        log_group: group,
        complete: read.complete,
        events,
    }
}

#[cfg(test)]
mod tests;

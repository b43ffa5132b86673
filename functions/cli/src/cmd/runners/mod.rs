//! `ephemera runners list | show | delete | connect | logs`: the runner records of a
//! deployment, the operator delete of docs/design.md, a shell on a runner
//! ([`connect`]), and what a runner's host logged ([`logs`]).
//!
//! Delete removes the runner from GitHub first — the DELETE is GitHub's own "is it
//! busy?" check, so a runner that is running a job is never marked for deletion — and
//! only then moves the record to `pending_delete` (`pending_force_delete` with
//! `--force`). The reaper does the rest: the instance, the JIT config, the pool slot.
//! The delete is in [`delete`].

use crate::exit::{Failure, Outcome, NOT_FOUND};
use crate::render::{age, colour_stdout, or_dash, when, Cell, Table};
use crate::target::{table_command, Deployment, StackArgs, TableArg};
use crate::views::{print_json, RunnerDetail, RunnerRow};
use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::RunnerStore;
use serde::Serialize;
use time::OffsetDateTime;

mod connect;
#[cfg(test)]
mod connect_tests;
mod delete;
mod logs;

pub use connect::ConnectArgs;
pub use delete::DeleteArgs;
pub use logs::LogsArgs;

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only runners of this pool.
    #[arg(long, value_name = "POOL")]
    pool: Option<String>,
    /// Only runners in these statuses (repeatable or comma-separated; default: every
    /// status but `deleted`).
    #[arg(long, value_name = "STATUS", value_delimiter = ',')]
    status: Vec<StatusArg>,
    /// JSON on stdout: `{"runners": [...]}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
}

table_command!(ListArgs, list);

/// A runner status on the command line, its values listed by `--help`.
#[derive(Debug, Clone, Copy)]
struct StatusArg(InstanceStatus);

const STATUS_ARGS: [StatusArg; InstanceStatus::ALL.len()] = {
    let mut all = [StatusArg(InstanceStatus::ALL[0]); InstanceStatus::ALL.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = StatusArg(InstanceStatus::ALL[i]);
        i += 1;
    }
    all
};

impl ValueEnum for StatusArg {
    fn value_variants<'a>() -> &'a [Self] {
        &STATUS_ARGS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.as_str()))
    }
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The runner's name.
    name: String,
    /// JSON on stdout: every field and `history`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
}

table_command!(ShowArgs, show);

#[derive(Serialize)]
struct RunnerList {
    runners: Vec<RunnerRow>,
}

pub async fn list(deployment: &mut Deployment, args: ListArgs) -> Outcome {
    let store = deployment.store().await?;
    let statuses: Vec<InstanceStatus> = if args.status.is_empty() {
        InstanceStatus::ALL
            .into_iter()
            .filter(|s| s.is_live())
            .collect()
    } else {
        args.status.iter().map(|s| s.0).collect()
    };
    deployment.progress.wait("reading runners");
    let mut runners = store.list_runners(&statuses).await?;
    deployment.progress.clear();
    runners.retain(|r| args.pool.as_ref().is_none_or(|pool| &r.pool == pool));
    runners.sort_by(|a, b| (&a.pool, a.created_at).cmp(&(&b.pool, b.created_at)));
    let now = OffsetDateTime::now_utc();
    if args.json {
        let runners = runners.iter().map(|r| RunnerRow::new(r, now)).collect();
        print_json(&RunnerList { runners })?;
        return Ok(());
    }
    if runners.is_empty() {
        println!("no runners");
        return Ok(());
    }
    let mut table = Table::new(&[
        "NAME", "POOL", "STATUS", "RUNNER", "INSTANCE", "JOB", "AGE", "REASON",
    ]);
    for r in &runners {
        table.row(vec![
            r.name.as_str().into(),
            r.pool.as_str().into(),
            Cell::status(r.status.as_str()),
            Cell::status(crate::views::shown_runner_status(r)),
            or_dash(r.instance_id.as_deref()).into(),
            or_dash(r.job_id).into(),
            age(r.created_at, now).into(),
            or_dash(r.reason.as_deref()).into(),
        ]);
    }
    print!("{}", table.render(colour_stdout()));
    Ok(())
}

/// A runner's record, or exit code 4.
async fn read_runner(
    deployment: &mut Deployment,
    store: &impl RunnerStore,
    name: &str,
) -> Result<RunnerRecord, Failure> {
    find_runner(deployment, store, name)
        .await?
        .ok_or_else(|| Failure::msg(NOT_FOUND, format!("no runner named {name}")))
}

/// A runner's record, if the table has one, read with the progress line.
async fn find_runner(
    deployment: &mut Deployment,
    store: &impl RunnerStore,
    name: &str,
) -> Result<Option<RunnerRecord>, Failure> {
    deployment.progress.wait(format!("reading runner {name}"));
    let record = store.get_runner(name).await?;
    deployment.progress.clear();
    Ok(record)
}

pub async fn show(deployment: &mut Deployment, args: ShowArgs) -> Outcome {
    let store = deployment.store().await?;
    let record = read_runner(deployment, &store, &args.name).await?;
    if args.json {
        print_json(&RunnerDetail::from(&record))?;
        return Ok(());
    }
    let r = &record;
    let colour = colour_stdout();
    let mut fields = Table::new(&["FIELD", "VALUE"]);
    let mut field = |name: &'static str, value: Cell| fields.row(vec![name.into(), value]);
    field("name", r.name.as_str().into());
    field("pool", r.pool.as_str().into());
    field("status", Cell::status(r.status.as_str()));
    field(
        "runner status",
        Cell::status(crate::views::shown_runner_status(r)),
    );
    field("instance", or_dash(r.instance_id.as_deref()).into());
    field("instance type", or_dash(r.instance_type.as_deref()).into());
    field("market", or_dash(r.market.map(|m| m.as_str())).into());
    field("online", or_dash(r.online_at.map(when)).into());
    field(
        "runner version",
        crate::views::runner_version_shown(&r.host_runner).into(),
    );
    field("github runner id", or_dash(r.github_runner_id).into());
    field("job", or_dash(r.job_id).into());
    field("labels", r.labels.join(", ").into());
    field("ephemeral", r.ephemeral.to_string().into());
    field("installation", or_dash(r.installation_id).into());
    field("owner", r.owner.as_str().into());
    field("repo", or_dash(r.repo.as_deref()).into());
    field("created", when(r.created_at).into());
    field("updated", when(r.updated_at).into());
    field("reason", or_dash(r.reason.as_deref()).into());
    field("attempts", r.attempts.to_string().into());
    field("next attempt", when(r.next_attempt_at).into());
    field("last error", or_dash(r.last_error.as_deref()).into());
    field("expires", or_dash(r.ttl.map(when)).into());
    print!("{}", fields.render(colour));
    println!();
    let mut history = Table::new(&["AT", "STATUS", "RUNNER", "REASON"]);
    for entry in &r.history {
        history.row(vec![
            when(entry.at).into(),
            Cell::status(or_dash(entry.status.map(InstanceStatus::as_str))),
            Cell::status(or_dash(entry.runner_status.map(RunnerStatus::as_str))),
            or_dash(entry.reason.as_deref()).into(),
        ]);
    }
    println!("history:");
    print!("{}", history.render(colour));
    Ok(())
}

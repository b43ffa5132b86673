//! `ephemera runners list | show | delete`: the runner records of a deployment, and the
//! operator delete of docs/design.md.
//!
//! Delete removes the runner from GitHub first — the DELETE is GitHub's own "is it
//! busy?" check, so a runner that is running a job is never marked for deletion — and
//! only then moves the record to `pending_delete` (`pending_force_delete` with
//! `--force`). The reaper does the rest: the instance, the JIT config, the pool slot.

use crate::exit::{Failure, Outcome, BUSY, GITHUB, NOT_FOUND, REFUSED};
use crate::render::{age, colour_stdout, or_dash, when, Cell, Table};
use crate::target::{
    ConfigFileArg, ConfigParameterArg, Deployment, GitHubArgs, GitHubKeyArgs, StackArgs, TableArg,
    TargetArgs,
};
use crate::views::{print_json, RunnerDetail, RunnerRow};
use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::{
    Forge, ForgeError, RunnerRemoval, RunnerScope, RunnerStore, RunnerUpdate, StoreError,
    Transition,
};
use serde::Serialize;
use time::OffsetDateTime;

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

impl ListArgs {
    pub fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack).table(&self.table)
    }
}

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

impl ShowArgs {
    pub fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack).table(&self.table)
    }
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// The runner's name.
    name: String,
    /// Mark it `pending_force_delete`: the reaper then ignores EC2 and GitHub errors and
    /// deletes the record in one pass. GitHub must still let the runner go: a busy
    /// runner is never deleted (unless --no-github).
    #[arg(long)]
    force: bool,
    /// With --force, do not ask GitHub at all: for a runner GitHub cannot be asked
    /// about (the App is no longer installed on its owner). Nothing then checks that it
    /// is idle: terminating its instance ends any job it runs.
    #[arg(long, requires = "force")]
    no_github: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    config_parameter: ConfigParameterArg,
    #[command(flatten)]
    config: ConfigFileArg,
    #[command(flatten)]
    github: GitHubKeyArgs,
}

impl DeleteArgs {
    pub fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
            .table(&self.table)
            .config_parameter(&self.config_parameter)
    }

    pub fn github(&self) -> GitHubArgs {
        GitHubArgs::new(&self.config, Some(&self.github))
    }
}

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
    deployment.progress.wait(format!("reading runner {name}"));
    let record = store.get_runner(name).await?;
    deployment.progress.clear();
    record.ok_or_else(|| Failure::msg(NOT_FOUND, format!("no runner named {name}")))
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

pub async fn delete(deployment: &mut Deployment, args: DeleteArgs) -> Outcome {
    let store = deployment.store().await?;
    let name = args.name.as_str();
    let record = read_runner(deployment, &store, name).await?;
    let target = if args.force {
        InstanceStatus::PendingForceDelete
    } else {
        InstanceStatus::PendingDelete
    };
    if let Some(done) = already_underway(&record, target)? {
        println!("{done}");
        return Ok(());
    }
    match record.github_runner_id {
        _ if args.no_github => deployment
            .progress
            .step(format!("not asking GitHub about {name} (--no-github)")),
        Some(runner_id) => remove_from_github(deployment, &store, &record, runner_id).await?,
        None => deployment
            .progress
            .step(format!("{name} was never registered on GitHub")),
    }
    let reason = match (args.force, args.no_github) {
        (true, true) => "operator --force --no-github",
        (true, false) => "operator --force",
        _ => "operator",
    };
    deployment
        .progress
        .step(format!("marking {name} {target} (was {})", record.status));
    let now = OffsetDateTime::now_utc();
    let transition = Transition::new(record.status, target, now).because(reason);
    match store.transition(name, &transition).await {
        Ok(_) => {}
        Err(StoreError::TransitionRefused { actual, .. }) => {
            return Err(Failure::msg(
                REFUSED,
                format!("runner {name} changed meanwhile (now {actual}); look again with `ephemera runners show {name}`"),
            ))
        }
        Err(err) => return Err(err.into()),
    }
    println!(
        "runner {name}: {target} ({reason}); the reaper terminates its instance and deletes \
         the record on its next run"
    );
    Ok(())
}

/// A deletion that is already on its way: what to tell the operator (exit 0), or why
/// nothing can be done (exit 6). `None`: go ahead.
fn already_underway(
    record: &RunnerRecord,
    target: InstanceStatus,
) -> Result<Option<String>, Failure> {
    let name = &record.name;
    match record.status {
        InstanceStatus::Deleted => Err(Failure::msg(
            REFUSED,
            format!("runner {name} is already deleted"),
        )),
        InstanceStatus::Deleting => Err(Failure::msg(
            REFUSED,
            format!(
                "runner {name} is being deleted by the reaper right now; \
                 check again in a minute with `ephemera runners show {name}`"
            ),
        )),
        status if status == target || status == InstanceStatus::PendingForceDelete => Ok(Some(
            format!("runner {name} is already {status}; the reaper deletes it on its next run"),
        )),
        _ => Ok(None),
    }
}

/// GitHub first: gone (204) or unknown (404) lets the delete go on; busy (422) stops it
/// with exit code 3; any other answer stops it with exit code 5.
async fn remove_from_github(
    deployment: &mut Deployment,
    store: &impl RunnerStore,
    record: &RunnerRecord,
    runner_id: u64,
) -> Outcome {
    let name = &record.name;
    let app = deployment.github_app().await?;
    deployment.progress.step(format!(
        "removing {name} (runner id {runner_id}) from GitHub"
    ));
    let scope = RunnerScope {
        installation_id: record.installation_id,
        owner: record.owner.clone(),
        repo: record.repo.clone(),
    };
    match app.remove_runner(&scope, runner_id).await {
        Ok(RunnerRemoval::Removed) => {
            let update = RunnerUpdate {
                runner_status: Some(RunnerStatus::Terminated),
                note: Some("removed from GitHub by operator".to_owned()),
                ..RunnerUpdate::default()
            };
            store
                .update_runner(name, &update, OffsetDateTime::now_utc())
                .await?;
            deployment.progress.step("removed from GitHub");
            Ok(())
        }
        Ok(RunnerRemoval::NotFound) => {
            deployment
                .progress
                .step("GitHub no longer knows it (already removed)");
            Ok(())
        }
        Ok(RunnerRemoval::Busy) => {
            // The job's repository, to name the job fully; the message stands without it.
            let job = match record.job_id {
                Some(job_id) => store.get_job(job_id).await.ok().flatten(),
                None => None,
            };
            let repo = job.map(|job| format!("{}/{}", job.owner, job.repo));
            Err(Failure::msg(BUSY, busy_message(record, repo)))
        }
        Err(ForgeError::Rejected { status: 404, .. }) => {
            Err(Failure::msg(GITHUB, not_installed_message(record)))
        }
        Err(err) => Err(Failure::new(
            GITHUB,
            anyhow::Error::new(err).context(format!(
                "GitHub did not remove runner {name} (id {runner_id}); nothing was changed"
            )),
        )),
    }
}

/// GitHub answered 404 before the removal itself (the installation token, or the
/// installation of the owner): the App is not installed there, so GitHub cannot be asked.
fn not_installed_message(record: &RunnerRecord) -> String {
    let owner = match &record.repo {
        Some(repo) => format!("{}/{repo}", record.owner),
        None => record.owner.clone(),
    };
    let installation = record
        .installation_id
        .map(|id| format!(" (installation {id})"))
        .unwrap_or_default();
    format!(
        "GitHub answered 404: the GitHub App is not installed on {owner}{installation}, so \
         GitHub cannot be asked to remove runner {name}. Nothing was changed. Install the \
         App on {owner} again and retry, or remove the runner without asking GitHub: \
         `ephemera runners delete {name} --force --no-github` (the reaper then terminates \
         its instance and deletes the record; the registration, if any, is left to GitHub)",
        name = record.name
    )
}

fn busy_message(record: &RunnerRecord, repo: Option<String>) -> String {
    let job = match (record.job_id, repo) {
        (Some(job), Some(repo)) => format!("job {job} of {repo}"),
        (Some(job), None) => format!("job {job}"),
        (None, _) => "a job".to_owned(),
    };
    format!(
        "runner {name} is running {job}: GitHub refuses to remove a busy runner (422), and \
         ephemera never ends a runner in the middle of a job, with or without --force. \
         Cancel the job on GitHub, or wait for it to finish (an ephemeral runner is then \
         deleted by itself), and run this again. Nothing was changed.",
        name = record.name
    )
}

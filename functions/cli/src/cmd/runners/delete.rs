//! `ephemera runners delete`: GitHub first, then the record, so a busy runner is never
//! marked for deletion; `--force` (and `--no-github`) for runners GitHub cannot let go.

use super::read_runner;
use crate::exit::{Failure, Outcome, BUSY, GITHUB, REFUSED};
use crate::target::{
    ConfigFileArg, ConfigParameterArg, Deployment, DeploymentCommand, GitHubArgs, GitHubKeyArgs,
    StackArgs, TableArg, TargetArgs,
};
use clap::Args;
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::{
    Forge, ForgeError, RunnerRemoval, RunnerScope, RunnerStore, RunnerUpdate, StoreError,
    Transition,
};
use time::OffsetDateTime;

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

impl DeploymentCommand for DeleteArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
            .table(&self.table)
            .config_parameter(&self.config_parameter)
    }

    fn github(&self) -> GitHubArgs {
        GitHubArgs::new(&self.config, Some(&self.github))
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        delete(deployment, self).await
    }
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

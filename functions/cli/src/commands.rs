//! The grammar of `ephemera` (clap derive) and the dispatch of each command.
//!
//! Each command takes the deployment options it uses and no others (`--stack`,
//! `--region` and `--endpoint-url` always; `--table`, `--queue-url`,
//! `--config-parameter`, `--config` and the GitHub App's options where they are read),
//! after the command's full name; `local` keeps its own flags. Every command's `--help`
//! ends with examples.

use crate::cmd::{config, costs, destroy, dlq, doctor, jobs, jobs_show, local, pools, runners};
use crate::errors::describe;
use crate::exit::Failure;
use crate::target::on_deployment;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ephemera",
    version,
    about = "Autoscaled, just-in-time GitHub Actions runners on AWS",
    after_help = TOP_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

const TOP_HELP: &str = concat!(
    "Examples:
  ephemera pools --stack ephemera
  ephemera runners list --stack ephemera --status running,error
  ephemera jobs list --stack ephemera --status unrouted
  ephemera jobs dlq list --stack ephemera
  ephemera costs --stack ephemera --since 7d
  ephemera config validate infra/config.example.yaml
  ephemera doctor --stack ephemera

",
    crate::exit::exit_codes!()
);

#[derive(Subcommand)]
enum Command {
    /// Runner records: list, show, delete; a shell on a runner (connect).
    Runners {
        #[command(subcommand)]
        command: RunnersCommand,
    },
    /// Per pool: limits, slots used, live runners by status, queued jobs; the jobs
    /// queue and its dead-letter queue.
    #[command(after_help = "Examples:
  ephemera pools --stack ephemera
  ephemera pools --table ephemera-runners --queue-url URL --config infra/config.example.yaml
  ephemera pools --stack ephemera --json | jq '.queue.dead_letter'")]
    Pools(pools::PoolsArgs),
    /// Jobs seen by the webhook, jobs no pool takes, and the scaler's dead-letter queue.
    Jobs {
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// What the runners' instances cost over a period (runners deleted since then),
    /// summed by the repository of the job each ran and by pool. An estimate: instance
    /// time at the cached on-demand or spot price, no EBS volume or data transfer.
    #[command(after_help = "Examples:
  ephemera costs --stack ephemera
  ephemera costs --stack ephemera --since 24h
  ephemera costs --stack ephemera --since 7d --json | jq '.by_repository'")]
    Costs(costs::CostsArgs),
    /// Check a configuration file, or push it to the deployment.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Check a deployment: the stack, its configuration, the GitHub App (key,
    /// permissions, events, webhook URL, installations, recent deliveries) and each
    /// pool's launch; exit code 8 when a check failed.
    #[command(after_help = concat!(
        "Examples:
  ephemera doctor --stack ephemera
  ephemera doctor --stack ephemera --owner my-org --json | jq '.checks[] | select(.status == \"fail\")'

",
        crate::exit::exit_codes!()
    ))]
    Doctor(doctor::DoctorArgs),
    /// Delete a deployment: the main stack (tables and their data, queues, log groups,
    /// functions), the runner instances left, the image stack, the AMIs and snapshots its
    /// pipelines made, and the parameters no stack owns. Names everything and asks first
    /// (--yes does not); says what it keeps.
    #[command(after_help = concat!(
        "Examples:
  ephemera destroy --stack ephemera
  ephemera destroy --stack ephemera --image-stack ephemera-image --yes
  ephemera destroy --stack ephemera --deployment ephemera --yes   # the stacks are gone already

",
        crate::exit::exit_codes!()
    ))]
    Destroy(destroy::DestroyArgs),
    /// What each exit code means (also `ephemera help exit-codes`).
    #[command(name = "exit-codes", after_help = crate::exit::exit_codes!())]
    ExitCodes,
    /// Run the webhook, scaler and reaper in one process (on a laptop against the moto
    /// emulator, or against real AWS).
    #[command(after_help = local::LOCAL_HELP)]
    Local(local::LocalArgs),
}

#[derive(Subcommand)]
enum RunnersCommand {
    /// Runners by status (every status but deleted unless --status says).
    #[command(after_help = "Examples:
  ephemera runners list --stack ephemera
  ephemera runners list --stack ephemera --pool linux-x64 --status running,error
  ephemera runners list --stack ephemera --status deleted --json")]
    List(runners::ListArgs),
    /// Every field of one runner and its history.
    #[command(after_help = "Examples:
  ephemera runners show eph-linux-x64-l9nj93ftms --stack ephemera
  ephemera runners show eph-linux-x64-l9nj93ftms --stack ephemera --json | jq .history")]
    Show(runners::ShowArgs),
    /// Remove a runner from GitHub, then mark it for the reaper (exit code 3 when it is
    /// running a job).
    #[command(after_help = concat!(
        "Examples:
  ephemera runners delete eph-linux-x64-l9nj93ftms --stack ephemera --github-app-key app.pem
  ephemera runners delete eph-linux-x64-l9nj93ftms --force --stack ephemera --github-app-key app.pem
  ephemera runners delete eph-linux-x64-l9nj93ftms --force --no-github --stack ephemera

",
        crate::exit::exit_codes!()
    ))]
    Delete(runners::DeleteArgs),
    /// A shell on a runner's instance through Session Manager (its pool needs
    /// `ssm_access: true`): runs `aws ssm start-session`, or prints it when the AWS CLI
    /// or the Session Manager plugin is not on PATH.
    #[command(after_help = concat!(
        "Examples:
  ephemera runners connect eph-linux-x64-l9nj93ftms --stack ephemera
  ephemera runners connect eph-linux-x64-l9nj93ftms --stack ephemera --print

",
        crate::exit::exit_codes!()
    ))]
    Connect(runners::ConnectArgs),
    /// What the runner's host shipped: the bootstrap's log and the runner's _diag logs
    /// (also after the runner was deleted; exit code 4 when there are none yet).
    #[command(after_help = "Examples:
  ephemera runners logs eph-linux-x64-l9nj93ftms --stack ephemera
  ephemera runners logs eph-linux-x64-l9nj93ftms --stack ephemera | grep -i error
  ephemera runners logs --instance i-0123456789abcdef0 --stack ephemera --json")]
    Logs(runners::LogsArgs),
}

#[derive(Subcommand)]
enum JobsCommand {
    /// Jobs by status (queued and in_progress unless --status says; `unrouted` lists
    /// the jobs no pool takes).
    #[command(after_help = "Examples:
  ephemera jobs list --stack ephemera
  ephemera jobs list --stack ephemera --status queued --pool linux-x64
  ephemera jobs list --stack ephemera --status unrouted --json")]
    List(jobs::JobsListArgs),
    #[command(about = jobs_show_about(), after_help = "Examples:
  ephemera jobs show 29679449 --stack ephemera
  ephemera jobs show 29679449 --stack ephemera --json")]
    Show(jobs_show::JobsShowArgs),
    /// The scaler's dead-letter queue: the messages it gave up on.
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
}

#[derive(Subcommand)]
enum DlqCommand {
    /// What is in the dead-letter queue: job, repository, labels, receives and why it
    /// failed when known. Reads without consuming (each message is received, then made
    /// visible again at once; that adds one to its receive count).
    #[command(after_help = "Examples:
  ephemera jobs dlq list --stack ephemera
  ephemera jobs dlq list --queue-url URL --table ephemera-runners --json")]
    List(dlq::ListArgs),
    /// Put every message of the dead-letter queue back on the jobs queue, body
    /// unchanged. Each is deleted from the dead-letter queue only after it was sent, so
    /// a crash can leave a message in both queues but never lose one; the duplicate is
    /// harmless, as the scaler handles a job idempotently. Asks first (--yes does not).
    #[command(after_help = "Examples:
  ephemera jobs dlq redrive --stack ephemera
  ephemera jobs dlq redrive --stack ephemera --yes")]
    Redrive(dlq::RedriveArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a file: every problem with its file, line and field (exit code 7).
    #[command(after_help = "Examples:
  ephemera config validate infra/config.example.yaml

Exit codes: 0 valid; 7 invalid (each problem on stderr: FILE:LINE: FIELD: what is wrong,
also for bytes that are not UTF-8); 1 the file cannot be read; all: `ephemera help exit-codes`")]
    Validate(config::ValidateArgs),
    /// Check a file, then write it to the deployment's configuration parameter.
    #[command(after_help = "Examples:
  ephemera config push infra/config.example.yaml --stack ephemera
  ephemera config push big.yaml --config-parameter /ephemera/config --advanced-tier

Exit codes: 0 pushed; 7 invalid or too big for the parameter; 6 the file names another
deployment; 1 AWS failed; all: `ephemera help exit-codes`")]
    Push(config::PushArgs),
}

/// The line every command's help ends with when it does not list the exit codes itself.
const EXIT_CODES_POINTER: &str =
    "Exit codes: 0 done, 1 failure, 2 usage, and those of `ephemera help exit-codes`";

/// The grammar, with every command's help ending in the exit codes or where to read them.
pub fn command() -> clap::Command {
    with_exit_codes(Cli::command())
}

fn with_exit_codes(command: clap::Command) -> clap::Command {
    let command = command.mut_subcommands(with_exit_codes);
    let after = command
        .get_after_help()
        .map(ToString::to_string)
        .unwrap_or_default();
    if after.contains("Exit codes:") {
        return command;
    }
    let after = if after.is_empty() {
        EXIT_CODES_POINTER.to_owned()
    } else {
        format!("{after}\n\n{EXIT_CODES_POINTER}")
    };
    command.after_help(after)
}

/// Parses the process's arguments with [`command`] (exits on a usage error, as clap does).
pub fn parse() -> Cli {
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit())
}

/// Runs the command line; what `main` returns.
pub async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Local(args) => local::run(args).await.map_err(Failure::from),
        Command::Runners { command } => match command {
            RunnersCommand::List(args) => on_deployment(args).await,
            RunnersCommand::Show(args) => on_deployment(args).await,
            RunnersCommand::Delete(args) => on_deployment(args).await,
            RunnersCommand::Connect(args) => on_deployment(args).await,
            RunnersCommand::Logs(args) => on_deployment(args).await,
        },
        Command::Pools(args) => on_deployment(args).await,
        Command::Costs(args) => on_deployment(args).await,
        Command::Jobs { command } => match command {
            JobsCommand::List(args) => on_deployment(args).await,
            JobsCommand::Show(args) => on_deployment(args).await,
            JobsCommand::Dlq { command } => match command {
                DlqCommand::List(args) => on_deployment(args).await,
                DlqCommand::Redrive(args) => on_deployment(args).await,
            },
        },
        Command::Doctor(args) => on_deployment(args).await,
        Command::Destroy(args) => on_deployment(args).await,
        Command::ExitCodes => {
            println!("{}", crate::exit::EXIT_CODES_HELP);
            Ok(())
        }
        Command::Config { command } => match command {
            ConfigCommand::Validate(args) => config::validate(args),
            ConfigCommand::Push(args) => on_deployment(args).await,
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", describe(&failure.error));
            failure.exit_code()
        }
    }
}

/// `jobs show`'s summary, naming every stage of the timeline by the name `jobs show`
/// prints (from [`ephemera_core::timeline::Stage::ALL`], the one list of them).
fn jobs_show_about() -> String {
    let stages: Vec<&str> = ephemera_core::timeline::Stage::ALL
        .iter()
        .map(|stage| stage.as_str())
        .collect();
    format!(
        "One job's timeline: {}, with the gap between each, and the runner, instance type \
         and market (spot or on_demand) that ran it",
        stages.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_show_help_names_every_stage() {
        let help = help_of(&["jobs", "show"]);
        for stage in ephemera_core::timeline::Stage::ALL {
            assert!(help.contains(stage.as_str()), "{stage:?} not named: {help}");
        }
    }

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn deployment_options_go_after_the_command() {
        let cli = Cli::try_parse_from([
            "ephemera", "runners", "delete", "r1", "--force", "--table", "t", "--region", "x",
        ]);
        assert!(cli.is_ok());
        let cli = Cli::try_parse_from(["ephemera", "runners", "list", "--stack", "s", "--json"]);
        assert!(cli.is_ok());
    }

    /// The long help of the command at `path`.
    fn help_of(path: &[&str]) -> String {
        let mut command = Cli::command();
        let mut current = &mut command;
        for name in path {
            current = current
                .find_subcommand_mut(name)
                .unwrap_or_else(|| panic!("no command {name}"));
        }
        current.render_long_help().to_string()
    }

    #[test]
    fn every_command_has_examples_and_only_the_options_it_uses() {
        let commands: [(&[&str], &[&str], &[&str]); 10] = [
            (
                &["runners", "logs"],
                &["--table", "--log-group", "--instance"],
                &["--queue-url", "--github-app-key", "--config-parameter"],
            ),
            (
                &["runners", "list"],
                &["--table", "--status"],
                &["--queue-url", "--github-app-key", "--config "],
            ),
            (
                &["runners", "show"],
                &["--table"],
                &["--queue-url", "--github-app-key", "--config-parameter"],
            ),
            (
                &["runners", "delete"],
                &["--github-app-key", "--no-github", "--config "],
                &["--queue-url"],
            ),
            (
                &["pools"],
                &["--queue-url", "--config "],
                &["--github-app-key", "--github-api-url"],
            ),
            (
                &["jobs", "list"],
                &["--table", "--status"],
                &["--queue-url", "--github-app-key", "--config "],
            ),
            (
                &["jobs", "dlq", "list"],
                &["--queue-url", "--table"],
                &["--github-app-key", "--config "],
            ),
            (
                &["jobs", "dlq", "redrive"],
                &["--queue-url", "--yes"],
                &["--table", "--github-app-key"],
            ),
            (
                &["config", "validate"],
                &[],
                &["--stack", "--table", "--region"],
            ),
            (
                &["config", "push"],
                &["--config-parameter", "--stack"],
                &["--table", "--queue-url", "--github-app-key"],
            ),
        ];
        for (path, present, absent) in commands {
            let help = help_of(path);
            assert!(help.contains("Examples:\n  ephemera "), "{path:?}: {help}");
            for option in present {
                assert!(help.contains(option), "{path:?} lacks {option}: {help}");
            }
            for option in absent {
                assert!(!help.contains(option), "{path:?} lists {option}: {help}");
            }
        }
        assert!(help_of(&[]).contains("Examples:"));
        assert!(help_of(&["local"]).contains("Examples:"));
    }

    /// Every command below `command`, with its path.
    fn every_command(command: &clap::Command, path: String, into: &mut Vec<(String, String)>) {
        let mut command = command.clone();
        let help = command.render_long_help().to_string();
        into.push((path.clone(), help));
        // clap's own `help` subcommands print other commands' help.
        for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
            let sub_path = format!("{path} {}", sub.get_name());
            every_command(sub, sub_path, into);
        }
    }

    #[test]
    fn every_command_help_gives_the_exit_codes_or_where_they_are() {
        let mut commands = Vec::new();
        every_command(&command(), "ephemera".to_owned(), &mut commands);
        assert!(commands.len() > 20, "{}", commands.len());
        for (path, help) in &commands {
            assert!(
                help.contains("Exit codes:")
                    && (help.contains("  0  done") || help.contains("`ephemera help exit-codes`")),
                "{path}: {help}"
            );
        }
        let page = commands
            .iter()
            .find(|(path, _)| path == "ephemera exit-codes")
            .expect("the exit-codes page");
        assert!(page.1.contains(crate::exit::EXIT_CODES_HELP), "{}", page.1);
    }

    #[test]
    fn status_options_list_their_values() {
        let help = help_of(&["runners", "list"]);
        for status in [
            "pending_create",
            "running",
            "pending_force_delete",
            "deleted",
        ] {
            assert!(help.contains(status), "{status}: {help}");
        }
        let help = help_of(&["jobs", "list"]);
        for status in ["queued", "in_progress", "completed", "unrouted"] {
            assert!(help.contains(status), "{status}: {help}");
        }
        let wrong = Cli::try_parse_from(["ephemera", "jobs", "list", "--status", "nope"]);
        assert!(wrong.is_err());
    }
}

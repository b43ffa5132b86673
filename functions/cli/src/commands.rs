//! The grammar of `ephemera` (clap derive) and the dispatch of each command.
//!
//! The deployment options (`--stack`, `--table`, `--queue-url`, `--config-parameter`,
//! `--region`, `--endpoint-url`) are accepted anywhere after an operator command's name;
//! `local` keeps its own flags.

use crate::exit::{Failure, EXIT_CODES_HELP};
use crate::target::{Deployment, GitHubArgs, TargetArgs};
use crate::{config_cmd, pools, runners};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ephemera",
    version,
    about = "Autoscaled, just-in-time GitHub Actions runners on AWS",
    after_help = EXIT_CODES_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runner records: list, show, delete.
    #[command(after_help = EXIT_CODES_HELP)]
    Runners {
        #[command(subcommand)]
        command: RunnersCommand,
        #[command(flatten)]
        target: TargetArgs,
        #[command(flatten)]
        github: GitHubArgs,
    },
    /// Per pool: limits, slots used, live runners by status, queued jobs.
    Pools {
        #[command(flatten)]
        args: pools::PoolsArgs,
        #[command(flatten)]
        target: TargetArgs,
        #[command(flatten)]
        github: GitHubArgs,
    },
    /// Jobs seen by the webhook.
    Jobs {
        #[command(subcommand)]
        command: JobsCommand,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Check a configuration file, or push it to the deployment.
    #[command(after_help = EXIT_CODES_HELP)]
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Run the webhook, scaler and reaper in one process (on a laptop against the moto
    /// emulator, or against real AWS).
    #[command(after_help = crate::local::LOCAL_HELP)]
    Local(crate::local::LocalArgs),
}

#[derive(Subcommand)]
enum RunnersCommand {
    /// Runners by status (every status but deleted unless --status says).
    List(runners::ListArgs),
    /// Every field of one runner and its history.
    Show(runners::ShowArgs),
    /// Remove a runner from GitHub, then mark it for the reaper (exit code 3 when it is
    /// running a job).
    #[command(after_help = EXIT_CODES_HELP)]
    Delete(runners::DeleteArgs),
}

#[derive(Subcommand)]
enum JobsCommand {
    /// Jobs by status (queued and in_progress unless --status says).
    List(pools::JobsListArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a file: every problem with its file, line and field (exit code 7).
    Validate(config_cmd::ValidateArgs),
    /// Check a file, then write it to the deployment's configuration parameter.
    Push(config_cmd::PushArgs),
}

/// Runs the command line; what `main` returns.
pub async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Local(args) => crate::local::run(args).await.map_err(Failure::from),
        Command::Runners {
            command,
            target,
            github,
        } => {
            let mut deployment = Deployment::new(target, github).await;
            match command {
                RunnersCommand::List(args) => runners::list(&mut deployment, args).await,
                RunnersCommand::Show(args) => runners::show(&mut deployment, args).await,
                RunnersCommand::Delete(args) => runners::delete(&mut deployment, args).await,
            }
        }
        Command::Pools {
            args,
            target,
            github,
        } => pools::pools(&mut Deployment::new(target, github).await, args).await,
        Command::Jobs {
            command: JobsCommand::List(args),
            target,
        } => {
            pools::jobs(
                &mut Deployment::new(target, GitHubArgs::default()).await,
                args,
            )
            .await
        }
        Command::Config {
            command: ConfigCommand::Validate(args),
            ..
        } => config_cmd::validate(args),
        Command::Config {
            command: ConfigCommand::Push(args),
            target,
        } => {
            let mut deployment = Deployment::new(target, GitHubArgs::default()).await;
            config_cmd::push(&mut deployment, args).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {:#}", failure.error);
            failure.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
        let cli = Cli::try_parse_from(["ephemera", "runners", "--stack", "s", "list", "--json"]);
        assert!(cli.is_ok());
    }
}

//! `ephemera runners connect`: a shell on a runner's instance through Session Manager.
//!
//! The record names the instance; the configuration says whether the runner's pool
//! launches with `ssm_access` (the instance profile whose role the SSM agent needs, see
//! template.yaml's RunnerSsmRole). The session itself is the AWS CLI's:
//! `aws ssm start-session --target i-…`, which needs the Session Manager plugin
//! (<https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html>)
//! and the operator's `ssm:StartSession` on the instance. When both programs are on
//! `PATH` the command replaces this process (so Ctrl-C reaches the session, not us);
//! otherwise, or with `--print`, the exact command is printed with what is missing.

use super::read_runner;
use crate::exit::{Failure, Outcome, FAILURE, REFUSED};
use crate::target::{
    ConfigFileArg, ConfigParameterArg, Deployment, DeploymentCommand, GitHubArgs, StackArgs,
    TableArg, TargetArgs,
};
use clap::Args;
use ephemera_core::config::Config;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::RunnerRecord;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The programs a session needs.
pub const AWS_CLI: &str = "aws";
pub const SESSION_PLUGIN: &str = "session-manager-plugin";

#[derive(Args, Debug)]
pub struct ConnectArgs {
    /// The runner's name.
    name: String,
    /// Print the command that opens the session instead of running it.
    #[arg(long)]
    print: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    config_parameter: ConfigParameterArg,
    #[command(flatten)]
    config: ConfigFileArg,
}

impl DeploymentCommand for ConnectArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
            .table(&self.table)
            .config_parameter(&self.config_parameter)
    }

    fn github(&self) -> GitHubArgs {
        GitHubArgs::new(&self.config, None)
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        connect(deployment, self).await
    }
}

/// Where the session goes and through which AWS settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionTarget {
    pub instance_id: String,
    pub region: Option<String>,
    pub profile: Option<String>,
    /// An emulator's endpoint, passed on as the command's `--endpoint-url`.
    pub endpoint_url: Option<String>,
}

impl SessionTarget {
    /// The arguments of `aws` that open the session.
    pub fn aws_args(&self) -> Vec<String> {
        let mut args: Vec<String> = ["ssm", "start-session", "--target", &self.instance_id]
            .map(str::to_owned)
            .to_vec();
        for (flag, value) in [
            ("--region", &self.region),
            ("--profile", &self.profile),
            ("--endpoint-url", &self.endpoint_url),
        ] {
            if let Some(value) = value {
                args.extend([flag.to_owned(), value.clone()]);
            }
        }
        args
    }

    /// The whole command, as an operator would type it in a POSIX shell.
    pub fn shell_line(&self) -> String {
        std::iter::once(AWS_CLI.to_owned())
            .chain(self.aws_args().iter().map(|a| shell_quote(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `word` quoted for a POSIX shell when it needs to be.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The runner's instance, or why there is no session to open: the record has none yet,
/// or it is gone, or its pool does not launch with `ssm_access` (exit code 6).
pub fn session_instance<'a>(record: &'a RunnerRecord, config: &Config) -> Result<&'a str, Failure> {
    let name = &record.name;
    if matches!(
        record.status,
        InstanceStatus::Deleting | InstanceStatus::Deleted
    ) {
        let message = format!(
            "runner {name} is {}: its instance is terminated or about to be",
            record.status.as_str()
        );
        return Err(Failure::msg(REFUSED, message));
    }
    let Some(instance) = record.instance_id.as_deref() else {
        let message = format!(
            "runner {name} has no instance yet (status {}); try again once `ephemera runners \
             show {name}` names one",
            record.status.as_str()
        );
        return Err(Failure::msg(REFUSED, message));
    };
    let pool = &record.pool;
    match config.pool(pool) {
        Some(p) if p.ssm_access => Ok(instance),
        Some(_) => Err(Failure::msg(
            REFUSED,
            format!(
                "pool {pool} has no ssm_access, so its instances cannot take a session: set \
                 `ssm_access: true` on the pool, push the configuration (ephemera config push) \
                 and connect to a runner launched after that"
            ),
        )),
        None => Err(Failure::msg(
            REFUSED,
            format!("runner {name} belongs to pool {pool}, which the configuration no longer has"),
        )),
    }
}

/// Which of `programs` no directory of `path` (a `PATH` value) holds as an executable.
pub fn missing_programs<'a>(path: Option<&OsStr>, programs: &[&'a str]) -> Vec<&'a str> {
    let dirs: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    programs
        .iter()
        .copied()
        .filter(|program| !dirs.iter().any(|dir| is_executable(&dir.join(program))))
        .collect()
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

/// What to tell an operator who lacks `missing`.
fn missing_help(missing: &[&str]) -> String {
    let mut lines = vec![format!("not on PATH: {}", missing.join(", "))];
    if missing.contains(&AWS_CLI) {
        lines.push(
            "install the AWS CLI: https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html"
                .to_owned(),
        );
    }
    if missing.contains(&SESSION_PLUGIN) {
        lines.push(
            "install the Session Manager plugin: https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html"
                .to_owned(),
        );
    }
    lines.push("then run the command above".to_owned());
    lines.join("\n")
}

pub async fn connect(deployment: &mut Deployment, args: ConnectArgs) -> Outcome {
    let store = deployment.store().await?;
    let record = read_runner(deployment, &store, &args.name).await?;
    let config = deployment.config().await?;
    let target = SessionTarget {
        instance_id: session_instance(&record, config)?.to_owned(),
        region: deployment.sdk.region().map(|r| r.to_string()),
        profile: std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty()),
        endpoint_url: deployment.target.endpoint_url.clone(),
    };
    deployment.progress.clear();
    if args.print {
        println!("{}", target.shell_line());
        return Ok(());
    }
    let path = std::env::var_os("PATH");
    let missing = missing_programs(path.as_deref(), &[AWS_CLI, SESSION_PLUGIN]);
    if !missing.is_empty() {
        println!("{}", target.shell_line());
        return Err(Failure::msg(FAILURE, missing_help(&missing)));
    }
    start_session(&target)
}

/// Runs `aws ssm start-session` in place of this process (on Unix), or as a child.
fn start_session(target: &SessionTarget) -> Outcome {
    let mut command = std::process::Command::new(AWS_CLI);
    command.args(target.aws_args());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let err = command.exec();
        Err(Failure::new(
            FAILURE,
            anyhow::Error::new(err).context(format!("running {}", target.shell_line())),
        ))
    }
    #[cfg(not(unix))]
    {
        let status = command.status()?;
        if status.success() {
            return Ok(());
        }
        Err(Failure::msg(
            FAILURE,
            format!("{AWS_CLI} exited with {status}"),
        ))
    }
}

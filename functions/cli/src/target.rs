//! Which deployment an operator command talks to, and how to reach it: the groups of
//! options the commands take (each command takes only those it uses), resolved lazily
//! into the table, the queue, the configuration and the GitHub App — each read only when
//! the command needs it.
//!
//! `--stack NAME` reads the stack's outputs (`TableName`, `QueueUrl`,
//! `ConfigParameterName`, `RunnerLogGroupName`); `--table`, `--queue-url`,
//! `--config-parameter` and `--log-group` name the resources directly and win over the
//! stack. The configuration comes from `--config
//! FILE`, else from the deployment's SSM parameter.

use crate::exit::{Failure, Outcome, GITHUB, INVALID_CONFIG, USAGE};
use crate::render::Progress;
use anyhow::Context;
use aws_config::SdkConfig;
use clap::Args;
use ephemera_aws::stack::{self, StackOutputs};
use ephemera_aws::token_shelf::DynamoTokenShelf;
use ephemera_aws::{AwsSettings, DynamoRunnerStore};
use ephemera_core::config::Config;
use ephemera_github::{GitHubApp, GitHubAppConfig};
use secrecy::SecretString;
use std::path::PathBuf;

/// Which deployment, and where AWS is: taken by every command that talks to one.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Deployment")]
pub struct StackArgs {
    /// The deployment's CloudFormation stack: the table, queue and configuration
    /// parameter this command uses are read from its outputs.
    #[arg(long, env = "EPHEMERA_STACK", value_name = "NAME")]
    pub stack: Option<String>,
    /// The AWS region (default: from the environment and profile, else us-east-1).
    #[arg(long, env = "AWS_REGION", value_name = "REGION")]
    pub region: Option<String>,
    /// An AWS endpoint to use instead of AWS's own (an emulator).
    #[arg(long, env = "AWS_ENDPOINT_URL", value_name = "URL")]
    pub endpoint_url: Option<String>,
}

/// The table, for commands that read or write it.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Deployment")]
pub struct TableArg {
    /// The DynamoDB table (overrides the stack's `TableName`).
    #[arg(long, env = "EPHEMERA_TABLE", value_name = "NAME")]
    pub table: Option<String>,
}

/// The jobs queue, for commands that read it.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Deployment")]
pub struct QueueArg {
    /// The jobs queue (overrides the stack's `QueueUrl`).
    #[arg(long, env = "EPHEMERA_QUEUE_URL", value_name = "URL")]
    pub queue_url: Option<String>,
}

/// The runners' log group, for commands that read the runners' logs.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Deployment")]
pub struct LogGroupArg {
    /// The runners' CloudWatch Logs group (overrides the stack's `RunnerLogGroupName`).
    #[arg(long, env = "EPHEMERA_LOG_GROUP", value_name = "NAME")]
    pub log_group: Option<String>,
}

/// The configuration parameter, for commands that read or write it.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Deployment")]
pub struct ConfigParameterArg {
    /// The SSM parameter holding the configuration (overrides the stack's
    /// `ConfigParameterName`).
    #[arg(long, env = "EPHEMERA_CONFIG_PARAMETER", value_name = "NAME")]
    pub config_parameter: Option<String>,
}

/// A configuration file instead of the deployment's parameter.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Configuration and GitHub")]
pub struct ConfigFileArg {
    /// Read the configuration from this file instead of the deployment's parameter.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The GitHub App, for commands that call GitHub.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Configuration and GitHub")]
pub struct GitHubKeyArgs {
    /// The GitHub App's private key (PEM).
    #[arg(long, env = "EPHEMERA_GITHUB_APP_KEY_FILE", value_name = "FILE")]
    pub github_app_key: Option<PathBuf>,
    /// GitHub API base URL; overrides `github.api_url` of the configuration.
    #[arg(long, value_name = "URL")]
    pub github_api_url: Option<String>,
}

/// Where the deployment is, gathered from the options a command takes (those it does
/// not take stay `None`).
#[derive(Debug, Clone, Default)]
pub struct TargetArgs {
    pub stack: Option<String>,
    pub table: Option<String>,
    pub queue_url: Option<String>,
    pub config_parameter: Option<String>,
    pub log_group: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
}

impl TargetArgs {
    pub fn new(stack: &StackArgs) -> TargetArgs {
        TargetArgs {
            stack: stack.stack.clone(),
            region: stack.region.clone(),
            endpoint_url: stack.endpoint_url.clone(),
            ..TargetArgs::default()
        }
    }

    pub fn table(mut self, arg: &TableArg) -> TargetArgs {
        self.table = arg.table.clone();
        self
    }

    pub fn queue(mut self, arg: &QueueArg) -> TargetArgs {
        self.queue_url = arg.queue_url.clone();
        self
    }

    pub fn log_group(mut self, arg: &LogGroupArg) -> TargetArgs {
        self.log_group = arg.log_group.clone();
        self
    }

    pub fn config_parameter(mut self, arg: &ConfigParameterArg) -> TargetArgs {
        self.config_parameter = arg.config_parameter.clone();
        self
    }
}

/// The configuration and GitHub access (commands that need them).
#[derive(Debug, Clone, Default)]
pub struct GitHubArgs {
    pub config: Option<PathBuf>,
    pub github_app_key: Option<PathBuf>,
    pub github_api_url: Option<String>,
}

impl GitHubArgs {
    pub fn new(config: &ConfigFileArg, key: Option<&GitHubKeyArgs>) -> GitHubArgs {
        GitHubArgs {
            config: config.config.clone(),
            github_app_key: key.and_then(|k| k.github_app_key.clone()),
            github_api_url: key.and_then(|k| k.github_api_url.clone()),
        }
    }
}

/// A command run on a deployment: the options that say where it is, and the command.
/// [`on_deployment`] is the one set-up they all share.
pub trait DeploymentCommand: Sized {
    /// Where the deployment is, from the options the command takes.
    fn target(&self) -> TargetArgs;

    /// The configuration file and the GitHub App options, for the commands that take
    /// them.
    fn github(&self) -> GitHubArgs {
        GitHubArgs::default()
    }

    /// Runs the command on the deployment set up from [`Self::target`] and
    /// [`Self::github`].
    fn run(self, deployment: &mut Deployment) -> impl std::future::Future<Output = Outcome>;
}

/// [`DeploymentCommand`] for a command that reads the table alone (its `stack` and `table`
/// options), run by `$run(deployment, args)`.
macro_rules! table_command {
    ($args:ty, $run:path) => {
        impl $crate::target::DeploymentCommand for $args {
            fn target(&self) -> $crate::target::TargetArgs {
                $crate::target::TargetArgs::new(&self.stack).table(&self.table)
            }

            async fn run(
                self,
                deployment: &mut $crate::target::Deployment,
            ) -> $crate::exit::Outcome {
                $run(deployment, self).await
            }
        }
    };
}
pub(crate) use table_command;

/// Sets up the deployment `command` names (nothing is read yet), then runs it there.
pub async fn on_deployment(command: impl DeploymentCommand) -> Outcome {
    let mut deployment = Deployment::new(command.target(), command.github()).await;
    let outcome = command.run(&mut deployment).await;
    match outcome {
        // DynamoDB's "Requested resource not found" names no table: name it.
        Err(mut failure) if crate::errors::is_missing_table(&failure.error) => {
            if let Ok(Some(table)) = deployment.table_if_known().await {
                let source = if deployment.target.table.is_some() {
                    "--table"
                } else {
                    "the stack's TableName output"
                };
                failure.error = failure
                    .error
                    .context(format!("table {table} (from {source}) does not exist"));
            }
            Err(failure)
        }
        outcome => outcome,
    }
}

/// A deployment being talked to; everything is read on first use and kept.
pub struct Deployment {
    pub target: TargetArgs,
    pub github: GitHubArgs,
    pub sdk: SdkConfig,
    pub progress: Progress,
    outputs: Option<StackOutputs>,
    config: Option<Config>,
}

impl Deployment {
    pub async fn new(target: TargetArgs, github: GitHubArgs) -> Deployment {
        let settings = AwsSettings {
            endpoint_url: target.endpoint_url.clone(),
            region: target.region.clone(),
            static_credentials: None,
            ..AwsSettings::default()
        };
        Deployment {
            sdk: ephemera_aws::sdk_config(&settings).await,
            target,
            github,
            progress: Progress::new(),
            outputs: None,
            config: None,
        }
    }

    /// The stack's outputs, if a stack was named.
    async fn outputs(&mut self) -> Result<Option<&StackOutputs>, Failure> {
        let Some(name) = self.target.stack.clone() else {
            return Ok(None);
        };
        if self.outputs.is_none() {
            self.progress
                .wait(format!("reading the outputs of stack {name}"));
            self.outputs = Some(stack::stack_outputs(&self.sdk, &name).await?);
            self.progress.clear();
        }
        Ok(self.outputs.as_ref())
    }

    /// The table: `--table`, else the stack's `TableName`.
    pub async fn table(&mut self) -> Result<String, Failure> {
        if let Some(table) = &self.target.table {
            return Ok(table.clone());
        }
        match self.outputs().await? {
            Some(outputs) => Ok(outputs
                .require(&outputs.table_name, stack::TABLE_NAME)?
                .to_owned()),
            None => Err(Failure::msg(
                USAGE,
                "which deployment? give --stack NAME, or --table NAME",
            )),
        }
    }

    /// The runners' log group: `--log-group`, else the stack's `RunnerLogGroupName`.
    pub async fn runner_log_group(&mut self) -> Result<String, Failure> {
        if let Some(group) = &self.target.log_group {
            return Ok(group.clone());
        }
        match self.outputs().await? {
            Some(outputs) => Ok(outputs
                .require(&outputs.runner_log_group_name, stack::RUNNER_LOG_GROUP_NAME)?
                .to_owned()),
            None => Err(Failure::msg(
                USAGE,
                "which log group? give --stack NAME, or --log-group NAME",
            )),
        }
    }

    /// The jobs queue URL, when one was named or the stack has one.
    pub async fn queue_url(&mut self) -> Result<Option<String>, Failure> {
        if let Some(url) = &self.target.queue_url {
            return Ok(Some(url.clone()));
        }
        Ok(self.outputs().await?.and_then(|o| o.queue_url.clone()))
    }

    /// The table when one was named or the stack has one (for what is only shown when
    /// known).
    pub async fn table_if_known(&mut self) -> Result<Option<String>, Failure> {
        if let Some(table) = &self.target.table {
            return Ok(Some(table.clone()));
        }
        Ok(self.outputs().await?.and_then(|o| o.table_name.clone()))
    }

    /// The configuration parameter: `--config-parameter`, else the stack's
    /// `ConfigParameterName`.
    pub async fn config_parameter(&mut self) -> Result<String, Failure> {
        if let Some(name) = &self.target.config_parameter {
            return Ok(name.clone());
        }
        match self.outputs().await? {
            Some(outputs) => Ok(outputs
                .require(&outputs.config_parameter_name, stack::CONFIG_PARAMETER_NAME)?
                .to_owned()),
            None => Err(Failure::msg(
                USAGE,
                "which configuration parameter? give --stack NAME, or --config-parameter NAME",
            )),
        }
    }

    /// The stack's default configuration parameter (`DefaultConfigParameterName`), read
    /// while the configuration parameter does not exist; none without a stack.
    pub async fn default_config_parameter(&mut self) -> Result<Option<String>, Failure> {
        Ok(self
            .outputs()
            .await?
            .and_then(|o| o.default_config_parameter_name.clone()))
    }

    /// The store on the deployment's table.
    pub async fn store(&mut self) -> Result<DynamoRunnerStore, Failure> {
        let table = self.table().await?;
        Ok(DynamoRunnerStore::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            table,
        ))
    }

    /// Whether a configuration can be had without guessing (a file or a parameter).
    pub fn has_config_source(&self) -> bool {
        self.github.config.is_some()
            || self.target.config_parameter.is_some()
            || self.target.stack.is_some()
    }

    /// The configuration: `--config FILE`, else the deployment's parameter.
    pub async fn config(&mut self) -> Result<&Config, Failure> {
        if self.config.is_none() {
            let config = match self.github.config.clone() {
                Some(file) => {
                    Config::load(&file).map_err(|err| Failure::new(INVALID_CONFIG, err))?
                }
                None => {
                    let name = self.config_parameter().await?;
                    let default = self.default_config_parameter().await?;
                    self.progress.wait(format!("reading configuration {name}"));
                    let ssm = aws_sdk_ssm::Client::new(&self.sdk);
                    let loaded = ephemera_aws::config_source::load_config_or_default(
                        &ssm,
                        &name,
                        default.as_deref(),
                    )
                    .await?;
                    self.progress.clear();
                    loaded.config
                }
            };
            self.config = Some(config);
        }
        self.config
            .as_ref()
            .context("configuration missing after loading")
            .map_err(Failure::from)
    }

    /// The GitHub App, with its key from `--github-app-key` and its id and API URL from
    /// the configuration (`--github-api-url` wins).
    pub async fn github_app(&mut self) -> Result<GitHubApp, Failure> {
        let key_file = self.github.github_app_key.clone().ok_or_else(|| {
            Failure::msg(
                USAGE,
                "removing a runner from GitHub needs the App's private key: \
                 --github-app-key FILE (or EPHEMERA_GITHUB_APP_KEY_FILE)",
            )
        })?;
        let pem = std::fs::read_to_string(&key_file)
            .with_context(|| format!("cannot read the GitHub App key {}", key_file.display()))?;
        let api_url = self.github.github_api_url.clone();
        let config = self.config().await?;
        let api_url = api_url.unwrap_or_else(|| config.github.api_url.clone());
        let key = SecretString::from(pem);
        let app = GitHubApp::new(GitHubAppConfig::new(api_url, config.github.app_id, key))
            .map_err(|err| {
                Failure::new(
                    GITHUB,
                    anyhow::Error::new(err)
                        .context(format!("GitHub App key {}", key_file.display())),
                )
            })?;
        // The deployment's shared installation token, when its table is known; without
        // one the CLI mints its own.
        let app = match self.table_if_known().await {
            Ok(Some(table)) => app.with_token_shelf(std::sync::Arc::new(DynamoTokenShelf::new(
                aws_sdk_dynamodb::Client::new(&self.sdk),
                table,
            ))),
            _ => app,
        };
        Ok(app)
    }
}

//! The `ephemera` binary driven as an operator drives it (assert_cmd), against moto and
//! the GitHub simulator: listing in both forms, the operator delete and its exit codes,
//! `config validate` / `config push`, `destroy` of a whole deployment, `runners connect`, a runner's logs, the dead-letter
//! queue, unrouted jobs, errors, a lost webhook recovered by `ephemera local`'s
//! redelivery sweep, a flood of unsigned requests at its webhook, and a newcomer's
//! `make up` session.

mod apps;
mod config;
mod connect;
mod delete;
mod destroy;
mod dlq;
mod errors;
mod flood;
mod kills;
mod local;
mod local_world;
mod logs;
mod newcomer;
mod redelivery;
mod shared_token;
mod sizing;
mod unrouted;
mod views;

use assert_cmd::Command;
use ephemera_tests::pipeline::{workspace_path, Pipeline, APP_ID, DEPLOYMENT};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// A scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> anyhow::Result<Scratch> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
        let dir = std::env::temp_dir().join(format!("ephemera-cli-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }

    /// Writes `text` to `name` in the directory; returns its path.
    pub fn write(&self, name: &str, text: &str) -> anyhow::Result<PathBuf> {
        let path = self.0.join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The test pipeline's configuration as a file would hold it.
pub fn config_yaml(deployment: &str, api_url: &str) -> String {
    format!(
        "deployment: {deployment}\ngithub:\n  app_id: {APP_ID}\n  api_url: {api_url}\npools:\n  \
         - name: linux-x64\n    labels: [self-hosted, linux, x64]\n    max_runners: 10\n    \
         instance_types: [t3.micro]\n    launch_template: {deployment}-runner\n"
    )
}

/// `ephemera` with the emulator's credentials, from the workspace root, no colour and
/// nothing inherited that names another deployment.
pub fn ephemera() -> anyhow::Result<Command> {
    let mut command = Command::cargo_bin("ephemera")?;
    command
        .current_dir(workspace_path(""))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("NO_COLOR", "1")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_REGION")
        .env_remove("EPHEMERA_STACK")
        .env_remove("EPHEMERA_TABLE")
        .env_remove("EPHEMERA_QUEUE_URL")
        .env_remove("EPHEMERA_CONFIG_PARAMETER")
        .env_remove("EPHEMERA_GITHUB_APP_KEY_FILE")
        .env_remove("EPHEMERA_WEBHOOK_URL")
        .env_remove("EPHEMERA_OWNERS");
    Ok(command)
}

/// An operator at the pipeline's deployment: table, emulator, GitHub simulator, App key
/// and configuration file.
pub struct Operator {
    pub endpoint: String,
    pub table: String,
    pub sim_url: String,
    pub config: PathBuf,
    _scratch: Scratch,
}

impl Operator {
    pub fn new(p: &Pipeline) -> anyhow::Result<Operator> {
        let scratch = Scratch::new()?;
        let config = scratch.write("config.yaml", &config_yaml(DEPLOYMENT, &p.sim.url))?;
        Ok(Operator {
            endpoint: p.moto.endpoint.clone(),
            table: ephemera_aws::ResourceNames::for_deployment(DEPLOYMENT).table,
            sim_url: p.sim.url.clone(),
            config,
            _scratch: scratch,
        })
    }

    /// `ephemera ARGS --endpoint-url … --table … --region us-east-1`.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<Command> {
        let mut command = ephemera()?;
        command.args(args).args([
            "--endpoint-url",
            &self.endpoint,
            "--table",
            &self.table,
            "--region",
            "us-east-1",
        ]);
        Ok(command)
    }

    /// `ephemera ARGS --endpoint-url … --region us-east-1` (for commands without a
    /// `--table`, or to give another).
    pub fn run_without_table(&self, args: &[&str]) -> anyhow::Result<Command> {
        let mut command = ephemera()?;
        command
            .args(args)
            .args(["--endpoint-url", &self.endpoint, "--region", "us-east-1"]);
        Ok(command)
    }

    /// Like [`Operator::run`], with the configuration file (pools).
    pub fn run_with_config(&self, args: &[&str]) -> anyhow::Result<Command> {
        let mut command = self.run(args)?;
        command.arg("--config").arg(&self.config);
        Ok(command)
    }

    /// Like [`Operator::run`], with the configuration file and GitHub (runners delete).
    pub fn run_with_github(&self, args: &[&str]) -> anyhow::Result<Command> {
        let mut command = self.run(args)?;
        let key = workspace_path("tests/fixtures/github-app-test-key.pem");
        command
            .arg("--config")
            .arg(&self.config)
            .arg("--github-app-key")
            .arg(key)
            .args(["--github-api-url", &self.sim_url]);
        Ok(command)
    }
}

/// Stdout of a finished command, as text (also printed: the test shows it on failure).
pub fn stdout_of(output: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("{text}");
    text
}

/// Stderr of a finished command, as text (also printed).
pub fn stderr_of(output: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr).into_owned();
    println!("{text}");
    text
}

//! A deployment run by the real `ephemera local` binary: moto, where `--bootstrap` makes
//! the table, queues, JIT table and launch template, the GitHub simulator delivering to
//! the process, and the process itself, which a test can kill (SIGKILL, as a crash or an
//! out-of-memory kill would) and start again; then what the settled world holds, read
//! from the emulator and the simulator.
//!
//! (Not the stack made from template.yaml: moto runs the scaler function's SQS event
//! source mapping on every SendMessage, receiving the messages for a function it cannot
//! run, so they would reach the DLQ behind the back of the process under test.)

use super::Scratch;
use ephemera_aws::{AwsSettings, DynamoRunnerStore, Ec2Fleet, ResourceNames};
use ephemera_core::config::Config;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::JobStatus;
use ephemera_core::ports::{Fleet, RunnerStore};
use ephemera_tests::moto::{free_port, Moto};
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::sim::{self, SimConfig, SimHandle};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The App's webhook secret in these worlds.
const WEBHOOK_SECRET: &str = "local-world-webhook-secret";

/// What a world is made with.
pub struct LocalOptions {
    /// The configuration file's text; `None`: infra/config.example.yaml.
    pub config_yaml: Option<String>,
    pub job_duration: Duration,
    pub pickup_delay: Duration,
    /// `--reaper-interval`.
    pub reaper_interval: &'static str,
    /// `--only` parts of the world's process; all three when empty.
    pub only: Vec<&'static str>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            config_yaml: None,
            job_duration: Duration::from_secs(1),
            pickup_delay: Duration::from_millis(500),
            reaper_interval: "2s",
            only: Vec::new(),
        }
    }
}

pub struct LocalWorld {
    pub moto: Moto,
    pub sim: SimHandle,
    pub config: Config,
    config_path: PathBuf,
    reaper_interval: &'static str,
    only: Vec<&'static str>,
    /// The webhook listener's port, the same for every start.
    pub port: u16,
    /// Every start's output, one after another.
    pub log_path: PathBuf,
    process: Option<Child>,
    _scratch: Scratch,
}

impl LocalWorld {
    /// Starts moto with the stack, the simulator delivering to the port the process will
    /// listen on, and the process.
    pub async fn start(options: LocalOptions) -> anyhow::Result<LocalWorld> {
        let scratch = Scratch::new()?;
        let config_path = match &options.config_yaml {
            Some(yaml) => scratch.write("config.yaml", yaml)?,
            None => workspace_path("infra/config.example.yaml"),
        };
        let config = Config::load(&config_path)?;
        let public_key =
            std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pub.pem"))?;
        let moto = Moto::start().await?;
        let mut sim_config = SimConfig::new(
            config.github.app_id,
            public_key,
            WEBHOOK_SECRET,
            &config.deployment,
        );
        // Every further App of the configuration: in the simulator, and its key in the
        // secret the configuration names (the second test key; each App's JWT names it).
        if !config.github.more_apps.is_empty() {
            let public_key = std::fs::read_to_string(workspace_path(
                "tests/fixtures/github-app-test-key-2.pub.pem",
            ))?;
            let private_key = std::fs::read_to_string(workspace_path(
                "tests/fixtures/github-app-test-key-2.pem",
            ))?;
            let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
            let secrets = aws_sdk_secretsmanager::Client::new(&sdk);
            for app in &config.github.more_apps {
                sim_config.more_apps.push((app.app_id, public_key.clone()));
                secrets
                    .create_secret()
                    .name(&app.key_secret)
                    .secret_string(&private_key)
                    .send()
                    .await?;
            }
        }
        sim_config.aws_endpoint = Some(moto.endpoint.clone());
        sim_config.job_duration = options.job_duration;
        sim_config.pickup_delay = options.pickup_delay;
        let sim = sim::start(sim_config).await?;
        let port = free_port()?;
        let log_path = scratch.write("ephemera-local.log", "")?;
        let mut world = LocalWorld {
            moto,
            sim,
            config,
            config_path,
            reaper_interval: options.reaper_interval,
            only: options.only,
            port,
            log_path,
            process: None,
            _scratch: scratch,
        };
        world.spawn().await?;
        Ok(world)
    }

    /// Where the process takes webhooks.
    /// Creates `count` jobs in `octo-org/app` with the first pool's labels; their ids.
    pub async fn create_jobs(&self, count: usize) -> anyhow::Result<Vec<u64>> {
        let labels: Vec<&str> = self.config.pools[0]
            .labels
            .iter()
            .map(String::as_str)
            .collect();
        let mut jobs = Vec::with_capacity(count);
        for _ in 0..count {
            jobs.push(
                self.sim
                    .create_job("octo-org", "app", &labels, None)
                    .await?,
            );
        }
        Ok(jobs)
    }

    pub fn webhook_url(&self) -> String {
        format!("http://127.0.0.1:{}/webhook", self.port)
    }

    /// Starts the process (again) and waits until it listens; the simulator delivers to
    /// it from then on.
    pub async fn spawn(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.process.is_none(), "ephemera local is already running");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log_path)?;
        let only = self.only.clone();
        let child = self.command(&only, log)?.spawn()?;
        self.process = Some(child);
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            if let Some(status) = self
                .process
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                anyhow::bail!("ephemera local exited ({status}):\n{}", self.log());
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(60),
                "ephemera local did not listen:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.sim.set_webhook_url(self.webhook_url());
        Ok(())
    }

    /// `ephemera local` on this world with the `--only` parts `only`, its output appended
    /// to `log`.
    fn command(&self, only: &[&str], log: std::fs::File) -> anyhow::Result<Command> {
        let key = workspace_path("tests/fixtures/github-app-test-key.pem");
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("ephemera"));
        command
            .current_dir(workspace_path(""))
            .args([
                "local",
                "--bootstrap",
                "--reaper-interval",
                self.reaper_interval,
            ])
            .arg("--config")
            .arg(&self.config_path)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--github-api-url", &self.sim.url, "--github-app-key"])
            .arg(&key)
            .env("AWS_ENDPOINT_URL", &self.moto.endpoint)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env("EPHEMERA_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info,ephemera_cli=debug")
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        for part in only {
            command.args(["--only", part]);
        }
        Ok(command)
    }

    /// A second process on the same world, running the `--only` parts `only` (without
    /// the webhook, which holds the port), its output in `log`; stopped when dropped.
    pub fn spawn_other(&self, only: &[&str], log: &std::path::Path) -> anyhow::Result<Child> {
        anyhow::ensure!(
            !only.contains(&"webhook"),
            "the world's process holds the port"
        );
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        Ok(self.command(only, file)?.spawn()?)
    }

    /// SIGKILL: no shutdown, no flush, whatever the process was in the middle of.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.process.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    /// Everything the process printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The deployment's table, instances and JIT configs, through uncounted clients.
    pub async fn aws(&self) -> DeploymentView {
        let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&self.moto.endpoint)).await;
        let names = ResourceNames::for_deployment(&self.config.deployment);
        DeploymentView {
            store: DynamoRunnerStore::new(aws_sdk_dynamodb::Client::new(&sdk), &names.table),
            fleet: Ec2Fleet::new(aws_sdk_ec2::Client::new(&sdk), &self.config.deployment),
            dynamodb: aws_sdk_dynamodb::Client::new(&sdk),
            sqs: aws_sdk_sqs::Client::new(&sdk),
            names,
        }
    }
}

/// What the deployment holds in AWS, read as an operator's tools would.
pub struct DeploymentView {
    pub store: DynamoRunnerStore,
    pub fleet: Ec2Fleet,
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    names: ResourceNames,
}

/// What is left of a run: anything here once the world has settled is a leak.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Runner records not `deleted`, by name and status.
    pub live_records: Vec<(String, InstanceStatus)>,
    /// Instances of the deployment not terminated.
    pub live_instances: Vec<String>,
    /// JIT configs waiting in their table.
    pub jit_configs: usize,
    /// Pool slots held.
    pub slots_used: u64,
    /// Messages in the dead-letter queue.
    pub dead_lettered: u64,
    /// Job records still `queued` or `in_progress`.
    pub unsettled_jobs: Vec<(u64, JobStatus)>,
}

impl DeploymentView {
    pub async fn leftovers(&self, pools: &[String]) -> anyhow::Result<Leftovers> {
        let far = time::OffsetDateTime::now_utc() + Duration::from_secs(365 * 86_400);
        let mut left = Leftovers::default();
        for status in InstanceStatus::ALL {
            if status == InstanceStatus::Deleted {
                continue;
            }
            for record in self.store.runners_in_status(status, far, 10_000).await? {
                left.live_records.push((record.name, status));
            }
        }
        for status in [JobStatus::Queued, JobStatus::InProgress] {
            for job in self.store.jobs_in_status(status, far, 10_000).await? {
                left.unsettled_jobs.push((job.job_id, status));
            }
        }
        left.live_instances = self
            .fleet
            .describe_live()
            .await?
            .into_iter()
            .map(|i| i.id)
            .collect();
        let jit = self
            .dynamodb
            .scan()
            .table_name(&self.names.jit_table)
            .select(aws_sdk_dynamodb::types::Select::Count)
            .send()
            .await?;
        left.jit_configs = usize::try_from(jit.count())?;
        for pool in pools {
            left.slots_used += u64::from(self.store.get_pool(pool).await?.slots_used);
        }
        left.dead_lettered = self.dead_lettered().await?;
        Ok(left)
    }

    /// Job records `completed`.
    pub async fn completed_jobs(&self) -> anyhow::Result<Vec<u64>> {
        let far = time::OffsetDateTime::now_utc() + Duration::from_secs(365 * 86_400);
        let jobs = self
            .store
            .jobs_in_status(JobStatus::Completed, far, 10_000)
            .await?;
        Ok(jobs.into_iter().map(|j| j.job_id).collect())
    }

    async fn dlq_url(&self) -> anyhow::Result<String> {
        Ok(self
            .sqs
            .get_queue_url()
            .queue_name(&self.names.dlq)
            .send()
            .await?
            .queue_url
            .unwrap_or_default())
    }

    /// Up to 10 dead-lettered messages with their receive counts, to say what failed.
    pub async fn dead_letters(&self) -> anyhow::Result<Vec<(String, String)>> {
        use aws_sdk_sqs::types::MessageSystemAttributeName as Attr;
        let received = self
            .sqs
            .receive_message()
            .queue_url(self.dlq_url().await?)
            .max_number_of_messages(10)
            .message_system_attribute_names(Attr::All)
            .send()
            .await?;
        Ok(received
            .messages()
            .iter()
            .map(|m| {
                let count = m
                    .attributes()
                    .and_then(|a| a.get(&Attr::ApproximateReceiveCount))
                    .cloned()
                    .unwrap_or_default();
                (count, m.body().unwrap_or_default().to_owned())
            })
            .collect())
    }

    async fn dead_lettered(&self) -> anyhow::Result<u64> {
        use aws_sdk_sqs::types::QueueAttributeName as Attr;
        let url = self.dlq_url().await?;
        let attributes = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(Attr::ApproximateNumberOfMessages)
            .attribute_names(Attr::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await?;
        let count = |name: Attr| -> u64 {
            attributes
                .attributes()
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Ok(count(Attr::ApproximateNumberOfMessages)
            + count(Attr::ApproximateNumberOfMessagesNotVisible))
    }
}

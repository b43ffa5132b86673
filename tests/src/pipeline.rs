//! The whole pipeline in one test process: moto for AWS, the GitHub simulator, and the
//! handlers of `ephemera local` wired to the real adapters — the webhook listener on a
//! loopback port, the queue drained into the scaler, the reaper run on demand (or on a
//! timer), with a fault-injecting wrapper around the real EC2 fleet adapter.
//!
//! Each part calls AWS as its function's role on AWS (`WebhookRole`, `ScalerRole`,
//! `ReaperRole` of template.yaml), which the strict layer enforces; the test's own
//! reads and the setup go as the operator (`sdk`, `store`, `queue`, `fleet`).

use crate::calls::CallCounter;
use crate::faults::FaultyFleet;
use crate::moto::Moto;
use crate::sim::{self, SimConfig, SimFaults, SimHandle};
use anyhow::{bail, Context};
use aws_config::SdkConfig;
use ephemera_aws::provision::{ensure_resources, ResourceNames};
use ephemera_aws::{
    AwsPriceList, AwsSettings, DynamoJitConfigs, DynamoPriceBook, DynamoRunnerStore, Ec2Fleet,
    SqsJobQueue,
};
use ephemera_core::config::Config;
use ephemera_core::handlers::reaper::{
    Pricing, Reaper, ReaperCapabilities, ReaperPorts, ReaperReport, Reruns,
};
use ephemera_core::handlers::scaler::{Scaler, ScalerCapabilities, ScalerPorts, ThreadJitter};
use ephemera_core::handlers::webhook::{WebhookCapabilities, WebhookHandler};
use ephemera_core::metrics::Metrics;
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::{Fleet, InstanceState, RunnerStore};
use ephemera_core::webhook::WebhookSecrets;
use ephemera_github::{GitHubApp, GitHubAppConfig};
use secrecy::SecretString;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// The deployment prefix of the test pipeline.
pub const DEPLOYMENT: &str = "eph";
/// The webhook secret shared by the simulator and the webhook handler.
pub const WEBHOOK_SECRET: &str = "test-webhook-secret";
/// The App id the simulator expects in JWTs.
pub const APP_ID: u64 = 4242;
/// The second App of a pipeline started with [`PipelineOptions::two_apps`].
pub const SECOND_APP_ID: u64 = 4343;
/// Labels the test pool serves.
pub const LABELS: [&str; 3] = ["self-hosted", "linux", "x64"];

/// How the test wants the pipeline.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    pub max_runners: u32,
    pub job_duration: Duration,
    pub pickup_delay: Duration,
    /// Instances boot over `0..=boot_spread`, each at a time of its own (the simulator's
    /// [`crate::sim::SimConfig::boot_spread`]).
    pub boot_spread: Duration,
    /// `Some` runs the reaper on this interval; `None` leaves it to `reap_once`.
    pub reaper_interval: Option<Duration>,
    /// Whether the scaler drains the queue (off to look at the queue itself).
    pub drain_queue: bool,
    /// How many scaler loops drain the queue at once (concurrent invocations).
    pub scaler_loops: usize,
    /// Extra lines for the test pool's configuration (e.g. `    spot: true\n`).
    pub pool_extra: String,
    /// The test pool's `labels` (YAML flow list items).
    pub pool_labels: String,
    /// What the GitHub simulator gets wrong (nothing by default).
    pub github_faults: SimFaults,
    /// Where the handlers and their GitHub clients write metrics (nowhere by default).
    pub metrics: Metrics,
    /// How long a job over capacity waits before it is tried again.
    pub capacity_retry: Duration,
    /// The region whose prices the reaper reads (from the strict layer's recorded
    /// answers) to price each job; `None`: jobs are not priced.
    pub priced_in: Option<&'static str>,
    /// A second App ([`SECOND_APP_ID`], the second test key) in the configuration's
    /// `github.more_apps` and in the simulator, installed on the same accounts.
    pub two_apps: bool,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            max_runners: 10,
            job_duration: Duration::from_secs(1),
            pickup_delay: Duration::from_millis(300),
            boot_spread: Duration::ZERO,
            reaper_interval: Some(Duration::from_millis(500)),
            drain_queue: true,
            scaler_loops: 1,
            pool_extra: String::new(),
            pool_labels: LABELS.join(", "),
            github_faults: SimFaults::default(),
            metrics: Metrics::disabled(),
            capacity_retry: Duration::from_secs(1),
            priced_in: None,
            two_apps: false,
        }
    }
}

/// A running pipeline; everything it started stops when it is dropped.
pub struct Pipeline {
    pub moto: Moto,
    pub sim: SimHandle,
    pub sdk: SdkConfig,
    pub config: Arc<Config>,
    pub store: Arc<DynamoRunnerStore>,
    /// The reaper's own store (its role's client): what a reaper run reads is counted
    /// here, not in `store`.
    pub reaper_store: Arc<DynamoRunnerStore>,
    pub queue: Arc<SqsJobQueue>,
    pub fleet: Arc<FaultyFleet>,
    /// The scaler's and the reaper's GitHub clients: separate, as in Lambda, where they
    /// are separate functions with their own token caches and call counts.
    pub scaler_forge: Arc<GitHubApp>,
    pub reaper_forge: Arc<GitHubApp>,
    /// Every App's scaler client, the first App's (`scaler_forge`) first.
    pub scaler_apps: Vec<Arc<GitHubApp>>,
    pub webhook_url: String,
    /// The SDK configurations of the three parts: each its function's role.
    pub webhook_sdk: SdkConfig,
    pub scaler_sdk: SdkConfig,
    pub reaper_sdk: SdkConfig,
    /// The jobs queue's dead-letter queue.
    pub dlq_url: String,
    /// Every AWS call the pipeline's own clients made (not the simulator's), by operation.
    pub calls: CallCounter,
    scaler: Arc<Scaler>,
    /// The queue as the scaler reads it (its role's credentials).
    scaler_queue: Arc<SqsJobQueue>,
    scaler_loops: usize,
    draining: bool,
    reaper: Arc<Reaper>,
    tasks: JoinSet<anyhow::Result<()>>,
}

fn spawn_scaler_loops(
    tasks: &mut JoinSet<anyhow::Result<()>>,
    scaler: &Arc<Scaler>,
    queue: &Arc<SqsJobQueue>,
    loops: usize,
) {
    for _ in 0..loops {
        tasks.spawn(ephemera_cli::cmd::local::drain_queue(
            scaler.clone(),
            queue.clone(),
        ));
    }
}

fn counted_dynamodb(sdk: &SdkConfig, calls: &CallCounter) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(sdk)
            .interceptor(calls.clone())
            .build(),
    )
}

fn counted_sqs(sdk: &SdkConfig, calls: &CallCounter) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(sdk)
            .interceptor(calls.clone())
            .build(),
    )
}

/// The reaper's prices: cached in `table`, read for `region` through counted clients
/// (the Price List Query API's in us-east-1, EC2's in `region`).
pub fn counted_pricing(
    sdk: &SdkConfig,
    calls: &CallCounter,
    table: &str,
    region: &str,
) -> (DynamoPriceBook, AwsPriceList) {
    let pricing = aws_sdk_pricing::Client::from_conf(
        aws_sdk_pricing::config::Builder::from(sdk)
            .region(aws_config::Region::new(
                ephemera_aws::prices::PRICE_LIST_REGION,
            ))
            .interceptor(calls.clone())
            .build(),
    );
    let ec2 = aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::config::Builder::from(sdk)
            .region(aws_config::Region::new(region.to_owned()))
            .interceptor(calls.clone())
            .build(),
    );
    (
        DynamoPriceBook::new(counted_dynamodb(sdk, calls), table),
        AwsPriceList::from_clients(pricing, ec2, region),
    )
}

fn counted_ec2(sdk: &SdkConfig, calls: &CallCounter) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::config::Builder::from(sdk)
            .interceptor(calls.clone())
            .build(),
    )
}

/// The path of a file under the workspace root.
pub fn workspace_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

/// The configuration the test pipeline runs with.
pub fn test_config(api_url: &str, max_runners: u32) -> anyhow::Result<Config> {
    test_config_with(api_url, max_runners, "")
}

/// The test configuration, with `pool_extra` lines added to the pool.
pub fn test_config_with(
    api_url: &str,
    max_runners: u32,
    pool_extra: &str,
) -> anyhow::Result<Config> {
    test_config_labelled(api_url, max_runners, &LABELS.join(", "), pool_extra)
}

/// The test configuration with the pool's `labels` and `pool_extra` lines.
pub fn test_config_labelled(
    api_url: &str,
    max_runners: u32,
    pool_labels: &str,
    pool_extra: &str,
) -> anyhow::Result<Config> {
    let yaml = format!(
        r#"
deployment: {DEPLOYMENT}
github:
  app_id: {APP_ID}
  api_url: {api_url}
pools:
  - name: linux-x64
    labels: [{pool_labels}]
    max_runners: {max_runners}
    instance_types: [t3.micro]
    launch_template: {DEPLOYMENT}-runner
{pool_extra}"#
    );
    Ok(Config::parse("test-config.yaml", &yaml)?)
}

impl Pipeline {
    pub async fn start(options: PipelineOptions) -> anyhow::Result<Pipeline> {
        let moto = Moto::start().await?;
        let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
        let calls = CallCounter::default();
        let resources = ensure_resources(&sdk, &ResourceNames::for_deployment(DEPLOYMENT)).await?;

        let public_key =
            std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pub.pem"))?;
        let mut sim_config = SimConfig::new(APP_ID, public_key, WEBHOOK_SECRET, DEPLOYMENT);
        sim_config.aws_endpoint = Some(moto.endpoint.clone());
        sim_config.job_duration = options.job_duration;
        sim_config.pickup_delay = options.pickup_delay;
        sim_config.boot_spread = options.boot_spread;
        sim_config.faults = options.github_faults.clone();
        if options.two_apps {
            let second = std::fs::read_to_string(workspace_path(
                "tests/fixtures/github-app-test-key-2.pub.pem",
            ))?;
            sim_config.more_apps = vec![(SECOND_APP_ID, second)];
        }
        let sim = sim::start(sim_config).await?;

        let mut config = test_config_labelled(
            &sim.url,
            options.max_runners,
            &options.pool_labels,
            &options.pool_extra,
        )?;
        if options.two_apps {
            config
                .github
                .more_apps
                .push(ephemera_core::config::MoreApp {
                    app_id: SECOND_APP_ID,
                    key_secret: format!("{DEPLOYMENT}/github-app-{SECOND_APP_ID}"),
                });
        }
        let config = Arc::new(config);
        let role = |name: &'static str| {
            let moto = &moto;
            async move {
                let settings = moto.role_settings(name, DEPLOYMENT).await?;
                anyhow::Ok(ephemera_aws::sdk_config(&settings).await)
            }
        };
        let (webhook_sdk, scaler_sdk, reaper_sdk) = (
            role("WebhookRole").await?,
            role("ScalerRole").await?,
            role("ReaperRole").await?,
        );
        // The test's own view (the operator's), and each part's (its role's).
        let store = Arc::new(DynamoRunnerStore::new(
            counted_dynamodb(&sdk, &calls),
            &resources.table,
        ));
        let queue = Arc::new(SqsJobQueue::new(
            counted_sqs(&sdk, &calls),
            &resources.queue_url,
        ));
        let ec2 = Arc::new(Ec2Fleet::new(counted_ec2(&sdk, &calls), DEPLOYMENT));
        let fleet = Arc::new(FaultyFleet::new(ec2));
        let store_as = |sdk: &SdkConfig| {
            Arc::new(DynamoRunnerStore::new(
                counted_dynamodb(sdk, &calls),
                &resources.table,
            ))
        };
        let queue_as = |sdk: &SdkConfig| {
            Arc::new(SqsJobQueue::new(
                counted_sqs(sdk, &calls),
                &resources.queue_url,
            ))
        };
        let fleet_as = |sdk: &SdkConfig| {
            Arc::new(fleet.sharing_faults(Arc::new(Ec2Fleet::new(
                counted_ec2(sdk, &calls),
                DEPLOYMENT,
            ))))
        };
        let jit_as = |sdk: &SdkConfig| {
            Arc::new(DynamoJitConfigs::new(
                counted_dynamodb(sdk, &calls),
                &resources.jit_table,
            ))
        };
        let private_key =
            std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pem"))?;
        let github_app = |app_id: u64, pem: &str| {
            let key = SecretString::from(pem.to_owned());
            GitHubApp::new(GitHubAppConfig::new(&sim.url, app_id, key))
                .map(|app| Arc::new(app.with_metrics(options.metrics.clone())))
        };
        let (scaler_forge, reaper_forge) = (
            github_app(APP_ID, &private_key)?,
            github_app(APP_ID, &private_key)?,
        );
        let mut scaler_apps = vec![scaler_forge.clone()];
        let mut reaper_apps = vec![reaper_forge.clone()];
        if options.two_apps {
            let second = std::fs::read_to_string(workspace_path(
                "tests/fixtures/github-app-test-key-2.pem",
            ))?;
            scaler_apps.push(github_app(SECOND_APP_ID, &second)?);
            reaper_apps.push(github_app(SECOND_APP_ID, &second)?);
        }
        // One App: the client itself, as the functions use it.
        let scaler_github =
            ephemera_github::forge_over(scaler_apps.clone(), ephemera_github::unshared_pace);
        let reaper_github =
            ephemera_github::forge_over(reaper_apps, ephemera_github::unshared_pace);

        let mut tasks = JoinSet::new();
        let secrets_for_webhook = WebhookSecrets {
            current: SecretString::from(WEBHOOK_SECRET),
            previous: None,
        };
        let unrouted = ephemera_aws::DynamoUnroutedJobs::new(
            counted_dynamodb(&webhook_sdk, &calls),
            &resources.table,
        );
        let handler = Arc::new(WebhookHandler::new(
            config.clone(),
            secrets_for_webhook,
            queue_as(&webhook_sdk),
            WebhookCapabilities {
                metrics: options.metrics.clone(),
                unrouted: Some(Arc::new(unrouted)),
            },
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let webhook_url = format!("http://{}/webhook", listener.local_addr()?);
        let router = ephemera_cli::cmd::local::webhook_router(handler);
        tasks.spawn(async move { Ok(axum::serve(listener, router).await?) });
        sim.set_webhook_url(&webhook_url);

        let breakers_as = |sdk: &SdkConfig| {
            Arc::new(ephemera_aws::breaker::DynamoSpotBreakers::new(
                counted_dynamodb(sdk, &calls),
                &resources.table,
            ))
        };
        let reruns_as = |sdk: &SdkConfig| {
            Arc::new(ephemera_aws::reruns::DynamoReruns::new(
                counted_dynamodb(sdk, &calls),
                &resources.table,
            ))
        };
        let scaler_queue = queue_as(&scaler_sdk);
        let scaler_ports = ScalerPorts {
            config: config.clone(),
            store: store_as(&scaler_sdk),
            launcher: fleet_as(&scaler_sdk),
            forge: scaler_github,
            jit_store: jit_as(&scaler_sdk),
            queue: scaler_queue.clone(),
        };
        // As the deployment's scaler (`ephemera_aws::assembly`), but unpaced: the tests
        // register at the simulator's pace, and the capacity retry is theirs to set.
        let scaler = Arc::new(Scaler::new(
            scaler_ports,
            ScalerCapabilities {
                metrics: options.metrics.clone(),
                spot_breakers: Some(breakers_as(&scaler_sdk)),
                reruns: Some(reruns_as(&scaler_sdk)),
                registration_pace: None,
                capacity_retry: options.capacity_retry,
                jitter: Arc::new(ThreadJitter),
            },
        ));
        let scaler_loops = options.scaler_loops.max(1);
        if options.drain_queue {
            spawn_scaler_loops(&mut tasks, &scaler, &scaler_queue, scaler_loops);
        }
        let reaper_store = store_as(&reaper_sdk);
        let reaper_ports = ReaperPorts {
            config: config.clone(),
            store: reaper_store.clone(),
            fleet: fleet_as(&reaper_sdk),
            forge: reaper_github,
            jit_store: jit_as(&reaper_sdk),
            queue: queue_as(&reaper_sdk),
        };
        let pricing = options.priced_in.map(|region| {
            let (book, list) = counted_pricing(&reaper_sdk, &calls, &resources.table, region);
            Pricing {
                book: Arc::new(book),
                list: Arc::new(list),
            }
        });
        // As the deployment's reaper (`ephemera_aws::assembly`), but without the lease:
        // the tests run this reaper by hand while its timer runs it too, and a run that
        // found the lease held would do nothing; and without the redelivery sweep, whose
        // tests run `ephemera local`. `tests/e2e/lambda/lease.rs` runs the deployment's.
        let reaper = Arc::new(Reaper::new(
            reaper_ports,
            ReaperCapabilities {
                metrics: options.metrics.clone(),
                lease: None,
                deliveries: None,
                reruns: Some(Reruns {
                    store: reruns_as(&reaper_sdk),
                    runs: reaper_forge.clone(),
                }),
                spot_breakers: Some(breakers_as(&reaper_sdk)),
                pricing,
                runner_sync: None,
            },
        ));
        if let Some(interval) = options.reaper_interval {
            let reaper = reaper.clone();
            tasks
                .spawn(async move { ephemera_cli::cmd::local::reap_every(reaper, interval).await });
        }
        Ok(Pipeline {
            moto,
            sim,
            sdk,
            config,
            store,
            reaper_store,
            queue,
            fleet,
            scaler_forge,
            reaper_forge,
            scaler_apps,
            webhook_url,
            webhook_sdk,
            scaler_sdk,
            reaper_sdk,
            dlq_url: resources.dlq_url.clone(),
            calls,
            scaler,
            scaler_queue,
            scaler_loops,
            draining: options.drain_queue,
            reaper,
            tasks,
        })
    }

    /// Messages in the dead-letter queue, visible or in flight.
    pub async fn dead_lettered(&self) -> anyhow::Result<u64> {
        use aws_sdk_sqs::types::QueueAttributeName as Attr;
        let attributes = aws_sdk_sqs::Client::new(&self.sdk)
            .get_queue_attributes()
            .queue_url(&self.dlq_url)
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

    /// Starts the scaler loops of a pipeline started with `drain_queue: false`.
    pub fn start_draining(&mut self) {
        if !self.draining {
            self.draining = true;
            spawn_scaler_loops(
                &mut self.tasks,
                &self.scaler,
                &self.scaler_queue,
                self.scaler_loops,
            );
        }
    }

    /// One reaper run, now.
    pub async fn reap_once(&self) -> anyhow::Result<ReaperReport> {
        self.reap_at(time::OffsetDateTime::now_utc()).await
    }

    /// One reaper run that takes `now` for the time (to pass timeouts without waiting).
    pub async fn reap_at(&self, now: time::OffsetDateTime) -> anyhow::Result<ReaperReport> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        Ok(self.reaper.run(now, deadline).await?)
    }

    /// The runner record claimed by `job_id`, if any.
    pub async fn runner_for_job(&self, job_id: u64) -> anyhow::Result<Option<RunnerRecord>> {
        let Some(job) = self.store.get_job(job_id).await? else {
            return Ok(None);
        };
        let Some(name) = job.runner_name else {
            return Ok(None);
        };
        Ok(self.store.get_runner(&name).await?)
    }

    /// The deployment's adapters over this pipeline's resources, as the reaper Lambda
    /// function builds them and calling AWS as its role, for the handlers of
    /// `ephemera_aws::assembly` (prices read in us-east-1).
    pub fn deployment(&self) -> ephemera_aws::assembly::Deployment {
        let names = ResourceNames::for_deployment(DEPLOYMENT);
        let sdk = &self.reaper_sdk;
        let dynamodb = || counted_dynamodb(sdk, &self.calls);
        let (book, list) = counted_pricing(sdk, &self.calls, &names.table, "us-east-1");
        let fleet = Arc::new(Ec2Fleet::new(counted_ec2(sdk, &self.calls), DEPLOYMENT));
        ephemera_aws::assembly::Deployment {
            config: self.config.clone(),
            metrics: Metrics::disabled(),
            store: Arc::new(DynamoRunnerStore::new(dynamodb(), &names.table)),
            fleet: fleet.clone(),
            launcher: fleet,
            jit_store: Arc::new(DynamoJitConfigs::new(dynamodb(), &names.jit_table)),
            queue: Arc::new(SqsJobQueue::new(
                counted_sqs(sdk, &self.calls),
                self.queue.queue_url(),
            )),
            spot_breakers: Arc::new(ephemera_aws::breaker::DynamoSpotBreakers::new(
                dynamodb(),
                &names.table,
            )),
            reruns: Arc::new(ephemera_aws::reruns::DynamoReruns::new(
                dynamodb(),
                &names.table,
            )),
            pricing: Pricing {
                book: Arc::new(book),
                list: Arc::new(list),
            },
            runner_copy: None,
        }
    }

    /// The JIT config table of the test deployment, through an uncounted client.
    pub fn jit_configs(&self) -> DynamoJitConfigs {
        let table = ResourceNames::for_deployment(DEPLOYMENT).jit_table;
        DynamoJitConfigs::new(aws_sdk_dynamodb::Client::new(&self.sdk), table)
    }

    /// Whether the JIT config of `instance_id` waits in the JIT table.
    pub async fn jit_config_exists(&self, instance_id: &str) -> anyhow::Result<bool> {
        let jit = self.jit_configs();
        let item = aws_sdk_dynamodb::Client::new(&self.sdk)
            .get_item()
            .table_name(jit.table())
            .set_key(Some(ephemera_aws::jit::item_key(
                &jit.instance_arn(instance_id),
            )))
            .consistent_read(true)
            .send()
            .await?;
        Ok(item.item.is_some())
    }

    /// The instance ARNs whose JIT config waits in the JIT table (a test-only scan).
    pub async fn waiting_jit_configs(&self) -> anyhow::Result<Vec<String>> {
        let jit = self.jit_configs();
        let key = ephemera_aws::jit::INSTANCE_ARN;
        let pages = aws_sdk_dynamodb::Client::new(&self.sdk)
            .scan()
            .table_name(jit.table())
            .projection_expression(key)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await?;
        Ok(pages
            .iter()
            .filter_map(|item| item.get(key)?.as_s().ok().cloned())
            .collect())
    }

    /// EC2's state of an instance of this deployment.
    pub async fn instance_state(&self, instance_id: &str) -> anyhow::Result<Option<InstanceState>> {
        let instances = self.fleet.inner().describe().await?;
        Ok(instances
            .into_iter()
            .find(|i| i.id == instance_id)
            .map(|i| i.state))
    }

    /// Polls `check` every 100 ms until it gives `Some`, for at most `limit`.
    pub async fn wait_for<T, F, Fut>(
        &self,
        what: &str,
        limit: Duration,
        mut check: F,
    ) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Option<T>>>,
    {
        let started = Instant::now();
        loop {
            if let Some(value) = check()
                .await
                .with_context(|| format!("while waiting for {what}"))?
            {
                return Ok(value);
            }
            if started.elapsed() > limit {
                bail!("{what}: not seen within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Fails if a background part (listener, queue drain, reaper timer) has stopped.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(Ok(result)) = self.tasks.try_join_next() {
            result.context("a pipeline part stopped")?;
            bail!("a pipeline part stopped");
        }
        Ok(())
    }
}

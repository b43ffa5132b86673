//! `ephemera local`: the three handlers in one process — an HTTP listener for webhooks,
//! a long-poll loop that drains the queue into the scaler, and the reaper on a timer —
//! wired to the same adapters the Lambda functions use, and the scaler and the reaper
//! assembled as theirs are (`ephemera_aws::assembly`: registration pace, reaper lease,
//! breakers, re-runs, prices).
//!
//! Its configuration is a file (`--config`, read once) or what a stack holds (`--stack`:
//! the parameter the stack's functions read, on the stack's table and queue). A stack's
//! parameter is read again every `--reload-interval`; a new version builds the parts'
//! handlers again, each part takes the new one at its next request, batch or run, and
//! each records the version it runs, as the functions do (`ephemera doctor`'s
//! `config.running`).
//!
//! Layout: this module is the command (its options and the wiring of the parts);
//! [`inputs`] checks and reads what the chosen parts need (the webhook secret, the App
//! key); [`loops`] holds the parts themselves, public so the end-to-end tests drive
//! exactly what `ephemera local` runs.

mod inputs;
mod loops;

use inputs::{aws_sdk_sqs_client, github_apps, missing_inputs, webhook_secrets_from_env};
use loops::shutdown_signal;
pub use loops::{
    drain_queue, drain_queue_following, reap_every, reap_every_following, webhook_router,
    webhook_router_following,
};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ephemera_aws::assembly::{Deployment, WebhookApp};
use ephemera_aws::breaker::DynamoSpotBreakers;
use ephemera_aws::reruns::DynamoReruns;
use ephemera_aws::stack::{CONFIG_PARAMETER_NAME, QUEUE_URL, TABLE_NAME};
use ephemera_aws::token_shelf::DynamoTokenShelf;
use ephemera_aws::{
    AwsPriceList, AwsSettings, DynamoJitConfigs, DynamoPriceBook, DynamoRunnerStore,
    DynamoUnroutedJobs, Ec2Fleet, SqsJobQueue,
};
use ephemera_core::config::{ranges, Config};
use ephemera_core::handlers::reaper::{Pricing, Reaper};
use ephemera_core::handlers::scaler::Scaler;
use ephemera_core::handlers::webhook::{WebhookCapabilities, WebhookHandler};
use ephemera_core::metrics::Metrics;
use ephemera_core::pace::{AppPaces, GITHUB_REGISTRATIONS_PER_MINUTE};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info, warn};

/// What `ephemera local --help` adds after the options: the environment it reads.
pub const LOCAL_HELP: &str = "\
Environment:
  EPHEMERA_WEBHOOK_SECRET           the webhook secret (required with the webhook part)
  EPHEMERA_WEBHOOK_SECRET_PREVIOUS  the previous secret, accepted while rotating
  EPHEMERA_GITHUB_APP_KEY_FILE      the App's private key, as --github-app-key
  AWS_ENDPOINT_URL, AWS_REGION      as --endpoint-url, --region
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY  credentials (any value for an emulator)
  AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE  the profile (and file) --part-profile names

Examples:
  EPHEMERA_WEBHOOK_SECRET=s3cret ephemera local --config infra/config.example.yaml \\
      --github-app-key app.pem --bootstrap --endpoint-url http://127.0.0.1:5000
  ephemera local --config config.yaml --github-app-key app.pem --only reaper --reaper-interval 1m
  ephemera local --stack ephemera --github-app-key app.pem   # what the stack holds, followed";

#[derive(Args)]
pub struct LocalArgs {
    /// The configuration file (YAML), read once.
    #[arg(long, value_name = "FILE", required_unless_present = "stack")]
    config: Option<PathBuf>,
    /// Run what the deployment's CloudFormation stack holds: the configuration its
    /// functions read (the pushed parameter, else the stack's default), followed as
    /// `ephemera config push` changes it, on the stack's table and queue.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["config", "bootstrap"])]
    stack: Option<String>,
    /// With --stack: how often the configuration parameter is read again, e.g. 30s (the
    /// functions' EPHEMERA_RELOAD_SECONDS).
    #[arg(long, default_value = "30s", value_parser = reload_interval)]
    reload_interval: Duration,
    /// Address of the webhook listener (`POST /webhook`).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// GitHub API base URL; overrides `github.api_url` of the configuration.
    #[arg(long, value_name = "URL")]
    github_api_url: Option<String>,
    /// The GitHub App's private key (PEM).
    #[arg(long, env = "EPHEMERA_GITHUB_APP_KEY_FILE", value_name = "FILE")]
    github_app_key: Option<PathBuf>,
    /// How often the reaper runs, e.g. 10s or 1m.
    #[arg(long, default_value = "10s", value_parser = reaper_interval)]
    reaper_interval: Duration,
    /// Create the tables, the queue with its DLQ and the launch template when missing.
    #[arg(long)]
    bootstrap: bool,
    /// Run only these parts (repeatable); all three when absent.
    #[arg(long, value_enum)]
    only: Vec<Part>,
    /// The DynamoDB table; default `<deployment>-runners` (with --bootstrap: the table
    /// created).
    #[arg(long)]
    table: Option<String>,
    /// The jobs queue URL; default: the queue named `<deployment>-jobs` (with
    /// --bootstrap: its last path segment names the queue created, and `<name>-dlq` its
    /// dead-letter queue).
    #[arg(long)]
    queue_url: Option<String>,
    /// AWS endpoint (the emulator); `AWS_ENDPOINT_URL` does the same.
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    endpoint_url: Option<String>,
    #[arg(long, env = "AWS_REGION")]
    region: Option<String>,
    /// Do not write metrics (CloudWatch EMF lines, as the Lambda functions write them)
    /// to stdout.
    #[arg(long)]
    no_metrics: bool,
    /// Run a part with the credentials of a named profile, as each function runs with its
    /// own role on AWS, e.g. `--part-profile scaler=ephemera-scaler` (repeatable). Parts
    /// not named, and the setup (--bootstrap, finding the queue), use the default chain.
    #[arg(long, value_name = "PART=PROFILE", value_parser = part_profile)]
    part_profile: Vec<(Part, String)>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    Webhook,
    Scaler,
    Reaper,
}

/// The deployment's resource names, with `--table` and `--queue-url` instead of the
/// conventional ones when given: `--bootstrap` then creates (or finds) those, and a
/// queue named by URL gets its dead-letter queue as `<queue>-dlq`.
fn resource_names(deployment: &str, args: &LocalArgs) -> ephemera_aws::ResourceNames {
    let mut names = ephemera_aws::ResourceNames::for_deployment(deployment);
    if let Some(table) = &args.table {
        names.table = table.clone();
    }
    if let Some(url) = &args.queue_url {
        if let Some(queue) = url.trim_end_matches('/').rsplit('/').next() {
            names.queue = queue.to_owned();
            names.dlq = format!("{queue}-dlq");
        }
    }
    names
}

pub async fn run(args: LocalArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,aws_config=warn,aws_smithy_runtime=warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a log redirected to a file stays plain text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
    let parts = if args.only.is_empty() {
        vec![Part::Webhook, Part::Scaler, Part::Reaper]
    } else {
        args.only.clone()
    };
    missing_inputs(&args, &parts)?;
    let settings = AwsSettings {
        endpoint_url: args.endpoint_url.clone(),
        // An emulator takes any region; without one the SDK would ask the instance
        // metadata service, and warn about its session token.
        region: (args.region.clone())
            .or_else(|| args.endpoint_url.as_ref().map(|_| "us-east-1".to_owned())),
        static_credentials: None,
        ..AwsSettings::default()
    };
    let sdk = ephemera_aws::sdk_config(&settings).await;
    let (source, stack) = match (&args.config, &args.stack) {
        (Some(file), _) => (ConfigSource::file(file)?, None),
        (None, Some(stack)) => {
            let outputs = ephemera_aws::stack::stack_outputs(&sdk, stack).await?;
            (ConfigSource::of_stack(&sdk, &outputs).await?, Some(outputs))
        }
        (None, None) => bail!("give --config FILE or --stack NAME"),
    };
    let config = source.config.clone();
    let names = resource_names(&config.deployment, &args);
    let (table, queue_url) = if let Some(outputs) = &stack {
        let table = match &args.table {
            Some(table) => table.clone(),
            None => outputs.require(&outputs.table_name, TABLE_NAME)?.to_owned(),
        };
        let queue_url = match &args.queue_url {
            Some(url) => url.clone(),
            None => outputs.require(&outputs.queue_url, QUEUE_URL)?.to_owned(),
        };
        (table, queue_url)
    } else if args.bootstrap {
        let made = ephemera_aws::provision::ensure_resources(&sdk, &names).await?;
        info!(table = %made.table, queue_url = %made.queue_url, "resources ready");
        (made.table, made.queue_url)
    } else {
        let table = names.table.clone();
        let queue_url = match args.queue_url.clone() {
            Some(url) => url,
            None => ephemera_aws::sqs::queue_url(&aws_sdk_sqs_client(&sdk), &names.queue).await?,
        };
        (table, queue_url)
    };
    let metrics = if args.no_metrics {
        Metrics::disabled()
    } else {
        Metrics::stdout(&config.deployment)
    };
    let wiring = Arc::new(Wiring {
        webhook_sdk: part_sdk(&args, Part::Webhook, &settings, &sdk).await,
        scaler_sdk: part_sdk(&args, Part::Scaler, &settings, &sdk).await,
        reaper_sdk: part_sdk(&args, Part::Reaper, &settings, &sdk).await,
        parts: parts.clone(),
        names,
        table,
        queue_url,
        metrics,
        // One process: each App's whole registration rate is its own.
        paces: Arc::new(AppPaces::new(GITHUB_REGISTRATIONS_PER_MINUTE, 1)),
        args,
    });
    let built = wiring.build(config).await?;
    wiring.record_running(&source);

    let mut tasks = JoinSet::new();
    let (webhooks, webhooks_now) = watch::channel(built.webhook.clone());
    let (scalers, scalers_now) = watch::channel(built.scaler.clone());
    let (reapers, reapers_now) = watch::channel(built.reaper.clone());
    if let Some(handler) = built.webhook {
        let listen = wiring.args.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        info!(address = %listener.local_addr()?, "webhook listening on POST /webhook");
        let app = webhook_router_following(present(webhooks_now, handler));
        tasks.spawn(async move { axum::serve(listener, app).await.context("webhook listener") });
    }
    if let Some(scaler) = built.scaler {
        let queue = wiring.queue_as(&wiring.scaler_sdk);
        let scalers_now = present(scalers_now, scaler);
        tasks.spawn(async move { drain_queue_following(scalers_now, queue).await });
    }
    if let Some(reaper) = built.reaper {
        let interval = wiring.args.reaper_interval;
        let reapers_now = present(reapers_now, reaper);
        tasks.spawn(async move { reap_every_following(reapers_now, interval).await });
    }
    if let Some(parameter) = source.parameter.clone() {
        let follow = Follow {
            ssm: aws_sdk_ssm::Client::new(&sdk),
            parameter,
            every: wiring.args.reload_interval,
            wiring: wiring.clone(),
            webhooks,
            scalers,
            reapers,
        };
        tasks.spawn(follow.run(source));
    }
    tokio::select! {
        finished = tasks.join_next() => match finished {
            Some(Ok(result)) => result.context("a part stopped"),
            Some(Err(join_error)) => bail!("a part crashed: {join_error}"),
            None => Ok(()),
        },
        _ = shutdown_signal() => {
            info!("stopping");
            Ok(())
        }
    }
}

/// The following of a stack's configuration parameter: read again every `every`, and
/// each new version built into the parts' handlers, sent to them, and recorded.
struct Follow {
    ssm: aws_sdk_ssm::Client,
    /// The parameter `ephemera config push` writes.
    parameter: String,
    every: Duration,
    wiring: Arc<Wiring>,
    webhooks: watch::Sender<Option<Arc<WebhookHandler>>>,
    scalers: watch::Sender<Option<Arc<Scaler>>>,
    reapers: watch::Sender<Option<Arc<Reaper>>>,
}

impl Follow {
    /// Never ends; a read or a build that fails keeps the handlers in use (as the
    /// functions' [`ephemera_aws::reload`] does).
    async fn run(self, mut source: ConfigSource) -> anyhow::Result<()> {
        loop {
            tokio::time::sleep(self.every).await;
            let read = ephemera_aws::config_source::load_config_or_default(
                &self.ssm,
                &self.parameter,
                source.default.as_deref(),
            )
            .await;
            let loaded = match read {
                Ok(loaded) => loaded,
                Err(err) => {
                    warn!(error = %format!("{err:#}"), "cannot read the configuration; keeping the one in use");
                    continue;
                }
            };
            if source.is(&loaded) {
                continue;
            }
            let config = Arc::new(loaded.config);
            match self.wiring.build(config.clone()).await {
                Ok(built) => {
                    info!(
                        config_version = loaded.version,
                        config_parameter = %loaded.parameter,
                        "configuration changed; running version {} of {}",
                        loaded.version,
                        loaded.parameter
                    );
                    self.webhooks.send_replace(built.webhook);
                    self.scalers.send_replace(built.scaler);
                    self.reapers.send_replace(built.reaper);
                    source = ConfigSource {
                        config,
                        parameter: source.parameter,
                        default: source.default,
                        read_from: Some(loaded.parameter),
                        version: loaded.version,
                    };
                    self.wiring.record_running(&source);
                }
                Err(err) => {
                    warn!(config_version = loaded.version, error = %format!("{err:#}"), "the changed configuration cannot be used; keeping the one in use");
                }
            }
        }
    }
}

/// A channel of optional handlers seen as one of handlers: the part runs only when it
/// was built, and a later build of the same parts has it too (`first` until then).
fn present<T: Send + Sync + 'static>(
    mut optional: watch::Receiver<Option<Arc<T>>>,
    first: Arc<T>,
) -> watch::Receiver<Arc<T>> {
    let (sender, receiver) = watch::channel(first);
    tokio::spawn(async move {
        while optional.changed().await.is_ok() {
            let next = optional.borrow_and_update().clone();
            if let Some(next) = next {
                if sender.send(next).is_err() {
                    return;
                }
            }
        }
    });
    receiver
}

/// The configuration `ephemera local` runs and where it came from: a file, read once;
/// or a stack's parameter (the pushed one, else the stack's default), followed.
struct ConfigSource {
    config: Arc<Config>,
    /// The parameter followed, where `ephemera config push` writes (`None`: a file).
    parameter: Option<String>,
    /// The stack's default parameter, read while nothing was pushed.
    default: Option<String>,
    /// The parameter the configuration in use was read from: `parameter`, or `default`
    /// while nothing was pushed.
    read_from: Option<String>,
    version: i64,
}

impl ConfigSource {
    fn file(path: &std::path::Path) -> anyhow::Result<ConfigSource> {
        Ok(ConfigSource {
            config: Arc::new(Config::load(path)?),
            parameter: None,
            default: None,
            read_from: None,
            version: 0,
        })
    }

    /// What the stack's functions read: its `ConfigParameterName` when it was pushed,
    /// else its `DefaultConfigParameterName` (as [`ephemera_aws::reload`] reads them).
    async fn of_stack(
        sdk: &aws_config::SdkConfig,
        outputs: &ephemera_aws::stack::StackOutputs,
    ) -> anyhow::Result<ConfigSource> {
        let parameter = outputs.require(&outputs.config_parameter_name, CONFIG_PARAMETER_NAME)?;
        let default = outputs.default_config_parameter_name.clone();
        let ssm = aws_sdk_ssm::Client::new(sdk);
        let loaded = ephemera_aws::config_source::load_config_or_default(
            &ssm,
            parameter,
            default.as_deref(),
        )
        .await?;
        info!(
            config_version = loaded.version,
            config_parameter = %loaded.parameter,
            "running configuration version {} of {} (stack {})",
            loaded.version,
            loaded.parameter,
            outputs.stack
        );
        Ok(ConfigSource {
            config: Arc::new(loaded.config),
            parameter: Some(parameter.to_owned()),
            default,
            read_from: Some(loaded.parameter),
            version: loaded.version,
        })
    }

    /// Whether `loaded` is the version in use (a parameter read again).
    fn is(&self, loaded: &ephemera_aws::config_source::LoadedConfig) -> bool {
        self.read_from.as_deref() == Some(loaded.parameter.as_str())
            && self.version == loaded.version
    }
}

/// What the parts are built from, apart from the configuration: built again from each
/// configuration that changed.
struct Wiring {
    args: LocalArgs,
    parts: Vec<Part>,
    webhook_sdk: aws_config::SdkConfig,
    scaler_sdk: aws_config::SdkConfig,
    reaper_sdk: aws_config::SdkConfig,
    names: ephemera_aws::ResourceNames,
    table: String,
    queue_url: String,
    metrics: Metrics,
    paces: Arc<AppPaces>,
}

/// The handlers of the parts that run.
struct Built {
    webhook: Option<Arc<WebhookHandler>>,
    scaler: Option<Arc<Scaler>>,
    reaper: Option<Arc<Reaper>>,
}

impl Wiring {
    fn queue_as(&self, sdk: &aws_config::SdkConfig) -> Arc<SqsJobQueue> {
        Arc::new(SqsJobQueue::new(
            aws_sdk_sqs_client(sdk),
            self.queue_url.clone(),
        ))
    }

    /// The handlers of the parts that run, from `config`.
    async fn build(&self, config: Arc<Config>) -> anyhow::Result<Built> {
        let parts = &self.parts;
        let table = &self.table;
        let metrics = &self.metrics;
        let mut built = Built {
            webhook: None,
            scaler: None,
            reaper: None,
        };
        if parts.contains(&Part::Webhook) {
            let secrets = webhook_secrets_from_env()?;
            let unrouted = DynamoUnroutedJobs::new(
                aws_sdk_dynamodb::Client::new(&self.webhook_sdk),
                table.clone(),
            );
            let capabilities = WebhookCapabilities {
                metrics: metrics.clone(),
                unrouted: Some(Arc::new(unrouted)),
            };
            built.webhook = Some(Arc::new(WebhookHandler::new(
                config.clone(),
                secrets,
                self.queue_as(&self.webhook_sdk),
                capabilities,
            )));
        }
        if !(parts.contains(&Part::Scaler) || parts.contains(&Part::Reaper)) {
            return Ok(built);
        }
        // The Apps' token shelf and more_apps keys are read by the scaler when it runs
        // here, else by the reaper: each has those grants on AWS.
        let forge_sdk = if parts.contains(&Part::Scaler) {
            &self.scaler_sdk
        } else {
            &self.reaper_sdk
        };
        let shelf = DynamoTokenShelf::new(aws_sdk_dynamodb::Client::new(forge_sdk), table);
        let apps = github_apps(&config, &self.args, forge_sdk, Arc::new(shelf), metrics).await?;
        let jit_prefix = std::env::var("EPHEMERA_INSTANCE_ARN_PREFIX").ok();
        // One deployment's adapters, each calling AWS as the part it is made for.
        let deployment_as = |sdk: &aws_config::SdkConfig| {
            let dynamodb = || aws_sdk_dynamodb::Client::new(sdk);
            let mut jit = DynamoJitConfigs::new(dynamodb(), &self.names.jit_table);
            if let Some(prefix) = &jit_prefix {
                jit = jit.with_instance_arn_prefix(prefix.clone());
            }
            let fleet = Arc::new(Ec2Fleet::new(
                aws_sdk_ec2::Client::new(sdk),
                &config.deployment,
            ));
            Deployment {
                config: config.clone(),
                metrics: metrics.clone(),
                store: Arc::new(DynamoRunnerStore::new(dynamodb(), table.clone())),
                fleet: fleet.clone(),
                launcher: fleet,
                jit_store: Arc::new(jit),
                queue: self.queue_as(sdk),
                spot_breakers: Arc::new(DynamoSpotBreakers::new(dynamodb(), table)),
                reruns: Arc::new(DynamoReruns::new(dynamodb(), table)),
                pricing: Pricing {
                    book: Arc::new(DynamoPriceBook::new(dynamodb(), table.clone())),
                    list: Arc::new(AwsPriceList::new(sdk)),
                },
                // The runner copy is the deployed reaper's: a local one does not write
                // the stack's bucket.
                runner_copy: None,
            }
        };
        if parts.contains(&Part::Scaler) {
            let (forge, pace) = ephemera_github::paced_forge(apps.clone(), &self.paces);
            built.scaler = Some(Arc::new(
                deployment_as(&self.scaler_sdk).scaler(forge, pace),
            ));
        }
        if parts.contains(&Part::Reaper) {
            // The redelivery sweep and the re-runs are the webhook App's (the first);
            // the lease keeps this reaper from working at once with a deployed one on
            // the same table.
            let webhook_app = WebhookApp::of(apps[0].clone());
            let forge = ephemera_github::forge_over(apps, ephemera_github::unshared_pace);
            built.reaper = Some(Arc::new(
                deployment_as(&self.reaper_sdk).reaper(forge, webhook_app),
            ));
        }
        Ok(built)
    }

    /// Records, for each part that runs, the configuration it now runs, as each
    /// function records it (`ephemera doctor`'s `config.running`), in the background;
    /// only for a configuration read from a stack's parameter.
    fn record_running(&self, source: &ConfigSource) {
        let Some(parameter) = &source.read_from else {
            return;
        };
        for (part, function, sdk) in [
            (Part::Webhook, "webhook", &self.webhook_sdk),
            (Part::Scaler, "scaler", &self.scaler_sdk),
            (Part::Reaper, "reaper", &self.reaper_sdk),
        ] {
            if !self.parts.contains(&part) {
                continue;
            }
            let running = ephemera_aws::running::RunningConfig {
                function: function.to_owned(),
                parameter: parameter.clone(),
                version: source.version,
                at: time::OffsetDateTime::now_utc(),
            };
            let client = aws_sdk_dynamodb::Client::new(sdk);
            let table = self.table.clone();
            tokio::spawn(async move {
                if let Err(err) = ephemera_aws::running::record(&client, &table, &running).await {
                    warn!(error = %format!("{err:#}"), "cannot record the configuration version {function} runs");
                }
            });
        }
    }
}

/// The SDK configuration of `part`: its `--part-profile`, else the shared one.
async fn part_sdk(
    args: &LocalArgs,
    part: Part,
    settings: &AwsSettings,
    shared: &aws_config::SdkConfig,
) -> aws_config::SdkConfig {
    match args.part_profile.iter().find(|(p, _)| *p == part) {
        Some((_, profile)) => {
            let settings = AwsSettings {
                profile: Some(profile.clone()),
                ..settings.clone()
            };
            ephemera_aws::sdk_config(&settings).await
        }
        None => shared.clone(),
    }
}

/// `--part-profile PART=PROFILE`.
fn part_profile(text: &str) -> Result<(Part, String), String> {
    let (part, profile) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected PART=PROFILE, e.g. scaler=ephemera-scaler"))?;
    let part = Part::from_str(part, true)
        .map_err(|_| format!("{part:?}: the part must be webhook, scaler or reaper"))?;
    if profile.is_empty() {
        return Err(format!("{text:?}: the profile name is empty"));
    }
    Ok((part, profile.to_owned()))
}

/// `--reload-interval`: 1s to 1d, as the reaper's.
fn reload_interval(text: &str) -> Result<Duration, String> {
    ranges::parse_duration_in(text, ranges::REAPER_INTERVAL)
}

/// `--reaper-interval`: 1s to 1d (a zero interval would spin, a huge one overflow).
fn reaper_interval(text: &str) -> Result<Duration, String> {
    ranges::parse_duration_in(text, ranges::REAPER_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Local {
        #[command(flatten)]
        args: LocalArgs,
    }

    fn names(extra: &[&str]) -> ephemera_aws::ResourceNames {
        let mut argv = vec!["local", "--config", "c.yaml"];
        argv.extend_from_slice(extra);
        let local = Local::try_parse_from(argv).expect("parsed");
        resource_names("eph", &local.args)
    }

    #[test]
    fn bootstrap_makes_the_table_and_queue_it_is_given() {
        let conventional = ephemera_aws::ResourceNames::for_deployment("eph");
        assert_eq!(names(&[]), conventional);
        let given = names(&[
            "--table",
            "my-table",
            "--queue-url",
            "http://127.0.0.1:5000/123456789012/my-jobs",
        ]);
        assert_eq!(given.table, "my-table");
        assert_eq!(given.queue, "my-jobs");
        assert_eq!(given.dlq, "my-jobs-dlq");
        assert_eq!(given.jit_table, conventional.jit_table);
    }
}

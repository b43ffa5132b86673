//! `make demo`: one job through the whole pipeline on emulated AWS, printed as it happens.
//!
//! Starts moto and the GitHub simulator on free loopback ports, creates the stack of
//! template.yaml in moto with the pools of `--config` and GitHub at the simulator, runs
//! the real `ephemera local --stack` against them (the configuration the stack holds,
//! followed as `ephemera config push` changes it), has the simulator send one signed
//! `queued` webhook, and prints the runner's lifecycle from its record until the runner
//! is deleted and its instance terminated; then checks that the job's timeline has every
//! stamp, in order, and prints it with `ephemera jobs show`. With `--up` (`make up`) it
//! prints the environment to paste instead and stays up until Ctrl-C or SIGTERM, then
//! says "stopped" and exits 0. Everything it started stops when it ends, also on Ctrl-C
//! or failure.

use anyhow::{bail, Context};
use clap::Parser;
use ephemera_aws::{AwsSettings, DynamoRunnerStore, Ec2Fleet};
use ephemera_core::config::Config;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::{Fleet, InstanceState, RunnerStore};
use ephemera_core::timeline::Timeline;
use ephemera_tests::moto::{free_port, Moto};
use ephemera_tests::sim::{self, SimConfig};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};
use time::macros::format_description;
use time::OffsetDateTime;
use tokio::process::{Child, Command};

#[derive(Parser)]
struct Args {
    /// The configuration ephemera runs with.
    #[arg(long, default_value = "infra/config.example.yaml")]
    config: PathBuf,
    /// The `ephemera` binary.
    #[arg(long, env = "EPHEMERA_BIN", default_value = "target/debug/ephemera")]
    ephemera: PathBuf,
    /// How long the simulated job runs.
    #[arg(long, default_value_t = 3)]
    job_seconds: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// `make up`: start everything, print the environment to paste, and stay up until
    /// Ctrl-C instead of running one job.
    #[arg(long)]
    up: bool,
    /// Write what the demo printed to this file as well (the README's sample is checked
    /// against it: tests/docs/demo_sample.py).
    #[arg(long)]
    transcript: Option<PathBuf>,
    /// Where `ephemera local`'s log and metrics and the parts' credentials go.
    #[arg(long, default_value = "target/demo")]
    dir: PathBuf,
}

const WEBHOOK_SECRET: &str = "demo-webhook-secret";
/// The organization the simulated jobs run for (`make job` queues them there too).
const OWNER: &str = "octo-org";
const KEY: &str = "tests/fixtures/github-app-test-key.pem";
const PUBLIC_KEY: &str = "tests/fixtures/github-app-test-key.pub.pem";

/// Everything the demo printed, for `--transcript`.
static TRANSCRIPT: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// `println!`, kept in the transcript as well.
macro_rules! say {
    ($($arg:tt)*) => {{
        let text = format!($($arg)*);
        println!("{text}");
        keep(&text);
        keep("\n");
    }};
}

fn keep(text: &str) {
    if let Ok(mut transcript) = TRANSCRIPT.lock() {
        transcript.push_str(text);
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let started = Instant::now();
    let outcome = tokio::select! {
        outcome = run(&args) => outcome,
        _ = stop_signal() => {
            // Children are killed on drop: moto, the simulator and ephemera local are
            // gone here.
            return if args.up {
                say!("stopped");
                ExitCode::SUCCESS
            } else {
                eprintln!("demo stopped before it finished");
                ExitCode::from(130)
            };
        }
    };
    match outcome {
        Ok(()) => {
            say!("demo finished in {:.1} s", started.elapsed().as_secs_f64());
            match write_transcript(args.transcript.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("demo failed: {err:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(err) => {
            eprintln!("demo failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Ctrl-C, or SIGTERM.
async fn stop_signal() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// What the demo printed, into `path` (none: nothing written).
fn write_transcript(path: Option<&std::path::Path>) -> anyhow::Result<()> {
    let Some(path) = path else {
        return Ok(());
    };
    let transcript = TRANSCRIPT
        .lock()
        .map_err(|_| anyhow::anyhow!("the transcript's lock was poisoned"))?
        .clone();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, transcript).with_context(|| format!("writing {}", path.display()))
}

async fn run(args: &Args) -> anyhow::Result<()> {
    let config = Config::load(&args.config)?;
    let pool = config
        .pools
        .first()
        .context("the configuration has no pool")?;
    if args.up {
        say!("ephemera up: the stack on emulated AWS and GitHub simulated, until Ctrl-C\n");
    } else {
        say!("ephemera demo: one job through the whole pipeline on emulated AWS\n");
    }

    let moto = Moto::start().await?;
    let strict = moto.strict_settings().await?["enabled"] == serde_json::json!(true);
    let strictness = if strict {
        "AWS's limits enforced"
    } else {
        "strict layer off"
    };
    say!("  AWS emulator (moto)   {}  ({strictness})", moto.endpoint);
    let public_key =
        std::fs::read_to_string(PUBLIC_KEY).with_context(|| format!("reading {PUBLIC_KEY}"))?;
    let mut sim_config = SimConfig::new(
        config.github.app_id,
        public_key,
        WEBHOOK_SECRET,
        &config.deployment,
    );
    sim_config.aws_endpoint = Some(moto.endpoint.clone());
    sim_config.job_duration = Duration::from_secs(args.job_seconds);
    sim_config.pickup_delay = Duration::from_secs(2);
    let sim = sim::start(sim_config).await?;
    say!("  GitHub simulator      {}", sim.url);
    let pools = pools_section(&args.config)?;
    let stack = create_demo_stack(&moto, &config, &pools, &sim.url).await?;
    say!(
        "  stack (template.yaml) {} resources: table {}, launch template {}",
        stack.resources.len(),
        stack.output("TableName")?,
        stack.output("LaunchTemplateName")?
    );
    // ephemera local drains the queue itself: the scaler's mapping off (see
    // disable_queue_event_sources).
    let disabled =
        ephemera_tests::stack::disable_queue_event_sources(&moto, stack.output("QueueUrl")?)
            .await?;
    say!(
        "  the stack's SQS event source mapping disabled ({}): ephemera local polls the queue",
        disabled.len()
    );

    let port = free_port()?;
    let webhook_url = format!("http://127.0.0.1:{port}/webhook");
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let log_path = args.dir.join("ephemera-local.log");
    let metrics_path = args.dir.join("ephemera-local.metrics");
    let credentials = write_role_profiles(&moto, &config.deployment, &args.dir).await?;
    let _ephemera = start_ephemera(args, &moto.endpoint, &config.deployment, port, &credentials)?;
    say!(
        "  ephemera local        {webhook_url}  (log: {}, metrics: {})\n",
        log_path.display(),
        metrics_path.display()
    );
    wait_listening(port, Duration::from_secs(60), &log_path).await?;
    sim.set_webhook_url(&webhook_url);
    if args.up {
        print_environment(
            args,
            &moto.endpoint,
            &sim.url,
            &webhook_url,
            &config,
            &labels_of(pool),
        );
        return std::future::pending().await;
    }

    let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let names = ephemera_aws::provision::ResourceNames::for_deployment(&config.deployment);
    let store = DynamoRunnerStore::new(aws_sdk_dynamodb::Client::new(&sdk), &names.table);
    let fleet = Ec2Fleet::new(aws_sdk_ec2::Client::new(&sdk), &config.deployment);

    let labels = labels_of(pool);
    let job_id = sim.create_job(OWNER, "demo", &labels, None).await?;
    line(
        OffsetDateTime::now_utc(),
        &format!("job {job_id}"),
        "queued",
        &format!("labels [{}], signed webhook sent", labels.join(", ")),
    );

    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let runner = follow_runner(&store, job_id, deadline, &log_path).await?;
    let instance_id = runner
        .instance_id
        .context("the deleted runner never had an instance")?;
    loop {
        let state = fleet
            .describe()
            .await?
            .into_iter()
            .find(|i| i.id == instance_id)
            .map(|i| i.state);
        if state == Some(InstanceState::Terminated) {
            line(
                OffsetDateTime::now_utc(),
                &format!("instance {instance_id}"),
                "terminated",
                "in the emulator",
            );
            break;
        }
        if Instant::now() > deadline {
            bail!("instance {instance_id} is {state:?}, not terminated");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    check_timeline(&store, job_id).await?;
    print_jobs_show(args, &moto.endpoint, &names.table, job_id).await?;
    let refusals = moto.strict_stats().await?.refusals;
    if !refusals.is_empty() {
        say!("\n  refused as AWS would: {refusals:?}");
    }
    let snapshot = sim.snapshot();
    if snapshot.counters.jobs_killed != 0 {
        bail!("{} job(s) were killed", snapshot.counters.jobs_killed);
    }
    Ok(())
}

/// Every stamp of the job's timeline is set, and in order.
async fn check_timeline(store: &DynamoRunnerStore, job_id: u64) -> anyhow::Result<()> {
    let job = store.get_job(job_id).await?.context("the job's record")?;
    let name = job
        .runner_name
        .as_deref()
        .context("the job names no runner")?;
    let runner = store
        .get_runner(name)
        .await?
        .context("the runner's record")?;
    let timeline = Timeline::of(&job, Some(&runner));
    let missing = timeline.missing();
    if !missing.is_empty() {
        bail!("job {job_id}: no time for {missing:?}");
    }
    let out_of_order = timeline.out_of_order();
    if !out_of_order.is_empty() {
        bail!("job {job_id}: stamps out of order: {out_of_order:?}");
    }
    Ok(())
}

/// `ephemera jobs show JOB`, as an operator would type it, printed.
async fn print_jobs_show(args: &Args, aws: &str, table: &str, job_id: u64) -> anyhow::Result<()> {
    let output = Command::new(&args.ephemera)
        .args(["jobs", "show", &job_id.to_string()])
        .args([
            "--endpoint-url",
            aws,
            "--table",
            table,
            "--region",
            "us-east-1",
        ])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("NO_COLOR", "1")
        .output()
        .await
        .context("running ephemera jobs show")?;
    if !output.status.success() {
        bail!(
            "ephemera jobs show {job_id} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    say!("\n$ ephemera jobs show {job_id}\n");
    let shown = String::from_utf8_lossy(&output.stdout);
    print!("{shown}");
    keep(&shown);
    Ok(())
}

fn labels_of(pool: &ephemera_core::config::PoolConfig) -> Vec<&str> {
    pool.labels.iter().map(String::as_str).collect()
}

/// What `make up` prints: the environment that points every `ephemera` command at the
/// stack with no flag (`ephemera` on PATH, the stack, the emulator, the App key, the
/// local webhook URL `ephemera doctor` checks), and commands to try, `make job` first.
fn print_environment(
    args: &Args,
    aws: &str,
    github: &str,
    webhook_url: &str,
    config: &Config,
    labels: &[&str],
) {
    let absolute = |path: &std::path::Path| {
        std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string()
    };
    let key = absolute(std::path::Path::new(KEY));
    let bin_dir = absolute(args.ephemera.parent().unwrap_or(std::path::Path::new(".")));
    let owners = OWNER;
    println!("Up until Ctrl-C. In another shell, in this directory, paste:\n");
    println!("export PATH={bin_dir}:$PATH");
    println!("export AWS_ENDPOINT_URL={aws} AWS_REGION=us-east-1");
    println!("export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing");
    println!(
        "export EPHEMERA_STACK={} EPHEMERA_GITHUB_APP_KEY_FILE={key}",
        config.deployment
    );
    println!("export EPHEMERA_WEBHOOK_URL={webhook_url} EPHEMERA_OWNERS={owners}");
    println!("export GITHUB_SIM={github}\n");
    println!("then, for example:\n");
    println!(
        "make job LABELS={} COUNT=1   # queues a job through the simulator",
        labels.join(",")
    );
    println!("ephemera jobs list");
    println!("ephemera pools");
    println!("ephemera doctor\n");
}

/// Prints each entry of the runner's history as it appears, until it is deleted.
async fn follow_runner(
    store: &DynamoRunnerStore,
    job_id: u64,
    deadline: Instant,
    log_path: &std::path::Path,
) -> anyhow::Result<ephemera_core::model::RunnerRecord> {
    let mut printed = 0;
    loop {
        if Instant::now() > deadline {
            bail!(
                "job {job_id}: the runner was not deleted in time (see {})",
                log_path.display()
            );
        }
        let name = store.get_job(job_id).await?.and_then(|job| job.runner_name);
        if let Some(runner) = match &name {
            Some(name) => store.get_runner(name).await?,
            None => None,
        } {
            for entry in runner.history.iter().skip(printed) {
                let what = match (entry.status, entry.runner_status) {
                    (Some(status), _) => status.to_string(),
                    (None, Some(runner_status)) => format!("runner {runner_status}"),
                    (None, None) => String::new(),
                };
                line(
                    entry.at,
                    &format!("runner {}", runner.name),
                    &what,
                    entry.reason.as_deref().unwrap_or(""),
                );
                printed += 1;
            }
            if runner.status == InstanceStatus::Deleted {
                return Ok(runner);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn line(at: OffsetDateTime, subject: &str, what: &str, detail: &str) {
    let clock = at
        .format(format_description!(
            "[hour]:[minute]:[second].[subsecond digits:3]"
        ))
        .unwrap_or_default();
    say!("{clock}  {subject:<34} {what:<16} {detail}");
}

/// `ephemera local --stack`: the stack's configuration, table and queue; its log (stderr)
/// and its metrics (the EMF lines on stdout) each into their own file of `--dir`.
fn start_ephemera(
    args: &Args,
    aws: &str,
    stack: &str,
    port: u16,
    credentials: &std::path::Path,
) -> anyhow::Result<Child> {
    if !args.ephemera.exists() {
        bail!(
            "{} not found: build it with `cargo build -p ephemera-cli`",
            args.ephemera.display()
        );
    }
    let log = std::fs::File::create(args.dir.join("ephemera-local.log"))?;
    let metrics = std::fs::File::create(args.dir.join("ephemera-local.metrics"))?;
    Command::new(&args.ephemera)
        .args(["local", "--stack", stack])
        .args(["--reaper-interval", "1s", "--reload-interval", "2s"])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--github-app-key",
            KEY,
        ])
        .args(PARTS.iter().flat_map(|(part, _)| {
            [
                "--part-profile".to_owned(),
                format!("{part}=ephemera-{part}"),
            ]
        }))
        .env("AWS_ENDPOINT_URL", aws)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_SHARED_CREDENTIALS_FILE", credentials)
        .env("AWS_REGION", "us-east-1")
        .env("EPHEMERA_WEBHOOK_SECRET", WEBHOOK_SECRET)
        .stdout(Stdio::from(metrics))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", args.ephemera.display()))
}

/// The parts of `ephemera local` and the roles of template.yaml their functions run as.
const PARTS: [(&str, &str); 3] = [
    ("webhook", "WebhookRole"),
    ("scaler", "ScalerRole"),
    ("reaper", "ReaperRole"),
];

/// A shared credentials file with a profile per part (`ephemera-scaler`, ...), each an
/// access key the strict layer evaluates as that part's role: `ephemera local` runs each
/// part as its function runs on AWS, and fails where AWS would refuse it.
async fn write_role_profiles(
    moto: &Moto,
    deployment: &str,
    dir: &std::path::Path,
) -> anyhow::Result<std::path::PathBuf> {
    let mut file = String::new();
    for (part, role) in PARTS {
        let settings = moto.role_settings(role, deployment).await?;
        let (key, secret) = settings
            .static_credentials
            .context("role settings without credentials")?;
        file.push_str(&format!(
            "[ephemera-{part}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n\n"
        ));
    }
    let path = std::env::current_dir()?.join(dir).join("aws-credentials");
    std::fs::write(&path, file).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

async fn wait_listening(
    port: u16,
    limit: Duration,
    log_path: &std::path::Path,
) -> anyhow::Result<()> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!(
        "ephemera local did not listen on 127.0.0.1:{port} within {limit:?} (see {})",
        log_path.display()
    )
}

/// The public parameter of the newest x86_64 Amazon Linux 2023 image.
const X86_64_IMAGE_PARAMETER: &str =
    "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64";

/// The deployment's resources, made in the emulator from template.yaml as `sam deploy`
/// would make them; `ephemera local --bootstrap` then finds them in place.
async fn create_demo_stack(
    moto: &Moto,
    config: &Config,
    pools: &str,
    github_api_url: &str,
) -> anyhow::Result<ephemera_tests::stack::Stack> {
    let spec = ephemera_tests::stack::StackSpec {
        stack_name: config.deployment.clone(),
        deployment: config.deployment.clone(),
        app_id: config.github.app_id,
        github_api_url: github_api_url.to_owned(),
        webhook_secret: WEBHOOK_SECRET.to_owned(),
        app_key_pem: std::fs::read_to_string(KEY).with_context(|| format!("reading {KEY}"))?,
        pools_config: Some(pools.to_owned()),
    };
    // The example configuration's pool runs x86_64 instance types (m7i.large): the
    // stack's image is the x86_64 Amazon Linux, where its default is arm64, since EC2
    // refuses an instance type of another architecture than its image.
    let image = [("RunnerAmi", X86_64_IMAGE_PARAMETER)];
    ephemera_tests::stack::create_stack_with(
        moto,
        &ephemera_tests::stack::template_path(),
        &spec,
        &image,
    )
    .await
    .context("creating the stack from template.yaml in the emulator")
}

/// The `pools:` part of the configuration file and what follows it (`reaper:`), as the
/// stack's `PoolsConfig` parameter takes it: the stack's configuration is then the
/// file's, with the deployment and GitHub (at the simulator) the stack's parameters.
fn pools_section(file: &std::path::Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let start = text
        .lines()
        .scan(0, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, line)| line.starts_with("pools:"))
        .map(|(at, _)| at)
        .with_context(|| format!("{} has no top-level `pools:`", file.display()))?;
    Ok(text[start..].to_owned())
}

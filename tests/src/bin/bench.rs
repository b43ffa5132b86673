//! `make bench`: ephemera's figures, measured on this machine and written to
//! `bench/results.json` with a table on stdout.
//!
//! - **functions**: the size of each release Lambda binary, and its cold start: process
//!   start until it asks a local Lambda runtime API (served here) for its first event,
//!   with its configuration and secrets read from moto on the way, as in Lambda.
//! - **burst**: N queued jobs (1,000 by default) through the handlers of
//!   `ephemera local` on moto + the GitHub simulator: the time until every job has its
//!   instance launched, the p50/p99 from webhook received to launch requested (the
//!   `QueuedToLaunched` metric the scaler writes), and the calls per job by service and
//!   endpoint.
//! - **reaper**: with the burst's runners live, 10,000 `deleted` and 100
//!   `pending_delete` items are added; the reaper's runs until nothing is pending are
//!   timed and the items each reads are counted.
//!
//! The webhook handling figures come from `cargo bench -p ephemera-core --bench webhook`
//! (passed in with `--webhook`), which needs no emulator.

use anyhow::{bail, Context};
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use clap::Parser;
use ephemera_aws::provision::{ensure_resources, ResourceNames};
use ephemera_aws::AwsSettings;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::metrics::{Dimension, Metric, Metrics};
use ephemera_core::ports::{FleetRequest, Launcher, Market, TemplateVersion};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::{workspace_path, Pipeline, PipelineOptions, DEPLOYMENT, LABELS};
use ephemera_tests::plant::write_runners;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::process::Command;
use tokio::sync::mpsc;

#[derive(Parser)]
struct Args {
    /// Where the results go.
    #[arg(long, default_value = "bench/results.json")]
    out: PathBuf,
    /// The webhook figures written by `cargo bench -p ephemera-core --bench webhook`.
    #[arg(long)]
    webhook: Option<PathBuf>,
    /// The directory of the release Lambda binaries (webhook, scaler, reaper).
    #[arg(long, default_value = "target/release")]
    bin_dir: PathBuf,
    /// Cold starts timed per function.
    #[arg(long, default_value_t = 10)]
    cold_starts: usize,
    /// Jobs in the burst (they stay live for the reaper part).
    #[arg(long, default_value_t = 1000)]
    burst_jobs: u32,
    /// `deleted` items written for the reaper part. 10,000 by default: at 100,000 the
    /// emulator (moto, holding the burst's state too) grew past 24 GiB and was killed.
    #[arg(long, default_value_t = 10_000)]
    reaper_deleted: usize,
    /// `pending_delete` items (each with a real instance) for the reaper part.
    #[arg(long, default_value_t = 100)]
    reaper_pending: usize,
    /// Skip the burst and reaper parts (they take the longest).
    #[arg(long)]
    functions_only: bool,
}

const FUNCTIONS: [&str; 3] = ["webhook", "scaler", "reaper"];
const POOL: &str = "linux-x64";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut results = serde_json::Map::new();
    results.insert("machine".into(), machine());
    if let Some(path) = &args.webhook {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the webhook figures {}", path.display()))?;
        let webhook: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        results.insert("webhook".into(), webhook["webhook"].clone());
        results.insert("webhook_refused".into(), webhook["webhook_refused"].clone());
    }
    results.insert("functions".into(), functions(&args).await?);
    if !args.functions_only {
        let (burst, reaper) = burst_then_reaper(&args).await?;
        results.insert("burst".into(), burst);
        results.insert("reaper".into(), reaper);
    }
    let results = Value::Object(results);
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&results)? + "\n")
        .with_context(|| format!("writing {}", args.out.display()))?;
    print_table(&results);
    println!("\nwritten to {}", args.out.display());
    Ok(())
}

/// What the figures were measured on.
fn machine() -> Value {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_default();
    json!({
        "cores": cores,
        "cpu": cpu,
        "arch": std::env::consts::ARCH,
        "measured_at": time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
    })
}

// ------------------------------------------------------------------ binaries, cold start

/// Each Lambda binary's size and cold starts.
async fn functions(args: &Args) -> anyhow::Result<Value> {
    for name in FUNCTIONS {
        let path = args.bin_dir.join(name);
        if !path.is_file() {
            bail!(
                "{} is missing: build it first (cargo build --release -p ephemera-{name})",
                path.display()
            );
        }
    }
    let moto = Moto::start().await?;
    let env = lambda_environment(&moto).await?;
    let (runtime_api, mut ready) = serve_runtime_api().await?;
    let mut out = Vec::new();
    for name in FUNCTIONS {
        let path = args.bin_dir.join(name);
        let bytes = std::fs::metadata(&path)?.len();
        let mut starts = Vec::new();
        for _ in 0..args.cold_starts {
            starts.push(cold_start(&path, &env, &runtime_api, &mut ready).await?);
        }
        starts.sort();
        out.push(json!({
            "function": name,
            "binary_bytes": bytes,
            "cold_start_ms_p50": millis(percentile(&starts, 0.5)),
            "cold_start_ms_max": millis(*starts.last().expect("at least one start")),
            "cold_starts": starts.len(),
        }));
    }
    Ok(
        json!({ "target": format!("{}-linux (host release build)", std::env::consts::ARCH), "each": out }),
    )
}

/// The environment the template gives the functions, pointing at moto: the stack's
/// resources, its configuration parameter and its two secrets.
async fn lambda_environment(moto: &Moto) -> anyhow::Result<Vec<(String, String)>> {
    let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&sdk, &ResourceNames::for_deployment(DEPLOYMENT)).await?;
    let config = format!(
        "deployment: {DEPLOYMENT}\ngithub:\n  app_id: 4242\n  api_url: http://127.0.0.1:9\n\
         pools:\n  - name: {POOL}\n    labels: [self-hosted, linux, x64]\n    max_runners: 10\n\
         \x20   instance_types: [t3.micro]\n    launch_template: {DEPLOYMENT}-runner\n"
    );
    let parameter = format!("/{DEPLOYMENT}/config");
    aws_sdk_ssm::Client::new(&sdk)
        .put_parameter()
        .name(&parameter)
        .value(config)
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .overwrite(true)
        .send()
        .await?;
    let secrets = aws_sdk_secretsmanager::Client::new(&sdk);
    let key = std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pem"))?;
    let secret_arn = |name: &str, value: String| {
        let secrets = secrets.clone();
        let name = format!("{DEPLOYMENT}/{name}");
        async move {
            let output = secrets
                .create_secret()
                .name(name)
                .secret_string(value)
                .send()
                .await?;
            anyhow::Ok(output.arn().unwrap_or_default().to_owned())
        }
    };
    let key_arn = secret_arn("github-app-key", key).await?;
    let hook_arn = secret_arn("webhook-secret", "bench-secret".to_owned()).await?;
    Ok([
        ("AWS_ENDPOINT_URL", moto.endpoint.clone()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".to_owned()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/bench".to_owned()),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "bench".to_owned()),
        ("EPHEMERA_CONFIG_PARAMETER", parameter),
        ("EPHEMERA_TABLE", resources.table),
        ("EPHEMERA_JIT_TABLE", resources.jit_table),
        ("EPHEMERA_QUEUE_URL", resources.queue_url),
        ("EPHEMERA_WEBHOOK_SECRET_ID", hook_arn),
        ("EPHEMERA_GITHUB_KEY_SECRET_ID", key_arn),
        (
            "EPHEMERA_INSTANCE_ARN_PREFIX",
            "arn:aws:ec2:us-east-1:123456789012:instance/".to_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect())
}

/// What the runtime API heard from a function: it asked for its first event, or it
/// reported that its initialisation failed.
type Heard = Result<(), String>;

/// A Lambda runtime API on a loopback port that answers nothing: the first
/// `GET …/invocation/next` of a process is the moment it is ready for an event.
async fn serve_runtime_api() -> anyhow::Result<(String, mpsc::UnboundedReceiver<Heard>)> {
    let (tell, heard) = mpsc::unbounded_channel::<Heard>();
    let tell = Arc::new(Mutex::new(tell));
    let router = Router::new()
        .route(
            "/2018-06-01/runtime/invocation/next",
            get(|State(tell): State<Arc<Mutex<mpsc::UnboundedSender<Heard>>>>| async move {
                let _ = tell.lock().expect("runtime api lock").send(Ok(()));
                // Never answered: the process is stopped once it has asked.
                std::future::pending::<()>().await;
            }),
        )
        .route(
            "/2018-06-01/runtime/init/error",
            post(
                |State(tell): State<Arc<Mutex<mpsc::UnboundedSender<Heard>>>>, body: String| async move {
                    let _ = tell.lock().expect("runtime api lock").send(Err(body));
                    "{}"
                },
            ),
        )
        .with_state(tell);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok((address, heard))
}

/// Starts `binary` as Lambda would and times it until it asks for its first event.
async fn cold_start(
    binary: &Path,
    env: &[(String, String)],
    runtime_api: &str,
    heard: &mut mpsc::UnboundedReceiver<Heard>,
) -> anyhow::Result<Duration> {
    while heard.try_recv().is_ok() {}
    let name = binary
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let started = Instant::now();
    let mut child = Command::new(binary)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
        .env("AWS_LAMBDA_FUNCTION_NAME", format!("{DEPLOYMENT}-{name}"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let outcome = tokio::select! {
        message = heard.recv() => message.context("the runtime API stopped")?,
        status = child.wait() => Err(format!("exited before asking for an event: {status:?}")),
        () = tokio::time::sleep(Duration::from_secs(30)) => Err("not ready within 30 s".to_owned()),
    };
    let elapsed = started.elapsed();
    let _ = child.start_kill();
    let output = child.wait_with_output().await?;
    match outcome {
        Ok(()) => Ok(elapsed),
        Err(why) => bail!("{name}: {why}\n{}", String::from_utf8_lossy(&output.stderr)),
    }
}

// ------------------------------------------------------------------------ burst, reaper

/// The burst on a fresh pipeline, then the reaper on what it left.
async fn burst_then_reaper(args: &Args) -> anyhow::Result<(Value, Value)> {
    let jobs = args.burst_jobs;
    let (metrics, captured) = Metrics::capture(DEPLOYMENT);
    let mut p = Pipeline::start(PipelineOptions {
        max_runners: jobs + u32::try_from(args.reaper_pending)?,
        // Jobs outlast the measurement: the runners stay live for the reaper part.
        job_duration: Duration::from_secs(3 * 3600),
        reaper_interval: None,
        scaler_loops: 4,
        metrics,
        ..PipelineOptions::default()
    })
    .await?;
    p.calls.reset();
    let started = Instant::now();
    eprintln!("burst: sending {jobs} queued webhooks");
    // Sent one after another, as fast as the webhook answers; the scaler works meanwhile.
    for _ in 0..jobs {
        p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    }
    eprintln!("burst: all sent after {:?}", started.elapsed());
    let limit = Duration::from_secs(60 * 60);
    let mut last_report = Instant::now();
    let launched = loop {
        p.check_alive()?;
        let launched = metric_sum(&captured, Metric::RunnersLaunched)?;
        if launched >= f64::from(jobs) {
            break launched;
        }
        if started.elapsed() > limit {
            bail!("burst: {launched} of {jobs} launched after {limit:?}");
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "burst: {launched} of {jobs} launched after {:?}",
                started.elapsed()
            );
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let all_launched = started.elapsed();
    let calls = p.calls.all();
    let documents = captured.documents().map_err(anyhow::Error::msg)?;
    let mut to_launch: Vec<f64> = documents
        .iter()
        .filter_map(|d| d.values(Metric::QueuedToLaunched))
        .flatten()
        .copied()
        .collect();
    to_launch.sort_by(f64::total_cmp);
    let mut github: BTreeMap<String, f64> = BTreeMap::new();
    for document in &documents {
        if let (Some(values), Some(endpoint)) = (
            document.values(Metric::GitHubCalls),
            document.dimension(Dimension::Endpoint),
        ) {
            *github.entry(endpoint.to_owned()).or_default() += values.iter().sum::<f64>();
        }
    }
    let per_job = |n: f64| (n / f64::from(jobs) * 1000.0).round() / 1000.0;
    let mut by_service: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for (service, operation, count) in calls {
        by_service
            .entry(service)
            .or_default()
            .insert(operation, per_job(count as f64));
    }
    // JIT configs travel through DynamoDB: no client of the pipeline calls SSM, shown as 0.
    by_service
        .entry("SSM".to_owned())
        .or_insert_with(|| BTreeMap::from([("all".to_owned(), 0.0)]));
    by_service.insert(
        "GitHub".to_owned(),
        github.into_iter().map(|(e, n)| (e, per_job(n))).collect(),
    );
    let strict_refusals = p.moto.strict_stats().await?.refusals;
    let burst = json!({
        "jobs": jobs,
        "launched": launched,
        "all_launched_s": (all_launched.as_secs_f64() * 10.0).round() / 10.0,
        "queued_to_launched_ms_p50": percentile_f64(&to_launch, 0.5),
        "queued_to_launched_ms_p99": percentile_f64(&to_launch, 0.99),
        "fleet_requests": p.fleet.launch_calls(),
        "calls_per_job": by_service,
        "strict_refusals": strict_refusals,
    });
    eprintln!("burst: done in {all_launched:?}");
    eprintln!("burst: {}", serde_json::to_string(&burst)?);
    // The reaper part wants the burst's runners live: registered and running their jobs.
    p.wait_for(
        "every runner registered",
        Duration::from_secs(20 * 60),
        || async {
            let registered = p.sim.snapshot().runners.len();
            Ok((registered >= jobs as usize).then_some(()))
        },
    )
    .await?;
    let reaper = reaper_on(&mut p, args).await?;
    Ok((burst, reaper))
}

/// The sum of every value of `metric` written so far.
fn metric_sum(captured: &ephemera_core::metrics::Captured, metric: Metric) -> anyhow::Result<f64> {
    let documents = captured.documents().map_err(anyhow::Error::msg)?;
    Ok(documents
        .iter()
        .filter_map(|d| d.values(metric))
        .flatten()
        .sum())
}

/// The reaper over the burst's live runners plus planted history and backlog.
async fn reaper_on(p: &mut Pipeline, args: &Args) -> anyhow::Result<Value> {
    let table = ResourceNames::for_deployment(DEPLOYMENT).table;
    let live = p.sim.snapshot().runners.len();
    eprintln!(
        "reaper: {live} runners registered; writing {} deleted items",
        args.reaper_deleted
    );
    let writing = Instant::now();
    write_runners(
        &p.sdk,
        &table,
        &format!("{DEPLOYMENT}-old"),
        POOL,
        InstanceStatus::Deleted,
        args.reaper_deleted,
        |_, _| {},
    )
    .await?;
    let history_written = writing.elapsed();
    let mut instances = Vec::new();
    while instances.len() < args.reaper_pending {
        let count = u32::try_from((args.reaper_pending - instances.len()).min(50))?;
        let request = FleetRequest {
            pool: POOL.to_owned(),
            count,
            launch_template: format!("{DEPLOYMENT}-runner"),
            template_version: TemplateVersion::Stack,
            ami: None,
            instance_types: vec!["t3.micro".to_owned()],
            subnets: Vec::new(),
            market: Market::OnDemand,
            spot_allocation: Default::default(),
            shape: None,
            root_volume: None,
        };
        instances.extend(p.fleet.inner().launch(&request).await?.instance_ids);
    }
    write_runners(
        &p.sdk,
        &table,
        &format!("{DEPLOYMENT}-{POOL}-pend"),
        POOL,
        InstanceStatus::PendingDelete,
        args.reaper_pending,
        |i, runner| runner.instance_id = Some(instances[i].clone()),
    )
    .await?;
    let mut runs = Vec::new();
    for run in 1..=10 {
        let before = p.reaper_store.items_read();
        p.calls.reset();
        let started = Instant::now();
        let report = p.reap_once().await?;
        let took = started.elapsed();
        let read = p.reaper_store.items_read() - before;
        eprintln!("reaper: run {run} took {took:?}, read {read} items: {report:?}");
        runs.push(json!({
            "run": run,
            "seconds": (took.as_secs_f64() * 10.0).round() / 10.0,
            "items_read": read,
            "deleted": report.deleted,
            "aws_calls": p.calls.all().iter().map(|(_, _, n)| n).sum::<u64>(),
            "left_for_next_run": report.left_for_next_run,
        }));
        if !report.left_for_next_run && report.deleted == 0 {
            break;
        }
    }
    Ok(json!({
        "deleted_items": args.reaper_deleted,
        "live_runners": live,
        "pending_items": args.reaper_pending,
        "history_written_s": history_written.as_secs(),
        "runs": runs,
    }))
}

// ------------------------------------------------------------------------------ output

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn percentile_f64(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    Some(sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].round())
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 10_000.0).round() / 10.0
}

fn print_table(results: &Value) {
    if let Some(rows) = results["webhook_refused"].as_array() {
        println!("\nwebhook refusals, one core (CPU time as a share of a genuine queued delivery)");
        for row in rows {
            let number = |key: &str| row[key].as_f64().unwrap_or(f64::NAN);
            println!(
                "{:<34} {:>12} refused/s {:>7.3}",
                row["payload"].as_str().unwrap_or(""),
                number("events_per_second"),
                number("share_of_genuine")
            );
        }
    }
    if let Some(rows) = results["webhook"].as_array() {
        println!("\nwebhook handling, one core (verify + parse + route + message; no queue call)");
        println!(
            "{:<34} {:>8} {:>12} {:>9} {:>9}",
            "payload", "bytes", "events/s", "p50 µs", "p99 µs"
        );
        for row in rows {
            let number = |key: &str| row[key].as_f64().unwrap_or(f64::NAN);
            println!(
                "{:<34} {:>8} {:>12} {:>9.1} {:>9.1}",
                row["payload"].as_str().unwrap_or(""),
                number("bytes"),
                number("events_per_second"),
                number("p50_us"),
                number("p99_us")
            );
        }
    }
    println!(
        "\nLambda functions ({})",
        results["functions"]["target"].as_str().unwrap_or("")
    );
    println!(
        "{:<10} {:>12} {:>16} {:>16}",
        "function", "binary MB", "cold start p50", "cold start max"
    );
    for row in results["functions"]["each"]
        .as_array()
        .into_iter()
        .flatten()
    {
        println!(
            "{:<10} {:>12.1} {:>13.1} ms {:>13.1} ms",
            row["function"].as_str().unwrap_or(""),
            row["binary_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            row["cold_start_ms_p50"].as_f64().unwrap_or(f64::NAN),
            row["cold_start_ms_max"].as_f64().unwrap_or(f64::NAN)
        );
    }
    let burst = &results["burst"];
    if !burst.is_null() {
        println!(
            "\nburst of {} jobs: all launched after {} s; webhook → launch requested p50 {} ms, p99 {} ms; {} fleet requests",
            burst["jobs"], burst["all_launched_s"], burst["queued_to_launched_ms_p50"],
            burst["queued_to_launched_ms_p99"], burst["fleet_requests"]
        );
        println!("calls per job:");
        for (service, operations) in burst["calls_per_job"].as_object().into_iter().flatten() {
            let list: Vec<String> = operations
                .as_object()
                .into_iter()
                .flatten()
                .map(|(op, n)| format!("{op} {n}"))
                .collect();
            println!("  {service:<10} {}", list.join(", "));
        }
    }
    let reaper = &results["reaper"];
    if !reaper.is_null() {
        println!(
            "\nreaper over {} deleted items, {} live runners, {} pending:",
            reaper["deleted_items"], reaper["live_runners"], reaper["pending_items"]
        );
        for run in reaper["runs"].as_array().into_iter().flatten() {
            println!(
                "  run {}: {} s, {} items read, {} deleted, {} AWS calls",
                run["run"], run["seconds"], run["items_read"], run["deleted"], run["aws_calls"]
            );
        }
    }
}

//! `github-sim`: the GitHub simulator as a process, for `make demo`.
//!
//! Prints `github-sim listening on URL` once it serves (on `--port`, or a free port),
//! then runs until SIGINT/SIGTERM.

use anyhow::Context;
use clap::Parser;
use ephemera_tests::sim::{self, SimConfig, SimFaults};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "A stateful GitHub simulator that also plays the runner agent")]
struct Args {
    /// The port to serve on, on 127.0.0.1; 0 picks a free one (printed at start).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where `workflow_job` webhooks are sent.
    #[arg(long)]
    webhook_url: Option<String>,
    #[arg(long, env = "GITHUB_SIM_WEBHOOK_SECRET", hide_env_values = true)]
    webhook_secret: String,
    #[arg(long)]
    app_id: u64,
    /// PEM file of the App's RSA public key, to verify App JWTs.
    #[arg(long)]
    app_public_key: PathBuf,
    /// AWS endpoint (moto) whose EC2 instances the agent plays; no agent without it.
    #[arg(long)]
    aws_endpoint: Option<String>,
    #[arg(long, default_value = "ephemera")]
    deployment: String,
    #[arg(long, default_value_t = 2000)]
    job_duration_ms: u64,
    #[arg(long, default_value_t = 1000)]
    pickup_delay_ms: u64,
    #[arg(long, default_value_t = 1)]
    installation_id: u64,
    /// Records every REST exchange to DIR/exchanges-PORT.jsonl (for the conformance
    /// check); defaults to $EPHEMERA_SIM_RECORD_DIR.
    #[arg(long)]
    record_dir: Option<PathBuf>,
    /// Share of REST answers replaced by a 5xx, 0.0 to 1.0.
    #[arg(long, default_value_t = 0.0)]
    server_error_rate: f64,
    /// Latency added to every REST answer.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Seeds the faults, so a run can be reproduced.
    #[arg(long, default_value_t = 0)]
    fault_seed: u64,
    /// Share of runner hosts that stay up when their runner exits (hung hosts), 0.0 to 1.0.
    #[arg(long, default_value_t = 0.0)]
    hung_hosts: f64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        // Colour only on a terminal: `make up` and the demo send this log to a file.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
    let args = Args::parse();
    let pem = std::fs::read_to_string(&args.app_public_key)
        .with_context(|| format!("reading {}", args.app_public_key.display()))?;
    let mut config = SimConfig::new(args.app_id, pem, args.webhook_secret, args.deployment);
    config.port = args.port;
    config.webhook_url = args.webhook_url;
    config.aws_endpoint = args.aws_endpoint;
    config.installation_id = args.installation_id;
    config.job_duration = Duration::from_millis(args.job_duration_ms);
    config.pickup_delay = Duration::from_millis(args.pickup_delay_ms);
    if args.record_dir.is_some() {
        config.record_dir = args.record_dir;
    }
    config.faults = SimFaults {
        seed: args.fault_seed,
        server_error_rate: args.server_error_rate.clamp(0.0, 1.0),
        latency: Duration::from_millis(args.latency_ms),
        hung_hosts: args.hung_hosts.clamp(0.0, 1.0),
        ..SimFaults::default()
    };
    let handle = sim::start(config).await?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "github-sim listening on {}", handle.url)?;
    stdout.flush()?;
    shutdown_signal().await?;
    handle.stop().await;
    Ok(())
}

async fn shutdown_signal() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result?,
        _ = terminate.recv() => {}
    }
    Ok(())
}

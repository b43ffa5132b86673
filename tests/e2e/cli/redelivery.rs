//! A lone job whose only `queued` delivery failed, through the real `ephemera local`
//! binary: the endpoint was down when GitHub sent it, no other job comes before or after
//! it, and the reaper's redelivery sweep has GitHub send it again within 3 reaper runs.

use ephemera_core::config::Config;
use ephemera_tests::moto::{free_port, Moto};
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::sim::{self, SimConfig};
use ephemera_tests::stack::{create_stack, template_path, StackSpec};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;

const WEBHOOK_SECRET: &str = "redelivery-webhook-secret";
const REAPER_RUN: &str = "reaper run report";
const REDELIVERED: &str = "failed webhook delivery redelivered";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_job_whose_only_queued_delivery_failed_runs_within_three_reaper_runs(
) -> anyhow::Result<()> {
    let config_path = workspace_path("infra/config.example.yaml");
    let config = Config::load(&config_path)?;
    let key = workspace_path("tests/fixtures/github-app-test-key.pem");
    let public_key =
        std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pub.pem"))?;

    let moto = Moto::start().await?;
    let mut sim_config = SimConfig::new(
        config.github.app_id,
        public_key,
        WEBHOOK_SECRET,
        &config.deployment,
    );
    sim_config.aws_endpoint = Some(moto.endpoint.clone());
    sim_config.job_duration = Duration::from_secs(1);
    sim_config.pickup_delay = Duration::from_millis(500);
    let sim = sim::start(sim_config).await?;
    create_stack(
        &moto,
        &template_path(),
        &StackSpec {
            stack_name: config.deployment.clone(),
            deployment: config.deployment.clone(),
            app_id: config.github.app_id,
            github_api_url: sim.url.clone(),
            webhook_secret: WEBHOOK_SECRET.to_owned(),
            app_key_pem: std::fs::read_to_string(&key)?,
            pools_config: None,
        },
    )
    .await?;

    let port = free_port()?;
    let log_path = std::env::temp_dir().join(format!(
        "ephemera-redelivery-{}-{port}.log",
        std::process::id()
    ));
    let log = std::fs::File::create(&log_path)?;
    let _local = Command::new(assert_cmd::cargo::cargo_bin("ephemera"))
        .current_dir(workspace_path(""))
        .args(["local", "--bootstrap", "--reaper-interval", "2s"])
        .arg("--config")
        .arg(&config_path)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--github-api-url", &sim.url, "--github-app-key"])
        .arg(&key)
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("EPHEMERA_WEBHOOK_SECRET", WEBHOOK_SECRET)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info,ephemera_cli=debug")
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()?;
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "ephemera local did not listen: {}",
            std::fs::read_to_string(&log_path)?
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // GitHub sends the job's only `queued` delivery while the endpoint is down.
    let labels: Vec<&str> = config.pools[0].labels.iter().map(String::as_str).collect();
    let job_id = sim.create_job("octo-org", "app", &labels, None).await?;
    sim.set_webhook_url(format!("http://127.0.0.1:{port}/webhook"));
    let first = sim.snapshot().deliveries.into_values().collect::<Vec<_>>();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].status_code, 502, "the delivery failed: {first:?}");
    let runs_before = std::fs::read_to_string(&log_path)?
        .matches(REAPER_RUN)
        .count();

    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let job = sim.snapshot().jobs[&job_id].clone();
        if job.status == "completed" {
            assert_eq!(job.conclusion.as_deref(), Some("success"), "{job:?}");
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "job {job_id} is {}; log:\n{}",
            job.status,
            std::fs::read_to_string(&log_path)?
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The sweep asked for it within 3 runs of the reaper, and one runner ran it.
    let log = std::fs::read_to_string(&log_path)?;
    let redelivered_at = log
        .find(REDELIVERED)
        .ok_or_else(|| anyhow::anyhow!("no redelivery in the log:\n{log}"))?;
    let runs_until = log[..redelivered_at].matches(REAPER_RUN).count();
    assert!(
        runs_until - runs_before < 3,
        "redelivered in run {} after the failure",
        runs_until - runs_before + 1
    );
    let snapshot = sim.snapshot();
    assert_eq!(snapshot.counters.runners_registered, 1);
    assert_eq!(snapshot.counters.jobs_killed, 0);
    let redeliveries = snapshot
        .deliveries
        .values()
        .filter(|d| d.redelivery && (200..300).contains(&d.status_code))
        .count();
    assert!(redeliveries >= 1, "{:?}", snapshot.deliveries);
    let _ = std::fs::remove_file(&log_path);
    Ok(())
}

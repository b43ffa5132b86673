//! A lone job whose only `queued` delivery failed, through the real `ephemera local`
//! binary: the endpoint was down when GitHub sent it, no other job comes before or after
//! it, and the reaper's redelivery sweep has GitHub send it again within 3 reaper runs.

use super::local_world::{LocalOptions, LocalWorld};
use ephemera_tests::moto::free_port;
use std::time::{Duration, Instant};

const REAPER_RUN: &str = "reaper run report";
const REDELIVERED: &str = "failed webhook delivery redelivered";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_job_whose_only_queued_delivery_failed_runs_within_three_reaper_runs(
) -> anyhow::Result<()> {
    let world = LocalWorld::start(LocalOptions::default()).await?;
    let (sim, config) = (&world.sim, &world.config);
    let log_path = &world.log_path;
    // GitHub sends the job's only `queued` delivery while the endpoint is down.
    sim.set_webhook_url(format!("http://127.0.0.1:{}/webhook", free_port()?));
    let labels: Vec<&str> = config.pools[0].labels.iter().map(String::as_str).collect();
    let job_id = sim.create_job("octo-org", "app", &labels, None).await?;
    sim.set_webhook_url(world.webhook_url());
    let first = sim.snapshot().deliveries.into_values().collect::<Vec<_>>();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].status_code, 502, "the delivery failed: {first:?}");
    let runs_before = std::fs::read_to_string(log_path)?
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
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The sweep asked for it within 3 runs of the reaper, and one runner ran it.
    let log = world.log();
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
    Ok(())
}

//! The reaper's redelivery sweep through the real `ephemera local` binary: a lone job
//! whose only `queued` delivery failed (the endpoint was down when GitHub sent it, no
//! other job comes before or after it) is sent again within 3 reaper runs; deliveries
//! the endpoint refuses with 401 forever are asked for a bounded number of times, then
//! given up, and a restarted process neither asks for them again nor keeps a newer
//! failure waiting behind them.

use super::local_world::{LocalOptions, LocalWorld};
use ephemera_tests::moto::free_port;
use std::collections::BTreeMap;
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

const GIVEN_UP_HERE: &str = "failed webhook delivery given up: redeliver it by hand";
const REFUSED_ASKS: usize = ephemera_core::handlers::reaper::REFUSED_ASKS as usize;

/// The sum of the `RedeliveriesGivenUp` values the log's metric lines carry for `reason`.
fn given_up_counted(log: &str, reason: &str) -> f64 {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|doc| doc["Reason"] == reason)
        .filter_map(|doc| doc["RedeliveriesGivenUp"].as_f64())
        .sum()
}

/// GitHub's redeliveries of each event the endpoint refused with `status`, by GUID.
fn asks_by_guid(sim: &ephemera_tests::sim::SimHandle, status: u16) -> BTreeMap<String, usize> {
    let deliveries = sim.snapshot().deliveries;
    let refused: Vec<String> = deliveries
        .values()
        .filter(|d| !d.redelivery && d.status_code == status)
        .map(|d| d.guid.clone())
        .collect();
    refused
        .into_iter()
        .map(|guid| {
            let asks = deliveries
                .values()
                .filter(|d| d.redelivery && d.guid == guid)
                .count();
            (guid, asks)
        })
        .collect()
}

/// 25 events the endpoint answers with 401 forever (a secret mismatch, for them), then a
/// restart of `ephemera local`, then a newer event whose only delivery failed while the
/// endpoint was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_deliveries_are_asked_a_bounded_number_of_times_across_a_restart_and_crowd_out_no_newer_one(
) -> anyhow::Result<()> {
    let mut world = LocalWorld::start(LocalOptions::default()).await?;
    let labels: Vec<String> = world.config.pools[0].labels.clone();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    world.sim.refuse_deliveries("stuck", 401);
    // Labels no runner has: the newer job's runner must not take one of these instead.
    let stuck_labels = ["self-hosted", "no-runner-has-this"];
    for _ in 0..25 {
        world
            .sim
            .create_job("octo-org", "stuck", &stuck_labels, None)
            .await?;
    }
    // Each is asked for REFUSED_ASKS times, spaced, then given up and reported.
    let deadline = Instant::now() + Duration::from_secs(120);
    while world.log().matches(GIVEN_UP_HERE).count() < 25 {
        anyhow::ensure!(
            Instant::now() < deadline,
            "not all given up: {:?}\n{}",
            asks_by_guid(&world.sim, 401),
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let asked = asks_by_guid(&world.sim, 401);
    assert_eq!(asked.len(), 25, "{asked:?}");
    assert!(asked.values().all(|&n| n == REFUSED_ASKS), "{asked:?}");
    // What the secret-mismatch alarm watches.
    let deadline = Instant::now() + Duration::from_secs(10);
    while given_up_counted(&world.log(), "unauthorized") < 25.0 {
        anyhow::ensure!(Instant::now() < deadline, "not counted:\n{}", world.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(given_up_counted(&world.log(), "unauthorized"), 25.0);

    // A new process reads the asks back from GitHub's list.
    world.kill().await?;
    world.spawn().await?;
    let restarted_at = world.log().len();
    let runs_before = world.log().matches(REAPER_RUN).count();
    world
        .sim
        .set_webhook_url(format!("http://127.0.0.1:{}/webhook", free_port()?));
    let job_id = world
        .sim
        .create_job("octo-org", "app", &labels, None)
        .await?;
    world.sim.set_webhook_url(world.webhook_url());
    let newer = world
        .sim
        .snapshot()
        .deliveries
        .values()
        .find(|d| d.status_code == 502)
        .map(|d| d.guid.clone())
        .ok_or_else(|| anyhow::anyhow!("the newer delivery did not fail"))?;
    let deadline = Instant::now() + Duration::from_secs(90);
    while world.sim.snapshot().jobs[&job_id].status != "completed" {
        anyhow::ensure!(
            Instant::now() < deadline,
            "job {job_id} never ran:\n{}",
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = world.log();
    let asked_for_newer = log
        .lines()
        .position(|l| l.contains(REDELIVERED) && l.contains(&newer))
        .map(|n| log.lines().take(n).map(|l| l.len() + 1).sum::<usize>())
        .ok_or_else(|| anyhow::anyhow!("{newer} not redelivered:\n{log}"))?;
    let runs_until = log[..asked_for_newer].matches(REAPER_RUN).count();
    assert!(
        runs_until - runs_before < 3,
        "the newer failure waited {} runs",
        runs_until - runs_before
    );
    // A few more runs: the restarted process asked none of the 25 again, nor reported them.
    let runs = log.matches(REAPER_RUN).count();
    while world.log().matches(REAPER_RUN).count() < runs + 5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        asks_by_guid(&world.sim, 401),
        asked,
        "asked again after the restart"
    );
    let since_restart = &world.log()[restarted_at..];
    assert_eq!(since_restart.matches(GIVEN_UP_HERE).count(), 0);
    assert_eq!(given_up_counted(since_restart, "unauthorized"), 0.0);
    Ok(())
}

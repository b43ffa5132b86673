//! Two GitHub Apps through the real `ephemera local` binary: the configuration lists the
//! second App with the secret holding its key, the process reads it from there, and the
//! registrations of a burst go to both Apps; with the first App's registration bucket
//! spent, the second registers every later runner and every job runs.

use super::local_world::{LocalOptions, LocalWorld};
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::sim::buckets::REGISTRATION;
use std::time::{Duration, Instant};

const SECOND_APP_ID: u64 = 123_457;

/// The example configuration, with a second App listed.
fn two_apps_config() -> anyhow::Result<String> {
    let example = std::fs::read_to_string(workspace_path("infra/config.example.yaml"))?;
    let first = "  app_id: 123456\n";
    anyhow::ensure!(example.contains(first), "the example's App id changed");
    Ok(example.replacen(
        first,
        &format!(
            "{first}  more_apps:\n    - app_id: {SECOND_APP_ID}\n      key_secret: ephemera/github-app-{SECOND_APP_ID}\n"
        ),
        1,
    ))
}

/// Creates `count` jobs and waits (at most 120 s) until GitHub shows them completed.
async fn run_jobs(world: &LocalWorld, count: usize) -> anyhow::Result<()> {
    let jobs = world.create_jobs(count).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let state = world.sim.snapshot();
        if jobs.iter().all(|id| state.jobs[id].status == "completed") {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "jobs not all completed: {:?}\n{}",
            state.counters.app_calls,
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemera_local_spreads_registrations_over_two_apps_and_carries_on_with_one(
) -> anyhow::Result<()> {
    let world = LocalWorld::start(LocalOptions {
        config_yaml: Some(two_apps_config()?),
        ..LocalOptions::default()
    })
    .await?;
    let first = world.config.github.app_id;
    run_jobs(&world, 8).await?;
    let counters = world.sim.snapshot().counters;
    let (by_first, by_second) = (
        counters.registrations_by(first),
        counters.registrations_by(SECOND_APP_ID),
    );
    assert!(
        by_first > 0 && by_second > 0,
        "both Apps register: {:?}",
        counters.app_calls
    );
    assert_eq!(counters.refusals_of(first), 0);
    assert_eq!(counters.refusals_of(SECOND_APP_ID), 0);

    world.sim.exhaust_app_bucket(first, REGISTRATION);
    run_jobs(&world, 6).await?;
    let counters = world.sim.snapshot().counters;
    assert_eq!(
        counters.registrations_by(first),
        by_first,
        "no registration by the spent App: {:?}",
        counters.app_calls
    );
    assert!(counters.registrations_by(SECOND_APP_ID) >= by_second + 6);
    assert_eq!(counters.refusals_of(SECOND_APP_ID), 0);
    assert!(world.aws().await.dead_letters().await?.is_empty());
    Ok(())
}

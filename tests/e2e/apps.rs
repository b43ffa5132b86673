//! Two GitHub Apps in one deployment, on moto + the simulator in the strict world:
//! a burst's registrations are spread across both and neither App is refused by
//! GitHub's buckets; when one App's registration bucket is spent, the other registers
//! every runner after that, and every job still runs.

use ephemera_tests::pipeline::{Pipeline, PipelineOptions, APP_ID, LABELS, SECOND_APP_ID};
use ephemera_tests::sim::buckets::REGISTRATION;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);
/// The most messages the scaler handles at once (one SQS receive).
const MAX_BATCH: u64 = 10;

fn two_apps() -> PipelineOptions {
    PipelineOptions {
        max_runners: 20,
        job_duration: Duration::from_millis(500),
        pickup_delay: Duration::from_millis(100),
        two_apps: true,
        ..PipelineOptions::default()
    }
}

async fn create_jobs(p: &Pipeline, count: usize) -> anyhow::Result<Vec<u64>> {
    let mut jobs = Vec::new();
    for _ in 0..count {
        jobs.push(p.sim.create_job("octo-org", "app", &LABELS, None).await?);
    }
    Ok(jobs)
}

/// Waits until the simulator shows every one of `jobs` completed.
async fn all_completed(p: &Pipeline, jobs: &[u64]) -> anyhow::Result<()> {
    p.wait_for("every job completed", LIMIT, || async {
        let state = p.sim.snapshot();
        let done = jobs.iter().all(|id| {
            state
                .jobs
                .get(id)
                .is_some_and(|job| job.status == "completed")
        });
        Ok(done.then_some(()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_with_two_apps_registers_with_both_and_neither_is_refused() -> anyhow::Result<()> {
    let mut p = Pipeline::start(two_apps()).await?;
    let jobs = create_jobs(&p, 16).await?;
    all_completed(&p, &jobs).await?;
    p.check_alive()?;

    let counters = p.sim.snapshot().counters;
    let (first, second) = (
        counters.registrations_by(APP_ID),
        counters.registrations_by(SECOND_APP_ID),
    );
    assert!(
        first > 0 && second > 0,
        "both Apps register: {first} and {second}"
    );
    assert_eq!(first + second, counters.runners_registered);
    assert!(counters.runners_registered >= 16);
    for app_id in [APP_ID, SECOND_APP_ID] {
        assert_eq!(counters.refusals_of(app_id), 0, "App {app_id} refused");
    }
    // Each App's client spent its own buckets, within their limits.
    for app in &p.scaler_apps {
        let registration = app.rate_buckets().get(REGISTRATION).copied();
        let spent = registration.map(|b| b.limit - b.remaining);
        assert!(
            spent.is_some_and(|spent| spent > 0 && spent <= 16),
            "App {}: {registration:?}",
            app.app_id()
        );
    }
    assert_eq!(p.sim.snapshot().counters.jobs_killed, 0);
    assert_eq!(p.dead_lettered().await?, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_apps_registration_bucket_spent_the_other_registers_every_runner(
) -> anyhow::Result<()> {
    let mut p = Pipeline::start(two_apps()).await?;
    let before = create_jobs(&p, 6).await?;
    all_completed(&p, &before).await?;
    let counters = p.sim.snapshot().counters;
    let first_before = counters.registrations_by(APP_ID);
    let second_before = counters.registrations_by(SECOND_APP_ID);
    assert!(
        first_before > 0 && second_before > 0,
        "both register at first"
    );

    // The first App's registration bucket is spent for the hour; its core bucket and
    // the second App's buckets are untouched.
    p.sim.exhaust_app_bucket(APP_ID, REGISTRATION);
    let after = create_jobs(&p, 10).await?;
    all_completed(&p, &after).await?;
    p.check_alive()?;

    let counters = p.sim.snapshot().counters;
    assert_eq!(
        counters.registrations_by(APP_ID),
        first_before,
        "no registration by the spent App"
    );
    assert!(
        counters.registrations_by(SECOND_APP_ID) >= second_before + 10,
        "the other App registered every later runner: {:?}",
        counters.app_calls
    );
    // Refused once for each registration in flight when the bucket was found spent
    // (the scaler handles a batch's messages at once), then set aside until its reset.
    assert!(
        (1..=MAX_BATCH).contains(&counters.refusals_of(APP_ID)),
        "{:?}",
        counters.app_calls
    );
    assert_eq!(counters.refusals_of(SECOND_APP_ID), 0);
    assert_eq!(counters.jobs_killed, 0);
    assert_eq!(p.dead_lettered().await?, 0);
    Ok(())
}

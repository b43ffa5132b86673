//! One reaper at a time, on moto: two reapers assembled as the deployment's are (the
//! Lambda function's and `ephemera local`'s, `ephemera_aws::assembly`) race for the
//! lease item when started together; one does the work, the other does nothing, and
//! the lease is free again afterwards. A deployment reaper assembled without its lease
//! fails this test. And the schedule's pace through the reaper's Lambda entry point: a
//! run gives the lease back with a call its role allows, so the next minute's run works
//! too.

use super::follow::deployment_environment;
use crate::cli::config_yaml;
use ephemera_aws::assembly::WebhookApp;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::RunnerStore;
use ephemera_tests::functions::Function;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT};
use serde_json::{json, Value};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

#[tokio::test]
async fn of_two_reapers_started_together_only_one_works() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        drain_queue: false,
        ..PipelineOptions::default()
    })
    .await?;
    let reaper = || {
        let webhook_app = WebhookApp::of(p.reaper_forge.clone());
        p.deployment().reaper(p.reaper_forge.clone(), webhook_app)
    };
    let (first, second) = (reaper(), reaper());
    let now = OffsetDateTime::now_utc();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (a, b) = tokio::join!(first.run(now, deadline), second.run(now, deadline));
    let (a, b) = (a?, b?);
    println!("first: {a:?}\nsecond: {b:?}");
    assert!(
        a.another_run_held_the_lease != b.another_run_held_the_lease,
        "exactly one of the two runs works"
    );
    // The lease was given back: the next scheduled run works.
    let next = reaper()
        .run(
            OffsetDateTime::now_utc(),
            Instant::now() + Duration::from_secs(60),
        )
        .await?;
    assert!(!next.another_run_held_the_lease);
    Ok(())
}

const LABELS: [&str; 3] = ["self-hosted", "linux", "x64"];

/// Runs a job through the pipeline and waits until its runner waits for the reaper.
async fn finished_runner(p: &Pipeline) -> anyhow::Result<RunnerRecord> {
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let what = format!("the runner of job {job_id} to wait for deletion");
    p.wait_for(&what, Duration::from_secs(60), || async move {
        Ok(p.runner_for_job(job_id)
            .await?
            .filter(|r| r.status == InstanceStatus::PendingDelete))
    })
    .await
}

/// One scheduled invocation of the reaper function; its report.
async fn scheduled_run(reaper: &mut Function) -> anyhow::Result<Value> {
    let report = reaper
        .invoke(json!({"source": "aws.events", "detail-type": "Scheduled Event"}))
        .await?;
    println!("reaper run: {report}");
    Ok(report)
}

/// The reaper's schedule is every minute (template.yaml, ReaperFunction `rate(1
/// minute)`), and a run's lease lasts until its deadline and a margin, longer than a
/// minute. The second run here starts as soon as the first has ended, sooner than the
/// next minute and long before the first run's lease would expire, so it works only if
/// the first gave the lease back, with a call its role allows. Under the strict layer's
/// IAM enforcement a release the role may not make is refused, and this run reports the
/// lease taken instead of deleting the second runner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_scheduled_reaper_runs_a_minute_apart_both_do_their_work() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    })
    .await?;
    let config = config_yaml(DEPLOYMENT, &p.sim.url);
    let env = deployment_environment(&p, &config, &[]).await?;
    let mut reaper = Function::start("reaper", &env).await?;

    for run in ["first", "second"] {
        let runner = finished_runner(&p).await?;
        let report = scheduled_run(&mut reaper).await?;
        assert_eq!(
            report["another_run_held_the_lease"],
            json!(false),
            "the {run} run found the lease taken: {report}"
        );
        assert!(
            report["deleted"].as_u64().is_some_and(|n| n >= 1),
            "the {run} run deleted the finished runner: {report}"
        );
        let record = p.store.get_runner(&runner.name).await?;
        assert_eq!(
            record.map(|r| r.status),
            Some(InstanceStatus::Deleted),
            "the {run} run's runner {} is deleted",
            runner.name
        );
    }
    Ok(())
}

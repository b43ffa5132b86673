//! The runner a host ran, end to end: hosts booting an image whose baked runner is behind
//! the newest write the three attributes in their JIT tombstone (as RunnerRole, through
//! the strict layer), the reaper's delete carries them to the runner's record, the job's
//! timeline shows the runner update before the JIT read, `ephemera jobs show` prints the
//! version, and the reaper counts the boot as one whose image was behind.

use crate::cli::{stdout_of, Operator};
use crate::observability::total;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::metrics::{Captured, Dimension, EmfDocument, Metric, Metrics};
use ephemera_core::ports::RunnerStore;
use ephemera_core::timeline::{Stage, Timeline};
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT, LABELS};
use ephemera_tests::sim::HostRunnerPlay;
use std::time::Duration;

const POOL: &str = "linux-x64";
const LIMIT: Duration = Duration::from_secs(90);

/// The metric documents once the reaper has counted the boot.
async fn once_the_boot_is_counted(
    p: &Pipeline,
    captured: &Captured,
) -> anyhow::Result<Vec<EmfDocument>> {
    p.wait_for("the boot to be counted", LIMIT, || async {
        let documents = captured.documents().map_err(anyhow::Error::msg)?;
        Ok((total(&documents, Metric::RunnerBootsReported, &[]) > 0.0).then_some(()))
    })
    .await?;
    captured.documents().map_err(anyhow::Error::msg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_image_was_behind_leaves_its_runner_version_swap_stage_and_count(
) -> anyhow::Result<()> {
    let (metrics, captured) = Metrics::capture(DEPLOYMENT);
    let p = Pipeline::start(PipelineOptions {
        metrics,
        reaper_interval: Some(Duration::from_secs(1)),
        ..PipelineOptions::default()
    })
    .await?;
    let play = HostRunnerPlay::baked("2.336.0").newest("2.337.0");
    p.sim.set_host_runner(play.clone());
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    p.wait_for("the job's runner to be deleted", LIMIT, || async {
        let runner = p.runner_for_job(job_id).await?;
        let deleted = runner.filter(|r| r.status == InstanceStatus::Deleted);
        Ok(deleted.filter(|_| p.sim.snapshot().jobs[&job_id].status == "completed"))
    })
    .await?;

    let runner = p.runner_for_job(job_id).await?.expect("its runner");
    let ran = &runner.host_runner;
    assert_eq!(ran.runner_version.as_deref(), Some("2.337.0"), "{runner:?}");
    assert_eq!(ran.runner_image_version.as_deref(), Some("2.336.0"));
    assert_eq!(ran.runner_swap_ms, Some(4_200));
    let job = p.store.get_job(job_id).await?.expect("recorded");
    let timeline = Timeline::of(&job, Some(&runner));
    let read = timeline.at(Stage::JitRead).expect("the instance's read");
    let update = timeline.at(Stage::RunnerUpdate).expect("the swap's stage");
    assert_eq!(read - update, time::Duration::milliseconds(4_200));
    assert!(timeline.out_of_order().is_empty(), "{timeline:?}");

    let op = Operator::new(&p)?;
    let job_arg = job_id.to_string();
    let out = op.run(&["jobs", "show", &job_arg])?.assert().success();
    let text = stdout_of(out.get_output());
    assert!(
        text.contains("2.337.0 (image had 2.336.0, swapped in 4.2 s)"),
        "{text}"
    );
    let row = text.lines().find(|l| l.starts_with("runner_update "));
    assert!(
        row.is_some_and(|r| r.trim_end().ends_with("instance")),
        "{text}"
    );

    let documents = once_the_boot_is_counted(&p, &captured).await?;
    assert_eq!(total(&documents, Metric::RunnerBootsReported, &[]), 1.0);
    assert_eq!(total(&documents, Metric::RunnerBootsBehind, &[]), 1.0);
    let pool = [(Dimension::Pool, POOL)];
    assert_eq!(total(&documents, Metric::BootsImageBehind, &pool), 1.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_host_names_its_runner_without_a_swap_or_a_stale_count() -> anyhow::Result<()> {
    let (metrics, captured) = Metrics::capture(DEPLOYMENT);
    let p = Pipeline::start(PipelineOptions {
        metrics,
        reaper_interval: Some(Duration::from_secs(1)),
        ..PipelineOptions::default()
    })
    .await?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    p.wait_for("the job's runner to be deleted", LIMIT, || async {
        let runner = p.runner_for_job(job_id).await?;
        Ok(runner.filter(|r| r.status == InstanceStatus::Deleted))
    })
    .await?;
    let runner = p.runner_for_job(job_id).await?.expect("its runner");
    let ran = &runner.host_runner;
    let default = ephemera_tests::sim::DEFAULT_RUNNER_VERSION;
    assert_eq!(ran.runner_version.as_deref(), Some(default), "{runner:?}");
    assert_eq!(
        (ran.runner_image_version.as_deref(), ran.runner_swap_ms),
        (None, None)
    );
    let job = p.store.get_job(job_id).await?.expect("recorded");
    let timeline = Timeline::of(&job, Some(&runner));
    assert!(timeline
        .stamps
        .iter()
        .all(|s| s.stage != Stage::RunnerUpdate));
    let documents = once_the_boot_is_counted(&p, &captured).await?;
    assert_eq!(total(&documents, Metric::RunnerBootsBehind, &[]), 0.0);
    assert_eq!(total(&documents, Metric::BootsImageBehind, &[]), 0.0);
    Ok(())
}

//! Labels as GitHub matches them: a just-in-time runner carries exactly the labels it is
//! registered with, so a pool that does not list `self-hosted` must still register it for
//! a `runs-on: [self-hosted, ...]` job to reach its runner.

use ephemera_core::lifecycle::InstanceStatus;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_without_self_hosted_runs_a_self_hosted_linux_job() -> anyhow::Result<()> {
    let options = PipelineOptions {
        pool_labels: "Linux, x64".to_owned(),
        job_duration: Duration::from_secs(2),
        ..PipelineOptions::default()
    };
    let mut p = Pipeline::start(options).await?;
    let job_id = p
        .sim
        .create_job("octo-org", "app", &["self-hosted", "linux"], None)
        .await?;

    // While it runs the job, the runner is registered: read its labels as GitHub has them.
    let (runner_name, registered) = p
        .wait_for("the job to run on a registered runner", LIMIT, || async {
            let sim = p.sim.snapshot();
            let Some(runner_id) = sim.jobs.get(&job_id).and_then(|job| job.runner_id) else {
                return Ok(None);
            };
            Ok(sim
                .runners
                .get(&runner_id)
                .map(|runner| (runner.name.clone(), runner.labels.clone())))
        })
        .await?;
    assert_eq!(registered, ["self-hosted", "Linux", "x64"]);

    let record = p
        .wait_for("the runner to be reaped", LIMIT, || async {
            let record = p.runner_for_job(job_id).await?;
            Ok(record.filter(|r| r.status == InstanceStatus::Deleted))
        })
        .await?;
    p.check_alive()?;
    assert_eq!(
        record.name, runner_name,
        "the job ran on the runner launched for it"
    );
    assert_eq!(
        record.labels, registered,
        "the record holds what GitHub was told"
    );
    let sim = p.sim.snapshot();
    let job = &sim.jobs[&job_id];
    assert_eq!(job.status, "completed");
    assert_eq!(job.conclusion.as_deref(), Some("success"));
    assert_eq!(sim.counters.runners_registered, 1);
    Ok(())
}

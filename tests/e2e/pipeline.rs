//! One job through the whole pipeline on moto + the GitHub simulator, and the deletion
//! rules that keep busy runners alive and never strand a record.

use anyhow::ensure;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::{InstanceState, RunnerStore, Transition};
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, LABELS};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

async fn runner_in(
    p: &Pipeline,
    job_id: u64,
    status: InstanceStatus,
) -> anyhow::Result<RunnerRecord> {
    let what = format!("the runner of job {job_id} to be {status}");
    p.wait_for(&what, LIMIT, || async move {
        Ok(p.runner_for_job(job_id)
            .await?
            .filter(|r| r.status == status))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_gets_one_runner_which_runs_it_and_is_reaped() -> anyhow::Result<()> {
    let mut p = Pipeline::start(PipelineOptions::default()).await?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;

    let runner = runner_in(&p, job_id, InstanceStatus::Deleted).await?;
    p.check_alive()?;

    let instance_id = runner
        .instance_id
        .clone()
        .expect("a deleted runner had an instance");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Terminated)
    );
    assert!(
        !p.jit_config_exists(&instance_id).await?,
        "JIT config left behind"
    );
    let instances = ephemera_core::ports::Fleet::describe(p.fleet.inner()).await?;
    assert_eq!(instances.len(), 1, "one job, one instance: {instances:?}");

    let sim = p.sim.snapshot();
    let job = &sim.jobs[&job_id];
    assert_eq!(job.status, "completed");
    assert_eq!(job.conclusion.as_deref(), Some("success"));
    assert_eq!(
        job.runner_name.as_deref(),
        Some(runner.name.as_str()),
        "the job ran on its own runner"
    );
    assert_eq!(sim.counters.runners_registered, 1);
    assert_eq!(sim.counters.jobs_killed, 0);
    assert!(
        sim.runners.is_empty(),
        "runner still registered on GitHub: {:?}",
        sim.runners
    );

    let stored_job = p.store.get_job(job_id).await?.expect("job recorded");
    assert_eq!(
        stored_job.status,
        ephemera_core::model::JobStatus::Completed
    );
    assert_eq!(
        p.store.get_pool("linux-x64").await?.slots_used,
        0,
        "slot released"
    );
    assert!(runner.ttl.is_some(), "deleted record expires");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_runner_keeps_its_instance_until_its_job_ends() -> anyhow::Result<()> {
    let options = PipelineOptions {
        job_duration: Duration::from_secs(6),
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let running = runner_in(&p, job_id, InstanceStatus::Running).await?;
    p.wait_for("the job to start", LIMIT, || async {
        Ok((p.sim.snapshot().jobs[&job_id].status == "in_progress").then_some(()))
    })
    .await?;

    // An operator (or a rule) asks for deletion while the job runs.
    let now = time::OffsetDateTime::now_utc();
    let ask = Transition::new(InstanceStatus::Running, InstanceStatus::PendingDelete, now)
        .because("operator");
    p.store.transition(&running.name, &ask).await?;
    let report = p.reap_once().await?;
    assert_eq!(report.busy, 1, "{report:?}");

    let kept = p
        .store
        .get_runner(&running.name)
        .await?
        .expect("record kept");
    assert_eq!(kept.status, InstanceStatus::PendingDelete);
    assert_eq!(kept.reason.as_deref(), Some("busy"));
    let instance_id = kept.instance_id.clone().expect("instance");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Running)
    );
    assert_eq!(
        p.fleet.terminate_calls(),
        0,
        "a busy runner's instance was never asked to terminate"
    );

    // Once the job is over, the same record is reaped.
    let deleted = p
        .wait_for("the runner to be reaped after its job", LIMIT, || async {
            p.reap_once().await?;
            Ok(p.store
                .get_runner(&running.name)
                .await?
                .filter(|r| r.status == InstanceStatus::Deleted))
        })
        .await?;
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Terminated)
    );
    let sim = p.sim.snapshot();
    assert_eq!(sim.jobs[&job_id].conclusion.as_deref(), Some("success"));
    assert_eq!(sim.counters.jobs_killed, 0, "no job was killed");
    assert!(deleted.ttl.is_some());
    Ok(())
}

/// Gets a runner through its job and parks it in `pending_delete` with the reaper idle.
async fn finished_runner(p: &Pipeline) -> anyhow::Result<RunnerRecord> {
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let runner = runner_in(p, job_id, InstanceStatus::PendingDelete).await?;
    ensure!(runner.instance_id.is_some(), "runner without instance");
    Ok(runner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_delete_backs_off_on_ec2_errors_and_force_delete_does_not() -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;

    // Graceful: the EC2 error sends the record back with a backoff and the error kept.
    let graceful = finished_runner(&p).await?;
    p.fleet.fail_terminate(1);
    let report = p.reap_once().await?;
    assert_eq!(report.backed_off, 1, "{report:?}");
    let backed_off = p.store.get_runner(&graceful.name).await?.expect("kept");
    assert_eq!(backed_off.status, InstanceStatus::PendingDelete);
    assert_eq!(backed_off.attempts, 1);
    assert!(
        backed_off.next_attempt_at > backed_off.updated_at,
        "next attempt is later"
    );
    assert!(backed_off
        .last_error
        .as_deref()
        .unwrap_or("")
        .contains("injected failure"));

    // Forced: the same EC2 error is logged and ignored; `deleted` in one pass.
    let forced = finished_runner(&p).await?;
    let now = time::OffsetDateTime::now_utc();
    let force = Transition::new(
        InstanceStatus::PendingDelete,
        InstanceStatus::PendingForceDelete,
        now,
    )
    .because("operator --force");
    p.store.transition(&forced.name, &force).await?;
    p.fleet.fail_terminate(100);
    let report = p.reap_once().await?;
    assert_eq!(
        report.deleted, 1,
        "only the forced one gets through a failing EC2: {report:?}"
    );
    let deleted = p
        .store
        .get_runner(&forced.name)
        .await?
        .expect("kept as deleted");
    assert_eq!(deleted.status, InstanceStatus::Deleted);
    let still_waiting = p.store.get_runner(&graceful.name).await?.expect("kept");
    assert_eq!(still_waiting.status, InstanceStatus::PendingDelete);
    p.fleet.fail_terminate(0);

    // The graceful one completes once its backoff is over and EC2 answers again.
    let done = p
        .wait_for("the backed-off runner to be deleted", LIMIT, || async {
            p.reap_once().await?;
            Ok(p.store
                .get_runner(&graceful.name)
                .await?
                .filter(|r| r.status == InstanceStatus::Deleted))
        })
        .await?;
    let instance_id = done.instance_id.expect("instance");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Terminated)
    );
    assert_eq!(p.store.get_pool("linux-x64").await?.slots_used, 0);
    assert_eq!(p.sim.snapshot().counters.jobs_killed, 0);
    Ok(())
}

//! Record rules end to end: bootstrap timeout, stuck `deleting`, instance gone, missed
//! `completed`, a lost launch queued again, and a static runner kept through a 30-minute
//! job by graceful deletion.

use super::*;
use ephemera_core::model::{JobRecord, JobStatus};
use ephemera_core::ports::{Claim, Fleet, InstanceState, RunnerStore, Transition};
use ephemera_tests::pipeline::{PipelineOptions, LABELS};

fn by_hand() -> PipelineOptions {
    PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_left_by_a_crash_is_cleaned_after_the_bootstrap_timeout_in_one_run(
) -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand()).await?;
    let at = now();
    // A scaler claimed a job and died before launching anything.
    let job = JobRecord {
        job_id: 900_001,
        status: JobStatus::Queued,
        pool: POOL.to_owned(),
        owner: "octo-org".into(),
        repo: "app".into(),
        run_id: 1,
        installation_id: None,
        labels: LABELS.iter().map(|l| l.to_string()).collect(),
        runner_name: None,
        launched_runner: None,
        received_at: at,
        updated_at: at,
        github: Default::default(),
        claimed_at: None,
    };
    p.store.record_job(&job).await?;
    let name = ephemera_core::names::runner_name("eph", POOL);
    let mut runner = RunnerRecord::new(name.clone(), POOL.to_owned(), at);
    runner.owner = "octo-org".into();
    runner.job_id = Some(job.job_id);
    assert_eq!(
        p.store.claim_job(job.job_id, &runner, 10).await?,
        Claim::Claimed
    );

    let early = p.reap_at(at + minutes(19)).await?;
    assert_eq!(early.sent_to_delete, 0, "{early:?}");
    // That run resumed the stalled creation (its lease was long over): the next run
    // judges what the scaler made of it, so it waits for the scaler to finish.
    p.wait_for(
        "the scaler to resume the stalled creation",
        LIMIT,
        || async {
            let status = record(&p, &name).await?.status;
            let resumed = !matches!(
                status,
                InstanceStatus::PendingCreate | InstanceStatus::Creating
            );
            Ok(resumed.then_some(()))
        },
    )
    .await?;
    // Its host fails as its runner starts: GitHub shows the runner offline, and the
    // reaper never saw it online.
    let runner_id = record(&p, &name)
        .await?
        .github_runner_id
        .expect("the resumed creation registered the runner");
    p.wait_for("the runner to start on its host", LIMIT, || async {
        let online = p
            .sim
            .snapshot()
            .runners
            .get(&runner_id)
            .is_some_and(|r| r.status == "online");
        Ok(online.then_some(()))
    })
    .await?;
    p.sim.with_state(|s| {
        if let Some(runner) = s.runners.get_mut(&runner_id) {
            runner.status = "offline".to_owned();
        }
    });
    let report = p.reap_at(at + minutes(21)).await?;
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(record(&p, &name).await?.status, InstanceStatus::Deleted);
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_stuck_in_deleting_is_retried_and_finished_in_one_run() -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand()).await?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let runner = runner_in(&p, job_id, InstanceStatus::PendingDelete).await?;
    // A reaper took it to `deleting` and died.
    let at = now();
    let taken = Transition::new(InstanceStatus::PendingDelete, InstanceStatus::Deleting, at);
    p.store.transition(&runner.name, &taken).await?;

    let soon = p.reap_at(at + minutes(1)).await?;
    assert_eq!(soon.deleted, 0, "{soon:?}");
    let report = p.reap_at(at + minutes(6)).await?;
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    let instance_id = runner.instance_id.clone().expect("instance");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Terminated)
    );
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 0);
    Ok(())
}

/// A runner running a long job, with every webhook from now on lost.
async fn active_runner_without_webhooks(p: &Pipeline) -> anyhow::Result<(u64, RunnerRecord)> {
    let job_id = p
        .sim
        .create_job("octo-org", "app", &LABELS, Some(minutes(10)))
        .await?;
    let runner = p
        .wait_for("the runner to be active", LIMIT, || async {
            Ok(p.runner_for_job(job_id)
                .await?
                .filter(|r| r.runner_status == ephemera_core::lifecycle::RunnerStatus::Active))
        })
        .await?;
    lose_webhooks(p)?;
    Ok((job_id, runner))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_completed_and_lost_instance_each_converge_in_one_run() -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand()).await?;
    // Missed `completed`: the job ends on GitHub, the webhook is lost.
    let (job_id, finished) = active_runner_without_webhooks(&p).await?;
    p.sim.with_state(|s| {
        if let Some(job) = s.jobs.get_mut(&job_id) {
            job.ends_at = Some(tokio::time::Instant::now());
        }
    });
    p.wait_for("the job to end on GitHub", LIMIT, || async {
        Ok((p.sim.snapshot().jobs[&job_id].status == "completed").then_some(()))
    })
    .await?;
    let report = p.reap_at(now()).await?;
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(
        record(&p, &finished.name).await?.status,
        InstanceStatus::Deleted
    );

    // Instance gone under a `running` record (its webhooks lost too).
    p.sim.set_webhook_url(&p.webhook_url);
    let (killed_job, orphaned) = active_runner_without_webhooks(&p).await?;
    let instance_id = orphaned.instance_id.clone().expect("instance");
    p.fleet.inner().terminate(&instance_id).await?;
    // GitHub notices the runner's death (its job fails) before the reaper looks.
    p.wait_for("GitHub to see the runner die", LIMIT, || async {
        Ok((p.sim.snapshot().jobs[&killed_job].status == "completed").then_some(()))
    })
    .await?;
    let report = p.reap_at(now() + minutes(3)).await?;
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    let gone = record(&p, &orphaned.name).await?;
    assert_eq!(gone.status, InstanceStatus::Deleted);
    assert!(gone
        .history
        .iter()
        .any(|e| e.reason.as_deref() == Some("instance gone")));
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_launch_is_queued_again_after_one_run_and_the_job_runs() -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand()).await?;
    lose_webhooks(&p)?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    p.sim.set_webhook_url(&p.webhook_url);
    // The `queued` delivery was recorded, then its message was lost.
    let at = now();
    let job = JobRecord {
        job_id,
        status: JobStatus::Queued,
        pool: POOL.to_owned(),
        owner: "octo-org".into(),
        repo: "app".into(),
        run_id: p.sim.snapshot().jobs[&job_id].run_id,
        installation_id: None,
        labels: LABELS.iter().map(|l| l.to_string()).collect(),
        runner_name: None,
        launched_runner: None,
        received_at: at,
        updated_at: at,
        github: Default::default(),
        claimed_at: None,
    };
    p.store.record_job(&job).await?;
    let early = p.reap_at(at + minutes(1)).await?;
    assert_eq!(early.requeued, 0, "within the grace");
    let report = p.reap_at(at + minutes(4)).await?;
    assert_eq!(report.requeued, 1, "{report:?}");
    p.wait_for("the job to run to completion", LIMIT, || async {
        Ok((p.sim.snapshot().jobs[&job_id].status == "completed").then_some(()))
    })
    .await?;
    assert_eq!(p.sim.snapshot().counters.jobs_killed, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_runner_is_kept_through_a_30_minute_job_then_reaped() -> anyhow::Result<()> {
    let options = PipelineOptions {
        pool_extra: "    ephemeral: false\n".to_owned(),
        ..by_hand()
    };
    let p = Pipeline::start(options).await?;
    let job_id = p
        .sim
        .create_job("octo-org", "app", &LABELS, Some(minutes(30)))
        .await?;
    let runner = runner_in(&p, job_id, InstanceStatus::Running).await?;
    p.wait_for("the job to start", LIMIT, || async {
        Ok((p.sim.snapshot().jobs[&job_id].status == "in_progress").then_some(()))
    })
    .await?;
    let start = now();
    let ask = Transition::new(
        InstanceStatus::Running,
        InstanceStatus::PendingDelete,
        start,
    )
    .because("operator");
    p.store.transition(&runner.name, &ask).await?;
    let instance_id = runner.instance_id.clone().expect("instance");
    for minute in [0, 10, 20, 29] {
        let report = p.reap_at(start + minutes(minute)).await?;
        assert_eq!(report.busy, 1, "minute {minute}: {report:?}");
        assert_eq!(
            p.instance_state(&instance_id).await?,
            Some(InstanceState::Running)
        );
    }
    assert_eq!(
        p.fleet.terminate_calls(),
        0,
        "never asked to terminate while busy"
    );
    // Thirty simulated minutes on, the job ends.
    p.sim.with_state(|s| {
        if let Some(job) = s.jobs.get_mut(&job_id) {
            job.ends_at = Some(tokio::time::Instant::now());
        }
    });
    p.wait_for("the job to end", LIMIT, || async {
        Ok((p.sim.snapshot().jobs[&job_id].status == "completed").then_some(()))
    })
    .await?;
    let report = p.reap_at(start + minutes(31)).await?;
    assert_eq!(report.deleted, 1, "{report:?}");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Terminated)
    );
    let sim = p.sim.snapshot();
    assert_eq!(sim.jobs[&job_id].conclusion.as_deref(), Some("success"));
    assert_eq!(sim.counters.jobs_killed, 0);
    Ok(())
}

//! A runner that took another job unseen: GitHub gives the runner launched for one job
//! an older job instead, its `in_progress` and `completed` deliveries are lost, it
//! deregisters after that job, and its host hangs instead of powering off. Within 3
//! reaper runs its record is deleted, its instance terminated, and the job it was
//! launched for is queued again and runs on a runner of its own.

use super::*;
use ephemera_core::ports::{InstanceState, RunnerStore};
use ephemera_tests::pipeline::{PipelineOptions, LABELS};
use ephemera_tests::sim::SimFaults;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_took_another_job_unseen_is_reaped_and_its_own_job_runs_within_three_runs(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        // Long enough to lose the taken job's deliveries once the runner is registered.
        pickup_delay: Duration::from_secs(3),
        github_faults: SimFaults {
            hung_hosts: 1.0,
            ..SimFaults::default()
        },
        ..PipelineOptions::default()
    })
    .await?;
    // The older job's only `queued` delivery is lost: ephemera launches nothing for it.
    lose_webhooks(&p)?;
    let older = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    p.sim.set_webhook_url(&p.webhook_url);
    let own = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let stolen = runner_in(&p, own, InstanceStatus::Running).await?;
    let instance_id = stolen.instance_id.clone().expect("launched");

    // Every delivery is lost while the runner takes the older job, runs it and leaves.
    lose_webhooks(&p)?;
    p.wait_for(
        "the older job to run and its runner to leave",
        LIMIT,
        || async {
            let sim = p.sim.snapshot();
            let ran = sim.jobs[&older].status == "completed"
                && sim.jobs[&older].runner_name.as_deref() == Some(stolen.name.as_str());
            let left = sim.runners.values().all(|r| r.name != stolen.name);
            Ok((ran && left).then_some(()))
        },
    )
    .await?;
    assert_eq!(p.sim.snapshot().jobs[&own].status, "queued");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Running),
        "the host hung"
    );
    // Deliveries flow and hosts power off again, for the runner the own job gets next.
    p.sim.set_faults(SimFaults::default());
    p.sim.set_webhook_url(&p.webhook_url);

    let mut clock = now();
    let mut converged_in = None;
    for run in 1..=3 {
        clock += minutes(1);
        p.reap_at(clock).await?;
        let record = record(&p, &stolen.name).await?;
        let terminated = p.instance_state(&instance_id).await? == Some(InstanceState::Terminated);
        let requeued = p
            .store
            .get_job(own)
            .await?
            .and_then(|job| job.runner_name)
            .is_some_and(|name| name != stolen.name);
        if record.status == InstanceStatus::Deleted && terminated && requeued {
            converged_in = Some(run);
            break;
        }
    }
    let run = converged_in.ok_or_else(|| {
        anyhow::anyhow!(
            "not converged in 3 reaper runs: {:?}",
            p.sim.snapshot().jobs[&own]
        )
    })?;
    println!("a runner that took another job unseen: reaped in reaper run {run}");

    p.wait_for("the own job to run", LIMIT, || async {
        let job = p.sim.snapshot().jobs[&own].clone();
        Ok((job.status == "completed").then_some(job))
    })
    .await
    .map(|job| assert_eq!(job.conclusion.as_deref(), Some("success"), "{job:?}"))?;
    let sim = p.sim.snapshot();
    assert_eq!(sim.counters.jobs_killed, 0, "a busy runner was terminated");
    assert_eq!(sim.counters.runners_registered, 2);
    Ok(())
}

//! `creation_stalled`, `forgotten_by_github` and `job_follows_github` on the in-memory fakes: a stalled creation resumed or released, a runner
//! GitHub no longer knows released with its job queued again, and job items that follow
//! GitHub once their runner is gone — each made to happen, then shown to converge within
//! the stated number of runs.

use super::*;
use crate::handlers::scaler::Handled;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::lifecycle::RunnerStatus;
use crate::lifecycle::CREATE_LEASE;
use crate::message::MessageKind;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

async fn handle(world: &World, message: &QueueMessageOf) -> Handled {
    world
        .scaler()
        .handle(message, now())
        .await
        .expect("handled")
}

type QueueMessageOf = crate::message::QueueMessage;

async fn runner_for(world: &World, job: u64) -> RunnerRecord {
    let Handled::RunnerUp(name) = handle(world, &message(MessageKind::Queued, job, None)).await
    else {
        panic!("no runner for job {job}")
    };
    world.store.runner(&name).expect("record")
}

/// Runs the reaper once a minute from `from` minutes on, `runs` times; the queued
/// messages it sends are handled by the scaler between runs.
async fn run_minutes(world: &World, from: u64, runs: u64) {
    let reaper = world.reaper();
    for minute in from..from + runs {
        reaper
            .run(now() + minutes(minute), far())
            .await
            .expect("run");
        for sent in world.queue.take() {
            let _ = world.scaler().handle(&sent, now() + minutes(minute)).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_runner_that_took_another_job_unseen_is_released_and_its_job_runs() {
    let world = World::new(5);
    let a = runner_for(&world, 1).await;
    let a_id = a.github_runner_id.expect("registered");
    world.forge.set_online(a_id, true);
    run_minutes(&world, 1, 1).await;
    assert_eq!(
        world.store.runner(&a.name).map(|r| r.runner_status),
        Some(RunnerStatus::Idle)
    );
    // GitHub gives job 2 (never seen here) to A; A runs it and is removed; every
    // webhook about it is lost. Job 1 still waits on GitHub.
    world.forge.deregister(a_id);
    world.forge.set_job_state(1, ForgeJobState::Queued);
    world.forge.set_job_state(2, ForgeJobState::Completed);
    run_minutes(&world, 2, 3).await;
    let record = world.store.runner(&a.name).expect("record");
    assert_eq!(record.status, InstanceStatus::Deleted, "{record:?}");
    let instance = a.instance_id.as_deref().expect("instance");
    assert_eq!(
        world.fleet.instance(instance).map(|i| i.state),
        Some(InstanceState::Terminated)
    );
    let job = world.store.job(1).expect("job 1");
    let runner = job.runner_name.expect("job 1 has a new runner");
    assert_ne!(runner, a.name);
    assert_eq!(
        world.store.runner(&runner).map(|r| r.status),
        Some(InstanceStatus::Running)
    );
}

#[tokio::test(start_paused = true)]
async fn a_runner_gone_from_github_before_it_was_seen_online_is_released() {
    let world = World::new(5);
    let a = runner_for(&world, 1).await;
    world
        .forge
        .deregister(a.github_runner_id.expect("registered"));
    world.forge.set_job_state(1, ForgeJobState::Queued);
    run_minutes(&world, 1, 3).await;
    assert_eq!(
        world.store.runner(&a.name).map(|r| r.status),
        Some(InstanceStatus::Deleted)
    );
    let again = world.store.job(1).and_then(|j| j.runner_name);
    assert!(again.is_some_and(|name| name != a.name), "job 1 runs again");
}

#[tokio::test(start_paused = true)]
async fn a_runner_github_knows_is_kept() {
    let world = World::new(5);
    let a = runner_for(&world, 1).await;
    world
        .forge
        .set_online(a.github_runner_id.expect("registered"), true);
    world.forge.set_job_state(1, ForgeJobState::Queued);
    run_minutes(&world, 1, 8).await;
    let record = world.store.runner(&a.name).expect("record");
    assert_eq!(
        (record.status, record.runner_status),
        (InstanceStatus::Running, RunnerStatus::Idle)
    );
}

/// The scaler died right after writing the record for job 1; runner B (for job 2) then
/// took job 1, and job 2 was handed to the record left behind.
async fn job_handed_to_a_stalled_record(world: &World) -> (RunnerRecord, RunnerRecord) {
    let mut stalled = RunnerRecord::new("eph-linux-stalled".into(), POOL.into(), now());
    stalled.labels = world.config.pools[0].labels.clone();
    stalled.job_id = Some(1);
    world.store.put_runner(stalled.clone());
    world.store.set_slots_used(POOL, 1);
    let mut job_1 = crate::model::JobRecord {
        runner_name: Some(stalled.name.clone()),
        launched_runner: Some(stalled.name.clone()),
        ..crate::handlers::test_support::job(1)
    };
    job_1.status = JobStatus::Queued;
    world.store.put_job(job_1);
    let b = runner_for(world, 2).await;
    handle(world, &message(MessageKind::InProgress, 1, Some(&b.name))).await;
    (stalled, b)
}

#[tokio::test(start_paused = true)]
async fn a_job_handed_to_a_stalled_creation_runs_within_two_runs_past_the_lease() {
    let world = World::new(5);
    let (stalled, _) = job_handed_to_a_stalled_record(&world).await;
    assert_eq!(
        world.store.job(2).and_then(|j| j.runner_name),
        Some(stalled.name.clone())
    );
    // The message that would resume it at once is lost too.
    world.queue.take();
    let lease = CREATE_LEASE.as_secs() / 60;
    run_minutes(&world, lease, 2).await;
    let record = world.store.runner(&stalled.name).expect("record");
    assert_eq!(record.status, InstanceStatus::Running, "{record:?}");
    assert_eq!(record.job_id, Some(2));
    assert!(record.instance_id.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_stalled_creation_no_job_waits_for_is_released_one_run_past_the_lease() {
    let world = World::new(5);
    let mut stalled = RunnerRecord::new("eph-linux-stalled".into(), POOL.into(), now());
    stalled.job_id = Some(1);
    world.store.put_runner(stalled.clone());
    world.store.set_slots_used(POOL, 1);
    world.store.put_job(crate::model::JobRecord {
        status: JobStatus::InProgress,
        runner_name: Some("eph-linux-other".into()),
        launched_runner: Some("eph-linux-other".into()),
        ..crate::handlers::test_support::job(1)
    });
    let reaper = world.reaper();
    reaper.run(now() + CREATE_LEASE, far()).await.expect("run");
    let record = world.store.runner(&stalled.name).expect("record");
    assert_eq!(record.status, InstanceStatus::Deleted, "{record:?}");
    assert_eq!(world.store.slots_used(POOL), 0);
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_completed_was_missed_is_settled_with_its_runner() {
    let world = World::new(5);
    let a = runner_for(&world, 1).await;
    handle(&world, &message(MessageKind::InProgress, 1, Some(&a.name))).await;
    world.forge.set_job_state(1, ForgeJobState::Completed);
    run_minutes(&world, 1, 2).await;
    assert_eq!(
        world.store.runner(&a.name).map(|r| r.status),
        Some(InstanceStatus::Deleted)
    );
    assert_eq!(
        world.store.job(1).map(|j| j.status),
        Some(JobStatus::Completed)
    );
}

#[tokio::test(start_paused = true)]
async fn an_in_progress_job_whose_runner_is_gone_follows_github() {
    let world = World::new(5);
    world.store.put_job(crate::model::JobRecord {
        status: JobStatus::InProgress,
        runner_name: Some("eph-linux-reaped".into()),
        launched_runner: Some("eph-linux-reaped".into()),
        ..crate::handlers::test_support::job(1)
    });
    world.forge.set_job_state(1, ForgeJobState::InProgress);
    run_minutes(&world, 5, 1).await;
    assert_eq!(
        world.store.job(1).map(|j| j.status),
        Some(JobStatus::InProgress),
        "still running on GitHub"
    );
    world.forge.set_job_state(1, ForgeJobState::Completed);
    let report = world
        .reaper()
        .run(now() + minutes(6), far())
        .await
        .expect("run");
    assert_eq!(report.jobs_settled, 1);
    assert_eq!(
        world.store.job(1).map(|j| j.status),
        Some(JobStatus::Completed)
    );
}

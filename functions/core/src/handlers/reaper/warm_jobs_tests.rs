//! Warm runners and their jobs on the in-memory fakes: an ephemeral warm runner takes a
//! job and its spare becomes the warm one, a static one stays, and a runner busy with a
//! job never named is freed once GitHub shows it.

use super::warm_tests::{all_online, deliver, far, minutes, warm_records, warm_world};
use super::*;
use crate::handlers::scaler::Handled;
use crate::handlers::test_support::{config_with, message, now, World};
use crate::lifecycle::RunnerStatus;
use crate::message::MessageKind;

/// A warm runner `W` up and idle in a pool keeping one.
async fn one_warm_idle(world: &World, reaper: &Reaper) -> String {
    reaper.run(now(), far()).await.expect("run");
    deliver(world, now()).await;
    all_online(world);
    reaper.run(now() + minutes(1), far()).await.expect("run");
    let [warm] = warm_records(world).try_into().expect("one warm runner");
    assert_eq!(warm.runner_status, RunnerStatus::Idle);
    warm.name
}

#[tokio::test(start_paused = true)]
async fn ephemeral_warm_runner_takes_a_job_and_its_spare_becomes_the_warm_one() {
    let world = warm_world(5, 1, true);
    let reaper = world.reaper();
    let warm = one_warm_idle(&world, &reaper).await;
    let scaler = world.scaler();
    let Handled::RunnerUp(own) = scaler
        .handle(&message(MessageKind::Queued, 7, None), now() + minutes(2))
        .await
        .expect("up")
    else {
        panic!("no runner for job 7")
    };
    // GitHub gives the job to the warm runner, which was idle first.
    world.forge.set_job_state(7, ForgeJobState::InProgress);
    let bound = scaler
        .handle(
            &message(MessageKind::InProgress, 7, Some(&warm)),
            now() + minutes(2),
        )
        .await
        .expect("bound");
    assert_eq!(bound, Handled::Bound);
    all_online(&world);
    let report = reaper.run(now() + minutes(3), far()).await.expect("run");
    assert_eq!(
        report.warm_requested, 0,
        "the job's own runner is free now and counts as warm: {report:?}"
    );
    let spare = world.store.runner(&own).expect("record");
    assert_eq!(spare.runner_status, RunnerStatus::Idle);

    let later = reaper.run(now() + minutes(60), far()).await.expect("run");
    assert_eq!(
        world.store.runner(&own).map(|r| r.status),
        Some(InstanceStatus::Running),
        "ephemeral_idle spares it while the pool is at min_idle: {later:?}"
    );
    assert_eq!(later.warm_requested, 0);

    scaler
        .handle(
            &message(MessageKind::Completed, 7, Some(&warm)),
            now() + minutes(61),
        )
        .await
        .expect("completed");
    let after = reaper.run(now() + minutes(62), far()).await.expect("run");
    assert_eq!((after.deleted, after.warm_requested), (1, 0), "{after:?}");
    assert_eq!(
        world.fleet.launched(),
        2,
        "one warm runner and one for job 7"
    );
}

#[tokio::test(start_paused = true)]
async fn static_warm_runner_stays_after_its_job() {
    let world = warm_world(5, 1, false);
    let reaper = world.reaper();
    let warm = one_warm_idle(&world, &reaper).await;
    let scaler = world.scaler();
    world.forge.set_job_state(8, ForgeJobState::InProgress);
    for kind in [MessageKind::InProgress, MessageKind::Completed] {
        scaler
            .handle(&message(kind, 8, Some(&warm)), now() + minutes(2))
            .await
            .expect("handled");
    }
    let report = reaper.run(now() + minutes(60), far()).await.expect("run");
    assert_eq!(
        (report.sent_to_delete, report.warm_requested),
        (0, 0),
        "{report:?}"
    );
    let kept = world.store.runner(&warm).expect("record");
    assert_eq!(
        (kept.status, kept.runner_status),
        (InstanceStatus::Running, RunnerStatus::Idle)
    );
}

#[tokio::test(start_paused = true)]
async fn pool_without_warm_owner_launches_nothing() {
    let world = World {
        config: config_with(5, "    min_idle: 2\n"),
        ..World::new(5)
    };
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(report.warm_requested, 0);
    assert!(world.store.runners().is_empty());
}

/// A warm runner GitHub shows busy when it first comes online, its job's `in_progress`
/// and `completed` never delivered: the reaper records it `active` with no job.
async fn warm_busy_unseen(world: &World, reaper: &Reaper) -> RunnerRecord {
    reaper.run(now(), far()).await.expect("run");
    deliver(world, now()).await;
    for runner in world.forge.runners() {
        world.forge.set_online(runner.id, true);
        world.forge.set_busy(runner.id, true);
    }
    reaper.run(now() + minutes(1), far()).await.expect("run");
    let [warm] = warm_records(world).try_into().expect("one warm runner");
    assert_eq!(
        (warm.runner_status, warm.job_id),
        (RunnerStatus::Active, None)
    );
    warm
}

#[tokio::test(start_paused = true)]
async fn static_runner_busy_with_a_job_never_named_is_idle_again_once_github_shows_it_free() {
    let world = warm_world(5, 1, false);
    let reaper = world.reaper();
    let warm = warm_busy_unseen(&world, &reaper).await;
    let runner_id = warm.github_runner_id.expect("registered");
    // Still busy: looked at, and left active until the next look.
    reaper.run(now() + minutes(2), far()).await.expect("run");
    let looked = world.store.runner(&warm.name).expect("record");
    assert_eq!(looked.runner_status, RunnerStatus::Active);
    // The job ends; no webhook says so.
    world.forge.set_busy(runner_id, false);
    let at = looked.next_attempt_at;
    reaper.run(at, far()).await.expect("run");
    let idle = world.store.runner(&warm.name).expect("record");
    assert_eq!(
        (idle.status, idle.runner_status),
        (InstanceStatus::Running, RunnerStatus::Idle),
        "{idle:?}"
    );
    // Kept as the pool's warm runner: nothing else launched or deleted.
    let report = reaper.run(at + minutes(1), far()).await.expect("run");
    assert_eq!(
        (report.sent_to_delete, report.warm_requested),
        (0, 0),
        "{report:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn ephemeral_runner_busy_with_a_job_never_named_is_released_once_github_removes_it() {
    let world = warm_world(5, 1, true);
    let reaper = world.reaper();
    let warm = warm_busy_unseen(&world, &reaper).await;
    let runner_id = warm.github_runner_id.expect("registered");
    // The job ends and GitHub removes the ephemeral runner; no webhook says so.
    world.forge.deregister(runner_id);
    let at = now() + minutes(1) + JOB_CHECK_INTERVAL;
    reaper.run(at, far()).await.expect("run");
    let gone = world.store.runner(&warm.name).expect("record");
    assert!(
        matches!(
            gone.status,
            InstanceStatus::PendingDelete | InstanceStatus::Deleting | InstanceStatus::Deleted
        ),
        "{gone:?}"
    );
}

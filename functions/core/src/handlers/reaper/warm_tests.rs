//! The warm pool on the in-memory fakes: the reaper reserves what a pool lacks of its
//! `min_idle` and the scaler creates it; never above `max_runners`, never twice, and
//! converging after a crash at any step.

use super::*;
use crate::handlers::scaler::{BatchItem, Handled};
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::lifecycle::RunnerStatus;
use crate::memory::StoreOp;
use crate::message::MessageKind;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

/// A world whose pool keeps `min_idle` warm runners, registered on `octo-org`.
fn warm_world(max_runners: u32, min_idle: u32, ephemeral: bool) -> World {
    let extra =
        format!("    min_idle: {min_idle}\n    warm_owner: octo-org\n    ephemeral: {ephemeral}\n");
    World {
        config: config_with(max_runners, &extra),
        ..World::new(max_runners)
    }
}

/// Plays SQS: hands every message sent so far to the scaler, as one batch at `at`;
/// returns the ids of the messages that failed.
async fn deliver(world: &World, at: OffsetDateTime) -> Vec<String> {
    let items = world
        .queue
        .take()
        .into_iter()
        .enumerate()
        .map(|(i, m)| BatchItem {
            message_id: format!("m-{i}"),
            body: m.encode(),
        })
        .collect();
    world.scaler().handle_batch(items, at).await
}

/// The pool's job-less records, in any live status.
fn warm_records(world: &World) -> Vec<RunnerRecord> {
    world
        .store
        .runners()
        .into_iter()
        .filter(|r| r.job_id.is_none() && r.status.is_live())
        .collect()
}

/// Brings every registered runner online, as their agents would.
fn all_online(world: &World) {
    for runner in world.forge.runners() {
        world.forge.set_online(runner.id, true);
    }
}

#[tokio::test(start_paused = true)]
async fn warm_pool_is_filled_from_zero_to_min_idle() {
    let world = warm_world(5, 2, true);
    let reaper = world.reaper();
    let report = reaper.run(now(), far()).await.expect("run");
    assert_eq!(report.warm_requested, 2, "{report:?}");
    assert_eq!(world.store.slots_used(POOL), 2, "each took a slot");
    let sent = world.queue.sent();
    assert!(sent.iter().all(|m| m.kind == MessageKind::Warm), "{sent:?}");
    let reserved = warm_records(&world);
    assert!(reserved
        .iter()
        .all(|r| r.status == InstanceStatus::PendingCreate && r.owner == "octo-org"));

    assert!(
        deliver(&world, now()).await.is_empty(),
        "scaler created them"
    );
    assert_eq!(world.fleet.launched(), 2);
    let created = warm_records(&world);
    assert!(created
        .iter()
        .all(|r| r.status == InstanceStatus::Running && r.instance_id.is_some()));
    assert_eq!(world.forge.runners().len(), 2, "both registered");
    assert_eq!(
        world.jit_store.instance_ids().len(),
        2,
        "JIT configs delivered"
    );

    all_online(&world);
    let report = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!((report.came_online, report.warm_requested), (2, 0));
    let idle = warm_records(&world);
    assert!(idle.iter().all(|r| r.runner_status == RunnerStatus::Idle));

    let later = reaper.run(now() + minutes(60), far()).await.expect("run");
    assert_eq!(
        (later.sent_to_delete, later.warm_requested),
        (0, 0),
        "warm runners are kept past idle_timeout: {later:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn warm_launch_never_exceeds_max_runners_when_the_pool_is_nearly_full() {
    let world = warm_world(3, 3, true);
    let scaler = world.scaler();
    for job in [1, 2] {
        let handled = scaler
            .handle(&message(MessageKind::Queued, job, None), now())
            .await
            .expect("up");
        assert!(matches!(handled, Handled::RunnerUp(_)));
    }
    assert_eq!(world.store.slots_used(POOL), 2);
    let reaper = world.reaper();
    let report = reaper.run(now(), far()).await.expect("run");
    assert_eq!(
        report.warm_requested, 1,
        "only one slot was free: {report:?}"
    );
    assert_eq!(world.store.slots_used(POOL), 3);
    let again = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(again.warm_requested, 0);
    assert_eq!(world.store.slots_used(POOL), 3, "never above max_runners");
}

#[tokio::test(start_paused = true)]
async fn no_second_launch_while_the_first_are_still_on_their_way() {
    let world = warm_world(5, 2, true);
    let reaper = world.reaper();
    assert_eq!(
        reaper.run(now(), far()).await.expect("run").warm_requested,
        2
    );
    // Still queued for the scaler (pending_create).
    let queued = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(queued.warm_requested, 0, "{queued:?}");
    // Created, but not online yet (running, pending).
    deliver(&world, now() + minutes(1)).await;
    let booting = reaper.run(now() + minutes(2), far()).await.expect("run");
    assert_eq!(booting.warm_requested, 0, "{booting:?}");
    assert_eq!(world.store.slots_used(POOL), 2);
    assert_eq!(world.fleet.launched(), 2);
}

#[tokio::test(start_paused = true)]
async fn lost_warm_message_converges_after_the_stall_timeout() {
    let world = warm_world(5, 2, true);
    let reaper = world.reaper();
    assert_eq!(
        reaper.run(now(), far()).await.expect("run").warm_requested,
        2
    );
    world.queue.take(); // the messages are lost: the records alone remain
    let waiting = reaper.run(now() + minutes(5), far()).await.expect("run");
    assert_eq!(waiting.warm_requested, 0, "still taken as on their way");
    let stalled = reaper.run(now() + WARM_STALL, far()).await.expect("run");
    assert_eq!(
        (
            stalled.sent_to_delete,
            stalled.deleted,
            stalled.warm_requested
        ),
        (2, 2, 2),
        "stalled ones cleaned and replaced in one run: {stalled:?}"
    );
    assert_eq!(
        world.store.slots_used(POOL),
        2,
        "the old slots were given back"
    );
    assert!(deliver(&world, now() + WARM_STALL).await.is_empty());
    assert_eq!(world.fleet.launched(), 2);
}

#[tokio::test(start_paused = true)]
async fn scaler_crash_after_the_launch_leaves_nothing_behind() {
    let world = warm_world(5, 1, true);
    let reaper = world.reaper();
    assert_eq!(
        reaper.run(now(), far()).await.expect("run").warm_requested,
        1
    );
    // The instance comes up, then registration fails and the delivery is never retried.
    world.forge.fail_next(1);
    assert_eq!(deliver(&world, now()).await.len(), 1, "the delivery failed");
    let [crashed] = warm_records(&world).try_into().expect("one record");
    assert_eq!(crashed.status, InstanceStatus::Creating);
    let instance_id = crashed.instance_id.clone().expect("instance recorded");

    let report = reaper.run(now() + WARM_STALL, far()).await.expect("run");
    assert_eq!(
        (report.deleted, report.warm_requested),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(
        world.fleet.instance(&instance_id).map(|i| i.state),
        Some(InstanceState::Terminated)
    );
    assert_eq!(world.store.slots_used(POOL), 1, "only the replacement");
}

#[tokio::test(start_paused = true)]
async fn reservation_is_withdrawn_when_its_message_cannot_be_sent() {
    let world = warm_world(5, 1, true);
    world.queue.fail_sends(true);
    let reaper = world.reaper();
    let report = reaper.run(now(), far()).await.expect("run");
    assert_eq!(report.warm_requested, 0);
    let [withdrawn] = world.store.runners().try_into().expect("one record");
    assert_eq!(withdrawn.status, InstanceStatus::PendingDelete);
    world.queue.fail_sends(false);
    let next = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!((next.deleted, next.warm_requested), (1, 1), "{next:?}");
    assert_eq!(world.store.slots_used(POOL), 1);
}

#[tokio::test(start_paused = true)]
async fn full_store_failure_on_reserve_is_retried_next_run() {
    let world = warm_world(5, 1, true);
    world.store.fail(StoreOp::ReserveRunner, 1);
    let reaper = world.reaper();
    assert_eq!(
        reaper.run(now(), far()).await.expect("run").warm_requested,
        0
    );
    assert_eq!(world.store.slots_used(POOL), 0, "nothing written");
    let next = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(next.warm_requested, 1);
}

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

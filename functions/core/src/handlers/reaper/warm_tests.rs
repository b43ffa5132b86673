//! The warm pool on the in-memory fakes: the reaper reserves what a pool lacks of its
//! `min_idle` and the scaler creates it; never above `max_runners`, never twice, and
//! converging after a crash at any step.

use super::*;
use crate::handlers::scaler::{BatchItem, Handled};
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::lifecycle::RunnerStatus;
use crate::memory::StoreOp;
use crate::message::MessageKind;

pub(super) fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

pub(super) fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

/// A world whose pool keeps `min_idle` warm runners, registered on `octo-org`.
pub(super) fn warm_world(max_runners: u32, min_idle: u32, ephemeral: bool) -> World {
    let extra =
        format!("    min_idle: {min_idle}\n    warm_owner: octo-org\n    ephemeral: {ephemeral}\n");
    World {
        config: config_with(max_runners, &extra),
        ..World::new(max_runners)
    }
}

/// Plays SQS: hands every message sent so far to the scaler, as one batch at `at`;
/// returns the ids of the messages that failed.
pub(super) async fn deliver(world: &World, at: OffsetDateTime) -> Vec<String> {
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
pub(super) fn warm_records(world: &World) -> Vec<RunnerRecord> {
    world
        .store
        .runners()
        .into_iter()
        .filter(|r| r.job_id.is_none() && r.status.is_live())
        .collect()
}

/// Brings every registered runner online, as their agents would.
pub(super) fn all_online(world: &World) {
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

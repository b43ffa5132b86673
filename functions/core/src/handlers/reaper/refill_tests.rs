//! The stopped pool's refill on the in-memory fakes: the reaper reserves what a pool
//! lacks of its `stopped`, the scaler launches each on-demand, sets it to stop and writes
//! its `prepare` item (no config, no registration), the host powers off, the reaper sets
//! it back to terminate and records it `stopped`; a job takes one and the slot is refilled.

use super::warm_tests::{deliver, far, minutes};
use super::*;
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::message::MessageKind;
use crate::model::Market;

/// A spot pool that keeps `stopped` instances (and `min_idle` warm runners), registered
/// on `octo-org`.
fn stopped_world(max_runners: u32, stopped: u32, min_idle: u32) -> World {
    let extra = format!(
        "    stopped: {stopped}\n    min_idle: {min_idle}\n    warm_owner: octo-org\n    spot: true\n"
    );
    World {
        config: config_with(max_runners, &extra),
        ..World::new(max_runners)
    }
}

fn prepared(world: &World) -> Vec<RunnerRecord> {
    let live = world.store.runners().into_iter();
    live.filter(|r| r.prepare && r.status.is_live()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_stopped_pool_is_prepared_stopped_taken_and_refilled() {
    let world = stopped_world(5, 2, 0);
    let reaper = world.reaper();
    let report = reaper.run(now(), far()).await.expect("run");
    assert_eq!((report.stopped_requested, report.warm_requested), (2, 0));
    assert_eq!(world.store.slots_used(POOL), 2, "each took a slot");
    assert!(prepared(&world)
        .iter()
        .all(|r| r.status == InstanceStatus::PendingCreate && r.job_id.is_none()));

    assert!(
        deliver(&world, now()).await.is_empty(),
        "scaler launched them"
    );
    let requests = world.fleet.launch_requests();
    assert!(
        requests.iter().all(|r| r.market == Market::OnDemand),
        "on-demand even in a spot pool: {requests:?}"
    );
    assert_eq!(world.fleet.launched(), 2);
    let preparing = prepared(&world);
    assert_eq!(preparing.len(), 2);
    for record in &preparing {
        assert_eq!(record.status, InstanceStatus::Preparing, "{record:?}");
        let id = record.instance_id.as_deref().expect("instance");
        assert_eq!(world.fleet.shutdown_behaviour(id), ShutdownBehaviour::Stop);
        assert!(world.jit_store.prepared(id), "prepare item written");
    }
    assert!(
        world.jit_store.instance_ids().is_empty(),
        "no JIT config anywhere"
    );
    assert!(world.forge.runners().is_empty(), "nothing registered");

    let again = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(again.stopped_requested, 0, "on their way: {again:?}");

    for record in &preparing {
        world
            .fleet
            .power_off(record.instance_id.as_deref().expect("instance"));
    }
    reaper.run(now() + minutes(2), far()).await.expect("run");
    for record in prepared(&world) {
        assert_eq!(record.status, InstanceStatus::Stopped, "{record:?}");
        let id = record.instance_id.as_deref().expect("instance");
        assert_eq!(
            world.fleet.shutdown_behaviour(id),
            ShutdownBehaviour::Terminate,
            "set back once stopped"
        );
    }

    let at = now() + minutes(3);
    let taken = world
        .scaler()
        .handle(&message(MessageKind::Queued, 1, None), at)
        .await;
    assert!(
        matches!(taken, Ok(crate::handlers::scaler::Handled::RunnerUp(_))),
        "{taken:?}"
    );
    assert_eq!(world.fleet.launched(), 2, "started, not launched");
    assert_eq!(world.fleet.start_calls(), 1);

    let refill = reaper.run(at + minutes(1), far()).await.expect("run");
    assert_eq!(
        refill.stopped_requested, 1,
        "the take is refilled: {refill:?}"
    );
    assert!(deliver(&world, at + minutes(1)).await.is_empty());
    assert_eq!(world.fleet.launched(), 3);
}

#[tokio::test(start_paused = true)]
async fn stopped_and_warm_supplies_are_counted_apart_within_max_runners() {
    let world = stopped_world(3, 2, 1);
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(
        (report.warm_requested, report.stopped_requested),
        (1, 2),
        "{report:?}"
    );
    assert!(deliver(&world, now()).await.is_empty());
    let later = world
        .reaper()
        .run(now() + minutes(1), far())
        .await
        .expect("run");
    assert_eq!((later.warm_requested, later.stopped_requested), (0, 0));
    assert_eq!(world.store.slots_used(POOL), 3, "never above max_runners");
}

#[tokio::test(start_paused = true)]
async fn no_prepare_item_is_written_before_the_stop_behaviour_is_set() {
    let world = stopped_world(5, 1, 0);
    world.reaper().run(now(), far()).await.expect("run");
    world.fleet.fail_shutdown_changes(1);
    let failed = deliver(&world, now()).await;
    assert_eq!(failed.len(), 1, "the message is retried");
    let record = prepared(&world).pop().expect("record");
    let id = record.instance_id.clone().expect("launched");
    assert!(!world.jit_store.prepared(&id), "no prepare item yet");
    assert_eq!(
        world.fleet.shutdown_behaviour(&id),
        ShutdownBehaviour::Terminate
    );
    assert_eq!(record.status, InstanceStatus::Creating);
    // The retry, past the creation lease, resumes it without a second launch.
    let retry = message(MessageKind::Warm, 0, Some(&record.name));
    let at = now() + minutes(10);
    world.scaler().handle(&retry, at).await.expect("retried");
    let record = world.store.runner(&record.name).expect("record");
    assert_eq!(record.status, InstanceStatus::Preparing, "{record:?}");
    assert!(world.jit_store.prepared(&id));
    assert_eq!(world.fleet.launched(), 1, "one launch");
}

#[tokio::test(start_paused = true)]
async fn a_failed_reset_to_terminate_keeps_the_record_preparing_until_a_later_run() {
    let world = stopped_world(5, 1, 0);
    let reaper = world.reaper();
    reaper.run(now(), far()).await.expect("run");
    assert!(deliver(&world, now()).await.is_empty());
    let record = prepared(&world).pop().expect("record");
    let id = record.instance_id.clone().expect("instance");
    world.fleet.power_off(&id);
    world.fleet.fail_shutdown_changes(1);
    reaper.run(now() + minutes(1), far()).await.expect("run");
    let held = world.store.runner(&record.name).expect("record");
    assert_eq!(
        held.status,
        InstanceStatus::Preparing,
        "never taken while it would stop"
    );
    reaper.run(now() + minutes(2), far()).await.expect("run");
    let ready = world.store.runner(&record.name).expect("record");
    assert_eq!(ready.status, InstanceStatus::Stopped);
    assert_eq!(
        world.fleet.shutdown_behaviour(&id),
        ShutdownBehaviour::Terminate
    );
}

#[tokio::test(start_paused = true)]
async fn a_bake_replaces_the_stopped_instances_with_ones_of_the_new_image() {
    let world = stopped_world(5, 2, 0);
    let reaper = world.reaper();
    reaper.run(now(), far()).await.expect("run");
    assert!(deliver(&world, now()).await.is_empty());
    for record in prepared(&world) {
        world
            .fleet
            .power_off(record.instance_id.as_deref().expect("instance"));
    }
    reaper.run(now() + minutes(1), far()).await.expect("run");
    let before: Vec<String> = prepared(&world).into_iter().map(|r| r.name).collect();
    assert_eq!(before.len(), 2);

    let quiet = reaper.run(now() + minutes(2), far()).await.expect("run");
    assert_eq!(quiet.sent_to_delete, 0, "same image: kept {quiet:?}");

    world.fleet.set_template_image("ami-0000000000000002b");
    let at = now() + minutes(3);
    let replaced = reaper.run(at, far()).await.expect("run");
    assert_eq!(replaced.sent_to_delete, 2, "{replaced:?}");
    assert_eq!(replaced.stopped_requested, 2, "refilled at once");
    for name in &before {
        let record = world.store.runner(name).expect("kept");
        assert!(!record.status.is_live(), "{record:?}");
        let id = record.instance_id.as_deref().expect("instance");
        let instance = world.fleet.instance(id).expect("described");
        assert_eq!(instance.state, InstanceState::Terminated, "{name}");
    }
    assert!(deliver(&world, at).await.is_empty());
    for record in prepared(&world) {
        let id = record.instance_id.as_deref().expect("instance");
        let image = world.fleet.instance(id).and_then(|i| i.image_id);
        assert_eq!(
            image.as_deref(),
            Some("ami-0000000000000002b"),
            "{record:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_stopped_instance_is_priced_its_volume_while_it_waited_and_its_compute_after() {
    use crate::memory::{FakePriceList, MemoryPriceBook, FAKE_ROOT_GIB};
    let world = stopped_world(5, 1, 0);
    let list = std::sync::Arc::new(FakePriceList::new("us-east-1"));
    list.offer("m7i.large", Market::OnDemand, 100_800);
    list.offer_volume("gp3", 80_000);
    let book = std::sync::Arc::new(MemoryPriceBook::new());
    let reaper = world.reaper().with_pricing(book.clone(), list.clone());
    reaper.run(now(), far()).await.expect("run");
    assert!(deliver(&world, now()).await.is_empty());
    let record = prepared(&world).pop().expect("one");
    assert_eq!(record.root_volume_gib, Some(FAKE_ROOT_GIB), "{record:?}");
    assert_eq!(record.root_volume_type.as_deref(), Some("gp3"));
    world
        .fleet
        .power_off(record.instance_id.as_deref().expect("instance"));
    let stopped_at = now() + minutes(1);
    reaper.run(stopped_at, far()).await.expect("run");
    assert!(
        list.reads().iter().any(|(key, _)| key == "ebs:gp3"),
        "the volume's price read: {:?}",
        list.reads()
    );

    let taken_at = stopped_at + minutes(600);
    let scaler = world.scaler();
    let taken = scaler
        .handle(&message(MessageKind::Queued, 7, None), taken_at)
        .await;
    let Ok(crate::handlers::scaler::Handled::RunnerUp(name)) = taken else {
        panic!("{taken:?}")
    };
    assert_eq!(name, record.name, "the stopped one took it");
    let done_at = taken_at + minutes(30);
    scaler
        .handle(&message(MessageKind::Completed, 7, Some(&name)), done_at)
        .await
        .expect("completed");
    reaper.run(done_at, far()).await.expect("run");
    let cost = world
        .store
        .runner(&name)
        .and_then(|r| r.cost)
        .expect("priced at its deletion");
    assert_eq!(cost.stopped_seconds, 600 * 60, "{cost:?}");
    let volume = crate::prices::volume_micros(FAKE_ROOT_GIB, 600 * 60, 80_000);
    assert_eq!(cost.volume_usd_micros, Some(volume));
    assert_eq!(cost.seconds, 31 * 60, "compute: preparing and running only");
    assert_eq!(
        cost.usd_micros,
        Some(crate::prices::cost_micros(31 * 60, 100_800) + volume)
    );
}

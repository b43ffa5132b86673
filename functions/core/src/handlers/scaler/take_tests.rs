//! Take: a queued job takes a stopped instance of its pool with one conditional write and
//! starts it, never two jobs one instance, and a refused start launches instead.

use super::testing::*;
use super::*;
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::lifecycle::InstanceStatus;
use crate::memory::FleetFailure;
use crate::message::MessageKind;
use crate::model::RunnerRecord;
use crate::ports::{Instance, InstanceState};

/// A stopped pool's instance, prepared and stopped, holding a slot.
fn stopped(world: &World, name: &str, instance_id: &str) {
    let mut record = RunnerRecord::new(name.to_owned(), POOL.to_owned(), now());
    record.status = InstanceStatus::Stopped;
    record.instance_id = Some(instance_id.to_owned());
    world.store.put_runner(record);
    let slots = world.store.slots_used(POOL);
    world.store.set_slots_used(POOL, slots + 1);
    world.fleet.put_instance(Instance {
        id: instance_id.to_owned(),
        state: InstanceState::Stopped,
        pool: Some(POOL.to_owned()),
        launched_at: Some(now()),
        image_id: None,
    });
}

fn stopped_world(stopped_count: u32) -> World {
    let mut world = World::new(5);
    world.config = config_with(5, &format!("    stopped: {stopped_count}\n"));
    world
}

#[tokio::test]
async fn a_queued_job_takes_a_stopped_instance_and_starts_it_instead_of_launching() {
    let world = stopped_world(1);
    stopped(&world, "eph-linux-stopped1", "i-stopped1");
    let name = up(&world, 1).await;
    assert_eq!(name, "eph-linux-stopped1");
    assert_eq!(world.fleet.launch_calls(), 0, "no launch");
    assert_eq!(world.fleet.start_calls(), 1);
    assert_eq!(
        world.fleet.instance("i-stopped1").map(|i| i.state),
        Some(InstanceState::Pending)
    );
    let runner = world.store.runner(&name).expect("record");
    assert_eq!(runner.status, InstanceStatus::Running);
    assert_eq!(runner.job_id, Some(1));
    assert!(runner.github_runner_id.is_some(), "registered");
    assert!(
        world.jit_store.get("i-stopped1").is_some(),
        "JIT config stored for it"
    );
    let job = world.store.job(1).expect("job");
    assert_eq!(job.runner_name.as_deref(), Some(name.as_str()));
    assert_eq!(
        world.store.slots_used(POOL),
        1,
        "the take takes no new slot"
    );
}

#[tokio::test]
async fn two_jobs_never_take_one_stopped_instance() {
    let world = stopped_world(1);
    stopped(&world, "eph-linux-stopped1", "i-stopped1");
    let failed = world.scaler().handle_batch(batch(1..=2), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(world.fleet.start_calls(), 1, "started once");
    assert_eq!(world.fleet.launch_calls(), 1, "the other job launched");
    let on_stopped: Vec<_> = world
        .store
        .jobs()
        .into_iter()
        .filter(|j| j.runner_name.as_deref() == Some("eph-linux-stopped1"))
        .collect();
    assert_eq!(on_stopped.len(), 1, "{on_stopped:?}");
}

#[tokio::test]
async fn a_refused_start_launches_for_the_job_and_replaces_the_instance() {
    let world = stopped_world(1);
    stopped(&world, "eph-linux-stopped1", "i-stopped1");
    world
        .fleet
        .fail_start_with(Some(FleetFailure::CapacityUnavailable));
    let name = up(&world, 1).await;
    assert_ne!(name, "eph-linux-stopped1", "a launched runner");
    assert_eq!(world.fleet.launch_calls(), 1);
    let taken = world.store.runner("eph-linux-stopped1").expect("record");
    assert_eq!(taken.status, InstanceStatus::PendingDelete);
    let job = world.store.job(1).expect("job");
    assert_eq!(job.runner_name.as_deref(), Some(name.as_str()));
}

/// Chaos seed 164: `max_runners: 1, stopped: 1`, the one slot held by the stopped
/// instance; the batch saw the pool full and deferred the job without trying the take, so
/// it waited for ever next to the instance kept for it.
#[tokio::test]
async fn a_job_of_a_pool_full_of_stopped_instances_takes_one() {
    let mut world = World::new(1);
    world.config = config_with(1, "    stopped: 1\n");
    stopped(&world, "eph-linux-stopped1", "i-stopped1");
    assert_eq!(world.store.slots_used(POOL), 1, "the pool is full");
    let failed = world.scaler().handle_batch(batch(1..=1), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        world.fleet.start_calls(),
        1,
        "the job took the stopped instance"
    );
    let job = world.store.job(1).expect("job");
    assert_eq!(job.runner_name.as_deref(), Some("eph-linux-stopped1"));
    assert_eq!(world.fleet.launch_calls(), 0);
}

/// Chaos seed 26: a sized job took a stopped instance, whose runner (the pool's labels,
/// the pool's shape) GitHub never gave it; it went idle, was reaped, and the job took the
/// next one, for ever. A sized job launches its own shape.
#[tokio::test]
async fn a_sized_job_launches_its_shape_instead_of_taking_a_stopped_instance() {
    let mut world = World::new(5);
    world.config = config_with(
        5,
        "    stopped: 1\n    sizing: { accept: true, max_vcpus_per_runner: 16 }\n",
    );
    stopped(&world, "eph-linux-stopped1", "i-stopped1");
    let mut queued = message(MessageKind::Queued, 1, None);
    queued.labels.push("ephemera.cpu=8".to_owned());
    let handled = world.scaler().handle(&queued, now()).await;
    assert!(matches!(handled, Ok(Handled::RunnerUp(_))), "{handled:?}");
    assert_eq!(
        world.fleet.start_calls(),
        0,
        "the stopped instance is not taken"
    );
    assert_eq!(world.fleet.launch_calls(), 1, "the job's shape is launched");
    let kept = world.store.runner("eph-linux-stopped1").expect("record");
    assert_eq!(kept.status, InstanceStatus::Stopped);
    // An unsized job of the same pool still takes it.
    assert_eq!(up(&world, 2).await, "eph-linux-stopped1");
}

#[tokio::test]
async fn a_pool_without_stopped_never_looks_for_one() {
    let world = World::new(5);
    stopped(&world, "eph-linux-stopped1", "i-stopped1");
    up(&world, 1).await;
    assert_eq!(world.fleet.start_calls(), 0);
    assert_eq!(world.fleet.launch_calls(), 1);
}

#[tokio::test]
async fn a_take_whose_delivery_died_is_started_by_the_next_after_its_lease() {
    let world = stopped_world(1);
    stopped(&world, "eph-linux-stopped1", "i-stopped1");
    world.store.put_job(crate::handlers::test_support::job(1));
    assert!(world
        .store
        .take_stopped(1, "eph-linux-stopped1", now())
        .await
        .expect("take"));
    let later = now() + crate::lifecycle::CREATE_LEASE + std::time::Duration::from_secs(1);
    let handled = world
        .scaler()
        .handle(&message(MessageKind::Queued, 1, None), later)
        .await;
    assert!(
        matches!(&handled, Ok(Handled::RunnerUp(name)) if name == "eph-linux-stopped1"),
        "{handled:?}"
    );
    assert_eq!(world.fleet.start_calls(), 1);
    assert_eq!(world.fleet.launch_calls(), 0);
}

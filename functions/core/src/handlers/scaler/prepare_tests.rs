//! Prepare: a job the table or GitHub knows is past `queued` gets nothing, and a runner
//! record in creation is resumed once, whichever delivery resumes it.

use super::testing::*;
use super::*;
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::lifecycle::{InstanceStatus, CREATE_LEASE};
use crate::message::MessageKind;
use crate::model::JobStatus;

#[tokio::test]
async fn queued_arriving_after_completed_launches_nothing() {
    let world = World::new(5);
    let scaler = world.scaler();
    scaler
        .handle(&message(MessageKind::Completed, 11, None), now())
        .await
        .expect("handled");
    let handled = scaler
        .handle(&message(MessageKind::Queued, 11, None), now())
        .await
        .expect("handled");
    assert_eq!(handled, Handled::NothingToDo);
    assert_eq!(world.fleet.launch_calls(), 0);
}

#[tokio::test]
async fn a_job_queued_again_for_its_taken_runner_gets_none_if_github_gave_it_one() {
    let world = World::new(5);
    let scaler = world.scaler();
    let (_runner_a, sent) = a_takes_job_2_without_a_runner(&world, &scaler).await;
    // Another runner took job 1 meanwhile; its webhooks have not come yet.
    world.forge.set_job_state(1, ForgeJobState::InProgress);
    let handled = scaler.handle(&sent, now()).await.expect("handled");
    assert_eq!(handled, Handled::NothingToDo);
    assert_eq!(world.store.runners().len(), 1, "no runner added");
    assert_eq!(
        world.store.job(1).map(|j| j.status),
        Some(JobStatus::InProgress)
    );
}

#[tokio::test]
async fn queued_check_launches_nothing_for_a_job_github_has_moved_on() {
    let world = World {
        config: config_with(5, "    check_queued: true\n"),
        ..World::new(5)
    };
    world.forge.set_job_state(1, ForgeJobState::Completed);
    world.forge.set_job_state(2, ForgeJobState::Queued);
    let scaler = world.scaler();
    let first = scaler
        .handle(&message(MessageKind::Queued, 1, None), now())
        .await;
    assert_eq!(first.ok(), Some(Handled::NothingToDo));
    assert_eq!(
        world.store.job(1).map(|j| j.status),
        Some(JobStatus::Completed)
    );
    assert_eq!(world.fleet.launched(), 0);
    up(&world, 2).await;
    assert_eq!(world.fleet.launched(), 1);
    assert_eq!(world.forge.calls().job_state, 2);
}

#[tokio::test]
async fn without_the_queued_check_github_is_not_asked() {
    let world = World::new(5);
    up(&world, 1).await;
    assert_eq!(world.forge.calls().job_state, 0);
}

#[tokio::test]
async fn two_deliveries_resuming_one_runner_at_once_launch_once() {
    let world = World::new(5);
    let scaler = world.scaler();
    // The first delivery launches, then cannot record the instance: the record stays
    // `creating` with no instance, and the instance is an orphan.
    world.store.fail(crate::memory::StoreOp::UpdateRunner, 1);
    let first = scaler
        .handle(&message(MessageKind::Queued, 5, None), now())
        .await;
    assert!(first.is_err(), "{first:?}");
    let later = now() + CREATE_LEASE + Duration::from_secs(1);
    let queued = message(MessageKind::Queued, 5, None);
    let (a, b) = tokio::join!(scaler.handle(&queued, later), scaler.handle(&queued, later));
    let outcomes = [a.expect("handled"), b.expect("handled")];
    assert!(outcomes.contains(&Handled::Deferred), "{outcomes:?}");
    assert_eq!(world.fleet.launched(), 2, "one orphan, one resumed launch");
    let runner = world.store.runners().pop().expect("record");
    let instance_id = runner.instance_id.expect("instance recorded");
    assert!(
        world.jit_store.get(&instance_id).is_some(),
        "the JIT config went to the instance the record names"
    );
}

#[tokio::test]
async fn resumed_runner_github_shows_busy_is_kept_running_with_its_slot() {
    let world = World::new(5);
    let name = up(&world, 6).await;
    // What a try that died after handing the JIT config over, before `running`, left:
    // the record `creating`, the runner on GitHub online and running a job.
    let mut record = world.store.runner(&name).expect("record");
    record.status = InstanceStatus::Creating;
    world.store.put_runner(record.clone());
    let runner_id = record.github_runner_id.expect("registered");
    world.forge.set_online(runner_id, true);
    world.forge.set_busy(runner_id, true);

    let later = now() + CREATE_LEASE + Duration::from_secs(1);
    let resumed = world
        .scaler()
        .handle(&message(MessageKind::Queued, 6, None), later)
        .await
        .expect("resumed");
    assert_eq!(resumed, Handled::RunnerUp(name.clone()));
    let runner = world.store.runner(&name).expect("record");
    assert_eq!(runner.status, InstanceStatus::Running);
    assert!(runner.slot_held, "{runner:?}");
    assert_eq!(world.store.slots_used(POOL), 1);
    let calls = world.forge.calls();
    assert_eq!(
        calls.remove_runner, 0,
        "the serving runner was not torn down"
    );
    assert_eq!(calls.generate_jit_config, 1, "nor registered again");
    assert_eq!(
        world.forge.runner_named(&name).map(|r| r.id),
        Some(runner_id)
    );
}

#[tokio::test]
async fn a_failed_queued_check_is_a_job_lookup_and_creates_nothing() {
    let world = World {
        config: config_with(5, "    check_queued: true\n"),
        ..World::new(5)
    };
    world.forge.fail_next(1);
    let failed = world
        .scaler()
        .handle(&message(MessageKind::Queued, 3, None), now())
        .await;
    assert!(
        matches!(failed, Err(ScalerError::JobLookup { job_id: 3, .. })),
        "{failed:?}"
    );
    let text = failed.err().map(|err| err.to_string()).unwrap_or_default();
    assert!(!text.contains("creating runner"), "{text}");
    assert!(world.store.runners().is_empty());
}

#[tokio::test]
async fn a_throttled_queued_check_takes_the_job_as_queued_and_launches() {
    // GitHub's core budget spent: the check is a saving, not a gate, so the job does not
    // go back to the queue to spend its receives (and, five of them later, be
    // dead-lettered) waiting for GitHub.
    let world = World {
        config: config_with(5, "    check_queued: true\n"),
        ..World::new(5)
    };
    world
        .forge
        .fail_next_with(1, crate::memory::ForgeFailure::Throttled);
    up(&world, 4).await;
    assert_eq!(world.fleet.launched(), 1);
    assert_eq!(world.forge.calls().job_state, 1);
}

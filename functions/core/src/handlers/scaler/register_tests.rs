//! Register: a launched runner is registered with its JIT config delivered, a failed step
//! is retried or abandoned, never both.

use super::testing::*;
use super::*;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::lifecycle::{InstanceStatus, RunnerStatus, CREATE_LEASE};
use crate::memory::ForgeFailure;
use crate::message::MessageKind;
use crate::model::JobStatus;

#[tokio::test]
async fn queued_job_gets_one_running_runner_with_its_jit_config_delivered() {
    let world = World::new(5);
    let name = up(&world, 1).await;
    let runner = world.store.runner(&name).expect("record");
    assert_eq!(runner.status, InstanceStatus::Running);
    assert_eq!(runner.runner_status, RunnerStatus::Pending);
    assert!(name.starts_with("eph-linux-"));
    let instance_id = runner.instance_id.clone().expect("instance recorded");
    let (jit_owner, _) = world
        .jit_store
        .get(&instance_id)
        .expect("JIT config delivered to the instance");
    assert_eq!(jit_owner, name);
    assert!(runner.github_runner_id.is_some());
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), Some(name));
    assert_eq!(world.store.slots_used(POOL), 1);
    let steps: Vec<_> = runner.history.iter().filter_map(|e| e.status).collect();
    assert_eq!(
        steps,
        [
            InstanceStatus::PendingCreate,
            InstanceStatus::Creating,
            InstanceStatus::Running
        ]
    );
}

#[tokio::test]
async fn a_pool_without_self_hosted_registers_its_runners_with_it() {
    let mut world = World::new(5);
    let text = world_config_text("[Linux, x64, linux]");
    world.config = Arc::new(crate::config::Config::parse("t.yaml", &text).expect("valid"));
    let name = up(&world, 1).await;
    let requests = world.forge.jit_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].name, name);
    assert_eq!(requests[0].labels, ["self-hosted", "Linux", "x64"]);
    let runner = world.store.runner(&name).expect("record");
    assert_eq!(
        runner.labels, requests[0].labels,
        "the record says what GitHub was told"
    );
}

#[tokio::test]
async fn transient_failure_is_retried_after_the_lease_and_reuses_the_instance() {
    let world = World::new(5);
    let scaler = world.scaler();
    let half_done = half_done_after_a_transient_failure(&world, &scaler).await;
    assert_eq!(half_done.status, InstanceStatus::Creating);
    assert!(half_done.instance_id.is_some());

    let too_soon = scaler
        .handle(&message(MessageKind::Queued, 3, None), now())
        .await
        .expect("handled");
    assert_eq!(
        too_soon,
        Handled::Deferred,
        "another delivery holds the lease"
    );
    assert!(
        world.queue.delays()[0] > Duration::from_secs(59),
        "comes back once the lease is over"
    );
    let later = now() + CREATE_LEASE + Duration::from_secs(1);
    let retried = scaler
        .handle(&message(MessageKind::Queued, 3, None), later)
        .await
        .expect("retry works");
    assert_eq!(retried, Handled::RunnerUp(half_done.name.clone()));
    assert_eq!(world.fleet.launched(), 1, "the retry reused the instance");
    assert_eq!(
        world.store.runner(&half_done.name).map(|r| r.status),
        Some(InstanceStatus::Running)
    );
}

#[tokio::test]
async fn a_creation_failing_after_its_job_went_to_another_runner_is_reaped_not_retried() {
    let world = World::new(5);
    let scaler = world.scaler();
    let half_done = half_done_after_a_transient_failure(&world, &scaler).await;
    // While GitHub kept failing, it gave job 3 to another runner.
    let mut job = world.store.job(3).expect("job 3");
    job.status = JobStatus::InProgress;
    job.runner_name = Some("eph-linux-other".into());
    world.store.put_job(job);

    world.forge.fail_next_with(1, ForgeFailure::Transient);
    let clock = Clock::starting_at(now());
    let handled = scaler
        .finish(half_done.clone(), &clock)
        .await
        .expect("not retried");
    assert_eq!(handled, Handled::NothingToDo);
    let record = world.store.runner(&half_done.name).expect("record");
    assert_eq!(record.status, InstanceStatus::PendingDelete);
    assert!(
        record
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("no longer waits"),
        "{record:?}"
    );
}

#[tokio::test]
async fn a_creation_failing_while_its_job_waits_is_retried() {
    let world = World::new(5);
    let scaler = world.scaler();
    let half_done = half_done_after_a_transient_failure(&world, &scaler).await;
    world.forge.fail_next_with(1, ForgeFailure::Transient);
    let clock = Clock::starting_at(now());
    let again = scaler.finish(half_done.clone(), &clock).await;
    assert!(
        matches!(again, Err(ScalerError::Creation { .. })),
        "{again:?}"
    );
    let record = world.store.runner(&half_done.name).expect("record");
    assert_eq!(record.status, InstanceStatus::Creating);
}

/// Job 3's first creation fails on a transient GitHub error; returns the half-done record.
async fn half_done_after_a_transient_failure(
    world: &World,
    scaler: &Arc<Scaler>,
) -> crate::model::RunnerRecord {
    world.forge.fail_next_with(1, ForgeFailure::Transient);
    let first = scaler
        .handle(&message(MessageKind::Queued, 3, None), now())
        .await;
    assert!(
        matches!(first, Err(ScalerError::Creation { .. })),
        "{first:?}"
    );
    world.store.runners().pop().expect("record")
}

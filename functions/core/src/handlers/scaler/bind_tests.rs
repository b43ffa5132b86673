//! Bind: `in_progress` binds the runner to its job, `completed` sends an ephemeral runner
//! to be reaped and sets a static one idle.

use super::testing::*;
use super::*;
use crate::handlers::test_support::{message, now, World};
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::message::MessageKind;
use crate::model::JobStatus;

#[tokio::test]
async fn in_progress_binds_and_completed_sends_the_runner_to_be_reaped() {
    let world = World::new(5);
    let scaler = world.scaler();
    let name = up(&world, 9).await;
    scaler
        .handle(&message(MessageKind::InProgress, 9, Some(&name)), now())
        .await
        .expect("bound");
    let active = world.store.runner(&name).expect("record");
    assert_eq!(active.runner_status, RunnerStatus::Active);
    assert_eq!(
        world.store.job(9).map(|j| j.status),
        Some(JobStatus::InProgress)
    );

    let released = scaler
        .handle(&message(MessageKind::Completed, 9, Some(&name)), now())
        .await
        .expect("released");
    assert_eq!(released, Handled::Released);
    let record = world.store.runner(&name).expect("record");
    assert_eq!(record.status, InstanceStatus::PendingDelete);
    assert_eq!(record.reason.as_deref(), Some("job 9 completed"));
    assert_eq!(
        world.store.job(9).map(|j| j.status),
        Some(JobStatus::Completed)
    );
}

#[tokio::test]
async fn a_static_runners_completed_job_leaves_it_idle_not_bound() {
    let world = World {
        config: crate::handlers::test_support::config_with(5, "    ephemeral: false"),
        ..World::new(5)
    };
    let scaler = world.scaler();
    let name = up(&world, 4).await;
    let event = |kind| message(kind, 4, Some(&name));
    let bound = scaler.handle(&event(MessageKind::InProgress), now()).await;
    assert_eq!(bound.ok(), Some(Handled::Bound));
    let done = scaler.handle(&event(MessageKind::Completed), now()).await;
    assert_eq!(done.ok(), Some(Handled::Idle));
    let runner = world.store.runner(&name).expect("record");
    assert_eq!(runner.runner_status, RunnerStatus::Idle);
    assert_eq!(
        runner.status,
        InstanceStatus::Running,
        "kept for its next job"
    );
}

#[tokio::test]
async fn a_runner_removed_from_github_is_not_bound_again() {
    let world = World::new(5);
    let name = up(&world, 4).await;
    let mut removed = world.store.runner(&name).expect("record");
    removed.runner_status = RunnerStatus::Terminated;
    world.store.put_runner(removed.clone());
    let handled = world
        .scaler()
        .handle(&message(MessageKind::InProgress, 4, Some(&name)), now())
        .await;
    assert_eq!(handled.ok(), Some(Handled::NothingToDo));
    assert_eq!(world.store.runner(&name), Some(removed));
}

//! Bind: `in_progress` binds the runner to its job, `completed` sends an ephemeral runner to be reaped and sets a static one idle.

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

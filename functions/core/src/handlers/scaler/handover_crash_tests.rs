//! A hand-over stopped at any point, by a crash or a failed call, never leaves two runner
//! records waiting for one queued job (the chaos seeds 62961, 82612, 88792 and 92870
//! each found one such point): runner A, launched for job 1, took job 2, whose runner B
//! is free; job 1 is handed to B.

use super::testing::{b_claimed_for_job_2, up};
use super::*;
use crate::handlers::test_support::{config_with, message, now, World};
use crate::lifecycle::{InstanceStatus, RunnerStatus};
use crate::memory::{FakeFleet, FakeForge, MemoryJitStore, MemoryQueue, MemoryStore};
use crate::message::MessageKind;
use crate::model::JobStatus;

/// Store calls a hand-over takes at most, with room to spare: every crash point.
const CRASH_POINTS: u32 = 16;

fn world(extra: &str) -> World {
    World {
        config: config_with(5, extra),
        store: Arc::new(MemoryStore::new()),
        fleet: Arc::new(FakeFleet::new()),
        forge: Arc::new(FakeForge::new()),
        jit_store: Arc::new(MemoryJitStore::new()),
        queue: Arc::new(MemoryQueue::new()),
    }
}

/// B is in creation when A takes job 2.
fn b_in_creation(world: &World) -> String {
    b_claimed_for_job_2(world, InstanceStatus::Creating, true)
}

/// The chaos suite's invariant, stricter: a record counts even while its runner runs
/// another job on GitHub.
fn assert_one_runner_per_queued_job(world: &World, when: &str) {
    for job in world.store.jobs() {
        if job.status != JobStatus::Queued {
            continue;
        }
        let waiting: Vec<String> = world
            .store
            .runners()
            .into_iter()
            .filter(|r| r.job_id == Some(job.job_id))
            .filter(|r| {
                matches!(
                    r.status,
                    InstanceStatus::PendingCreate
                        | InstanceStatus::Creating
                        | InstanceStatus::Running
                ) && matches!(r.runner_status, RunnerStatus::Pending | RunnerStatus::Idle)
            })
            .map(|r| r.name)
            .collect();
        assert!(
            waiting.len() <= 1,
            "{when}: queued job {} has two runners launched for it: {waiting:?}",
            job.job_id
        );
    }
}

/// For every crash point: sets the world up, stops the table after `n` calls while A's
/// `kind` webhook for job 2 is handled, and checks the invariant; then lets the retry
/// run and checks again.
async fn crash_everywhere<F>(extra: &str, kind: MessageKind, set_up: F)
where
    F: Fn(&World) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + '_>>,
{
    for n in 0..CRASH_POINTS {
        let world = world(extra);
        let runner_a = set_up(&world).await;
        let event = message(kind, 2, Some(&runner_a));
        world.store.outage_after(n);
        let _ = world.scaler().handle(&event, now()).await;
        assert_one_runner_per_queued_job(&world, &format!("crash after call {n}"));
        world.store.end_outage();
        let _ = world.scaler().handle(&event, now()).await;
        for sent in world.queue.take() {
            let _ = world.scaler().handle(&sent, now()).await;
        }
        assert_one_runner_per_queued_job(&world, &format!("retry after crash {n}"));
    }
}

/// Runner A is up for job 1 and runner B for job 2; returns A's name.
fn a_and_b_up(world: &World) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + '_>> {
    Box::pin(async move {
        let runner_a = up(world, 1).await;
        up(world, 2).await;
        runner_a
    })
}

/// Seed 62961: static runners; the crash fell between B's record and the claim.
#[tokio::test]
async fn a_crash_inside_a_hand_over_of_static_runners_leaves_one_runner_per_queued_job() {
    crash_everywhere("    ephemeral: false", MessageKind::InProgress, a_and_b_up).await;
}

/// Seed 82612: A's `in_progress` was lost, its `completed` hands job 1 over; after the
/// crash a redelivered `queued` for job 1 must not add a second runner.
#[tokio::test]
async fn a_crash_inside_a_hand_over_from_a_completed_leaves_one_runner_per_queued_job() {
    crash_everywhere("", MessageKind::Completed, a_and_b_up).await;
}

/// Seed 88792: B is in creation, so job 1 is sent again to resume it, and that send
/// fails after the hand-over: A must already be bound to job 2.
#[tokio::test]
async fn a_hand_over_whose_resend_fails_leaves_one_runner_per_queued_job() {
    let world = world("    ephemeral: false");
    let runner_a = up(&world, 1).await;
    b_in_creation(&world);
    world.queue.fail_sends(true);
    let event = message(MessageKind::InProgress, 2, Some(&runner_a));
    let failed = world.scaler().handle(&event, now()).await;
    assert!(failed.is_err(), "the send failed: {failed:?}");
    assert_one_runner_per_queued_job(&world, "after the failed send");
}

/// Seed 92870: B is in creation; the crash fell between the claim and A's binding.
#[tokio::test]
async fn a_crash_inside_a_hand_over_to_a_runner_in_creation_leaves_one_runner_per_queued_job() {
    crash_everywhere("    ephemeral: false", MessageKind::InProgress, |world| {
        Box::pin(async move {
            let runner_a = up(world, 1).await;
            b_in_creation(world);
            runner_a
        })
    })
    .await;
}

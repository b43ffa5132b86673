//! The idle rules on the in-memory fakes: an idle ephemeral runner with no queued job
//! left is deleted gracefully; what the rules do is recorded; a burst of bootstrapping
//! runners costs a bounded number of lookups.

use super::reconcile_tests::{active_runner, far, minutes};
use super::*;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::lifecycle::RunnerStatus;
use crate::message::MessageKind;
use crate::metrics::Metrics;
use crate::ports::RunnerStore;

/// A runner that came online for `job` and sits idle.
async fn idle_runner(world: &World, job: u64) -> RunnerRecord {
    let runner = world.running_runner(job).await;
    let runner_id = runner.github_runner_id.expect("registered");
    world.forge.set_online(runner_id, true);
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(report.came_online, 1);
    world.store.runner(&runner.name).expect("record")
}

#[tokio::test(start_paused = true)]
async fn idle_ephemeral_runner_with_no_queued_job_left_is_deleted_gracefully() {
    let world = World::new(5);
    let runner = idle_runner(&world, 7).await;
    assert_eq!(runner.runner_status, RunnerStatus::Idle);
    // Its job was cancelled: GitHub sent `completed` without a runner.
    world
        .scaler()
        .handle(&message(MessageKind::Completed, 7, None), now())
        .await
        .expect("completed");
    // Another queued job of the pool (with a runner of its own) keeps it for now.
    let other = world.running_runner(8).await;
    let reaper = world.reaper();
    let kept = reaper.run(now() + minutes(11), far()).await.expect("run");
    assert_eq!(kept.deleted, 0, "{kept:?}");
    world
        .scaler()
        .handle(
            &message(MessageKind::Completed, 8, Some(&other.name)),
            now(),
        )
        .await
        .expect("completed");
    let before_timeout = reaper.run(now() + minutes(9), far()).await.expect("run");
    assert!(
        world.store.runner(&runner.name).map(|r| r.status) == Some(InstanceStatus::Running),
        "{before_timeout:?}"
    );
    let report = reaper.run(now() + minutes(11), far()).await.expect("run");
    assert!(report.deleted >= 1, "{report:?}");
    assert_eq!(
        world.store.runner(&runner.name).map(|r| r.status),
        Some(InstanceStatus::Deleted)
    );
}

#[tokio::test(start_paused = true)]
async fn deletions_and_deferrals_and_runners_by_status_are_recorded() {
    let world = World::new(5);
    let (metrics, captured) = Metrics::capture("eph");
    let reaper = world.reaper().with_metrics(metrics);
    let busy = active_runner(&world, 9).await;
    world
        .forge
        .set_busy(busy.github_runner_id.expect("registered"), true);
    let ask = Transition::new(
        InstanceStatus::Running,
        InstanceStatus::PendingDelete,
        now(),
    );
    world
        .store
        .transition(&busy.name, &ask)
        .await
        .expect("asked");
    world.running_runner(10).await;
    reaper.run(now(), far()).await.expect("run");
    let documents = captured.documents().expect("valid EMF");
    let value = |metric: Metric, dimension: Dimension, value: &str| -> f64 {
        documents
            .iter()
            .filter(|d| d.dimension(dimension) == Some(value))
            .filter_map(|d| d.values(metric))
            .flatten()
            .sum()
    };
    assert_eq!(value(Metric::BusyDeferrals, Dimension::Pool, POOL), 1.0);
    assert_eq!(
        value(Metric::RunnersByStatus, Dimension::Status, "running"),
        1.0
    );
    assert_eq!(
        value(Metric::RunnersByStatus, Dimension::Status, "pending_delete"),
        1.0
    );
    assert_eq!(
        value(Metric::RunnersByStatus, Dimension::Status, "error"),
        0.0
    );
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_bootstrapping_runners_costs_a_bounded_number_of_lookups_a_run() {
    let world = World::new(50);
    let extra = super::reconcile::WATCH_LOOKUPS_PER_RUN as u64 + 5;
    for job in 1..=extra {
        let runner = world.running_runner(job).await;
        world
            .forge
            .set_online(runner.github_runner_id.expect("registered"), true);
    }
    let reaper = world.reaper();
    let before = world.forge.calls().get_runner;
    let first = reaper.run(now(), far()).await.expect("run");
    assert_eq!(first.came_online, super::reconcile::WATCH_LOOKUPS_PER_RUN);
    assert_eq!(
        world.forge.calls().get_runner - before,
        super::reconcile::WATCH_LOOKUPS_PER_RUN
    );
    let second = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(second.came_online, 5, "the rest in the next run");
}

#[tokio::test(start_paused = true)]
async fn a_runner_the_scaler_bound_since_the_snapshot_is_not_marked_online_again() {
    let world = World::new(5);
    let (metrics, captured) = Metrics::capture("eph");
    let reaper = world.reaper().with_metrics(metrics);
    let runner = world.running_runner(1).await;
    let snapshot_copy = world.store.runner(&runner.name).expect("record");
    assert_eq!(snapshot_copy.runner_status, RunnerStatus::Pending);
    // The job's `in_progress` binds it (the scaler times its boot) after the reaper read it.
    world
        .scaler()
        .handle(
            &message(MessageKind::InProgress, 1, Some(&runner.name)),
            now() + Duration::from_secs(5),
        )
        .await
        .expect("bound");
    let seen = ForgeRunner {
        id: runner.github_runner_id.expect("registered"),
        name: runner.name.clone(),
        online: true,
        busy: false,
    };
    reaper
        .mark_online(&snapshot_copy, &seen, now() + time::Duration::seconds(10))
        .await
        .expect("no error");
    let record = world.store.runner(&runner.name).expect("record");
    assert_eq!(
        record.runner_status,
        RunnerStatus::Active,
        "not set back to idle"
    );
    reaper.metrics.flush();
    let timed = captured
        .documents()
        .expect("valid EMF")
        .iter()
        .filter_map(|d| d.values(Metric::QueuedToOnline))
        .count();
    assert_eq!(timed, 0, "the scaler timed it; the reaper does not again");
}

//! Deletion on the in-memory fakes: graceful order, busy runners kept, backoff, force.

use super::*;
use crate::backoff;
use crate::handlers::scaler::Handled;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::lifecycle::RunnerStatus;
use crate::message::MessageKind;
use crate::ports::RunnerStore;
use std::time::Duration;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// A runner that ran its job and now waits in `pending_delete`.
async fn finished_runner(world: &World, job: u64) -> RunnerRecord {
    let scaler = world.scaler();
    let Handled::RunnerUp(name) = scaler
        .handle(&message(MessageKind::Queued, job, None), now())
        .await
        .expect("up")
    else {
        panic!("no runner")
    };
    scaler
        .handle(&message(MessageKind::Completed, job, Some(&name)), now())
        .await
        .expect("completed");
    world.store.runner(&name).expect("record")
}

#[tokio::test(start_paused = true)]
async fn graceful_delete_removes_from_github_then_terminates_then_frees_the_slot() {
    let world = World::new(5);
    let runner = finished_runner(&world, 1).await;
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(report.deleted, 1);
    let deleted = world.store.runner(&runner.name).expect("kept as deleted");
    assert_eq!(deleted.status, InstanceStatus::Deleted);
    assert_eq!(deleted.ttl, Some(now() + world.config.reaper.deleted_ttl));
    let instance_id = runner.instance_id.expect("instance");
    assert_eq!(
        world.fleet.instance(&instance_id).map(|i| i.state),
        Some(InstanceState::Terminated)
    );
    assert!(world.forge.runners().is_empty());
    assert!(world.jit_store.get(&instance_id).is_none());
    assert_eq!(world.store.slots_used(POOL), 0);
}

#[tokio::test(start_paused = true)]
async fn busy_runner_is_not_terminated_and_is_retried_without_time_limit() {
    let world = World::new(5);
    let runner = finished_runner(&world, 2).await;
    let runner_id = runner.github_runner_id.expect("registered");
    world.forge.set_busy(runner_id, true);
    let reaper = world.reaper();
    for run in 0..5 {
        let at = now() + Duration::from_secs(3600 * run);
        let report = reaper.run(at, far()).await.expect("run");
        assert_eq!(report.busy, 1, "run {run}: {report:?}");
    }
    let kept = world.store.runner(&runner.name).expect("record");
    assert_eq!(
        (kept.status, kept.reason.as_deref()),
        (InstanceStatus::PendingDelete, Some("busy"))
    );
    assert_eq!(
        world.fleet.terminate_calls(),
        0,
        "never terminated while busy"
    );

    world.forge.set_busy(runner_id, false);
    let report = reaper
        .run(now() + Duration::from_secs(5 * 3600), far())
        .await
        .expect("run");
    assert_eq!(report.deleted, 1);
}

#[tokio::test(start_paused = true)]
async fn ec2_failure_backs_off_exponentially_and_keeps_the_error() {
    let world = World::new(5);
    let runner = finished_runner(&world, 3).await;
    world.fleet.fail_terminate_times(3);
    let reaper = world.reaper();
    let mut at = now();
    for attempt in 1..=3u32 {
        let report = reaper.run(at, far()).await.expect("run");
        assert_eq!(report.backed_off, 1, "attempt {attempt}");
        let record = world.store.runner(&runner.name).expect("record");
        assert_eq!(record.attempts, attempt);
        assert_eq!(record.next_attempt_at, at + backoff::delay_after(attempt));
        assert!(record
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("injected failure"));
        // Not due yet: a run just before the next attempt leaves it alone.
        let early = reaper
            .run(record.next_attempt_at - Duration::from_millis(1), far())
            .await
            .expect("run");
        assert_eq!(early, ReaperReport::default());
        at = record.next_attempt_at;
    }
    let report = reaper.run(at, far()).await.expect("run");
    assert_eq!(report.deleted, 1);
}

#[tokio::test(start_paused = true)]
async fn forced_delete_ignores_provider_errors_and_finishes_in_one_pass() {
    let world = World::new(5);
    let runner = finished_runner(&world, 4).await;
    let force = Transition::new(
        InstanceStatus::PendingDelete,
        InstanceStatus::PendingForceDelete,
        now(),
    );
    world
        .store
        .transition(&runner.name, &force)
        .await
        .expect("forced");
    world.fleet.fail_terminate_times(5);
    world.jit_store.fail_next(5);
    world.forge.fail_next(1);
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(report.deleted, 1);
    assert_eq!(
        world.store.runner(&runner.name).map(|r| r.status),
        Some(InstanceStatus::Deleted)
    );
    assert_eq!(world.store.slots_used(POOL), 0);
}

#[tokio::test(start_paused = true)]
async fn running_runner_seen_online_becomes_idle() {
    let world = World::new(5);
    let scaler = world.scaler();
    let Handled::RunnerUp(name) = scaler
        .handle(&message(MessageKind::Queued, 5, None), now())
        .await
        .expect("up")
    else {
        panic!("no runner")
    };
    let runner_id = world
        .store
        .runner(&name)
        .and_then(|r| r.github_runner_id)
        .expect("registered");
    let reaper = world.reaper();
    assert_eq!(reaper.run(now(), far()).await.expect("run").came_online, 0);
    world.forge.set_online(runner_id, true);
    assert_eq!(reaper.run(now(), far()).await.expect("run").came_online, 1);
    assert_eq!(
        world.store.runner(&name).map(|r| r.runner_status),
        Some(RunnerStatus::Idle)
    );
}

#[tokio::test(start_paused = true)]
async fn reaper_starts_no_work_after_its_deadline() {
    let world = World::new(5);
    finished_runner(&world, 6).await;
    let report = world
        .reaper()
        .run(now(), Instant::now())
        .await
        .expect("run");
    assert!(report.left_for_next_run);
    assert_eq!(report.deleted, 0);
}

#[tokio::test(start_paused = true)]
async fn a_throttled_delete_waits_for_github_and_the_run_starts_no_other() {
    let world = World::new(20);
    let mut runners = Vec::new();
    for job in 10..20 {
        runners.push(finished_runner(&world, job).await);
    }
    // The first DELETE meets GitHub's rate limit (retry-after: one minute).
    world
        .forge
        .fail_next_with(1, crate::memory::ForgeFailure::Throttled);
    let report = world.reaper().run(now(), far()).await.expect("run");
    // The deletions already under way finish; none is started after the refusal.
    assert_eq!(
        (report.backed_off, report.deleted),
        (1, PARALLEL_DELETES - 1),
        "{report:?}"
    );
    assert!(report.left_for_next_run, "{report:?}");
    let waiting: Vec<RunnerRecord> = runners
        .iter()
        .filter_map(|r| world.store.runner(&r.name))
        .filter(|r| r.status == InstanceStatus::PendingDelete)
        .collect();
    assert_eq!(waiting.len(), runners.len() - (PARALLEL_DELETES - 1));
    let throttled: Vec<&RunnerRecord> = waiting.iter().filter(|r| r.attempts == 1).collect();
    assert_eq!(throttled.len(), 1);
    assert_eq!(
        throttled[0].next_attempt_at,
        now() + Duration::from_secs(60),
        "due again at GitHub's wait, not the first backoff's second"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deletion_whose_last_write_meets_a_concurrent_one_is_finished_in_the_same_run() {
    let world = World::new(5);
    let runner = finished_runner(&world, 30).await;
    world
        .store
        .conflict(crate::memory::StoreOp::FinishDeletion, 2);
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(report.deleted, 1, "{report:?}");
    assert_eq!(
        world.store.runner(&runner.name).map(|r| r.status),
        Some(InstanceStatus::Deleted)
    );
    assert_eq!(world.store.slots_used(POOL), 0);
    assert_eq!(world.forge.calls().remove_runner, 1, "one DELETE on GitHub");
}

#[tokio::test(start_paused = true)]
async fn the_deletion_keeps_ec2s_launch_time_and_the_instances_jit_read() {
    let world = World::new(5);
    let launched = now() - time::Duration::seconds(90);
    world.fleet.launch_at(launched);
    let runner = finished_runner(&world, 1).await;
    let instance_id = runner.instance_id.clone().expect("instance");
    let read = now() - time::Duration::seconds(60);
    world
        .jit_store
        .take(&instance_id, read)
        .expect("its config waits");
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(report.deleted, 1);
    let deleted = world.store.runner(&runner.name).expect("kept as deleted");
    assert_eq!(deleted.status, InstanceStatus::Deleted);
    assert_eq!(deleted.instance_launched_at, Some(launched));
    assert_eq!(deleted.jit_read_at, Some(read));
    assert!(
        world.jit_store.tombstones().is_empty(),
        "the tombstone is deleted too"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deletion_stamps_nothing_it_did_not_learn() {
    let world = World::new(5);
    let runner = finished_runner(&world, 1).await;
    world.fleet.fail_describe_times(1);
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(
        report.deleted, 1,
        "a failed describe does not hold deletions"
    );
    let deleted = world.store.runner(&runner.name).expect("kept as deleted");
    assert_eq!(deleted.status, InstanceStatus::Deleted);
    assert_eq!(deleted.instance_launched_at, None, "no describe answered");
    assert_eq!(deleted.jit_read_at, None, "the config was never read");
    assert!(world.jit_store.instance_ids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_launch_time_seen_while_the_instance_ran_is_kept_after_it_powered_off() {
    let world = World::new(5);
    let launched = now() - time::Duration::seconds(90);
    world.fleet.launch_at(launched);
    let runner = finished_runner(&world, 1).await;
    let instance_id = runner.instance_id.clone().expect("instance");
    let busy = runner.github_runner_id.expect("registered");
    world.forge.set_busy(busy, true);
    let reaper = world.reaper();
    let report = reaper.run(now(), far()).await.expect("first run");
    assert_eq!(report.busy, 1, "its instance described while it ran");
    // The job ends: the runner deregisters and its host powers off (and terminates).
    world.forge.set_busy(busy, false);
    world
        .fleet
        .set_state(&instance_id, InstanceState::Terminated);
    let later = now() + time::Duration::minutes(1);
    let report = reaper.run(later, far()).await.expect("second run");
    assert_eq!(report.deleted, 1);
    let deleted = world.store.runner(&runner.name).expect("kept as deleted");
    assert_eq!(deleted.instance_launched_at, Some(launched));
}

#[tokio::test(start_paused = true)]
async fn the_hosts_boot_is_measured_from_ec2s_launch_to_the_jit_read_at_deletion() {
    let world = World::new(5);
    let (metrics, captured) = crate::metrics::Metrics::capture("eph");
    let launched = now() - time::Duration::seconds(90);
    world.fleet.launch_at(launched);
    let runner = finished_runner(&world, 1).await;
    let instance_id = runner.instance_id.clone().expect("instance");
    world
        .jit_store
        .take(&instance_id, launched + time::Duration::seconds(41))
        .expect("its config waits");
    let report = world
        .reaper()
        .with_metrics(metrics)
        .run(now(), far())
        .await
        .expect("run");
    assert_eq!(report.deleted, 1);
    let boots: Vec<f64> = captured
        .documents()
        .expect("valid EMF")
        .iter()
        .filter_map(|d| d.values(crate::metrics::Metric::HostBootSeconds))
        .flatten()
        .copied()
        .collect();
    assert_eq!(boots, [41.0]);
}

#[tokio::test(start_paused = true)]
async fn the_record_keeps_the_runner_its_host_ran_and_a_stale_image_is_counted() {
    use crate::metrics::{Dimension, Metric};
    let world = World::new(5);
    let (metrics, captured) = crate::metrics::Metrics::capture("eph");
    let stale = crate::model::HostRunner {
        runner_version: Some("2.337.0".into()),
        runner_image_version: Some("2.336.0".into()),
        runner_swap_ms: Some(5_500),
    };
    let current = crate::model::HostRunner {
        runner_image_version: Some("2.337.0".into()),
        runner_swap_ms: None,
        ..stale.clone()
    };
    let mut names = Vec::new();
    for (n, ran) in [(1, &stale), (2, &current)] {
        let runner = finished_runner(&world, n).await;
        let instance_id = runner.instance_id.clone().expect("instance");
        world
            .jit_store
            .take_reporting(&instance_id, now(), ran.clone())
            .expect("its config waits");
        names.push(runner.name);
    }
    let report = world
        .reaper()
        .with_metrics(metrics)
        .run(now(), far())
        .await
        .expect("run");
    assert_eq!(report.deleted, 2);
    let kept = world.store.runner(&names[0]).expect("kept as deleted");
    assert_eq!(kept.host_runner, stale);
    assert_eq!(
        world.store.runner(&names[1]).expect("kept").host_runner,
        current
    );
    let documents = captured.documents().expect("valid EMF");
    let total = |metric| -> f64 {
        let values = documents.iter().filter_map(|d| d.values(metric));
        values.flatten().sum()
    };
    assert_eq!(total(Metric::RunnerBootsReported), 2.0);
    assert_eq!(total(Metric::RunnerBootsBehind), 1.0);
    assert_eq!(total(Metric::BootsImageBehind), 1.0);
    let by_pool = documents
        .iter()
        .find(|d| d.values(Metric::BootsImageBehind).is_some())
        .expect("a by-pool line");
    assert_eq!(by_pool.dimension(Dimension::Pool), Some(kept.pool.as_str()));
}

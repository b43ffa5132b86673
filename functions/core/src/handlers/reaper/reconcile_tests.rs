//! The record rules on the in-memory fakes: bootstrap timeout, stuck `deleting`,
//! `error`, instance gone, missed `completed`, and idle ephemeral runners — each made to
//! happen, then shown to converge within the stated number of runs.

use super::*;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::lifecycle::RunnerStatus;
use crate::message::MessageKind;
use crate::ports::RunnerStore;

pub(super) fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

pub(super) fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

/// Checks that everything made for `runner` is gone and its slot given back.
pub(super) fn assert_cleaned(world: &World, runner: &RunnerRecord) {
    let record = world.store.runner(&runner.name).expect("kept as deleted");
    assert_eq!(record.status, InstanceStatus::Deleted, "{record:?}");
    if let Some(instance_id) = &runner.instance_id {
        assert_eq!(
            world.fleet.instance(instance_id).map(|i| i.state),
            Some(InstanceState::Terminated)
        );
        assert!(
            world.jit_store.get(instance_id).is_none(),
            "JIT config left"
        );
    }
    assert!(
        world.forge.runner_named(&runner.name).is_none(),
        "left on GitHub"
    );
    assert_eq!(world.store.slots_used(POOL), 0);
}

#[tokio::test(start_paused = true)]
async fn runner_that_never_comes_online_is_cleaned_after_the_bootstrap_timeout() {
    let world = World::new(5);
    let runner = world.running_runner(1).await;
    let reaper = world.reaper();
    let early = reaper.run(now() + minutes(19), far()).await.expect("run");
    assert_eq!(early.sent_to_delete, 0, "{early:?}");
    let report = reaper.run(now() + minutes(21), far()).await.expect("run");
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    assert_cleaned(&world, &runner);
    let history = world.store.runner(&runner.name).expect("record").history;
    assert!(history
        .iter()
        .any(|e| e.reason.as_deref() == Some(Cleanup::BootstrapTimeout.reason())));
}

#[tokio::test(start_paused = true)]
async fn a_runner_past_its_bootstrap_timeout_that_github_shows_busy_is_kept() {
    // A burst's runners took their jobs; their `in_progress` still wait in the queue.
    // More than one run's lookups of bootstrapping runners: the rest are asked about
    // before the rule deletes them.
    let world = World::new(40);
    let count = super::reconcile::WATCH_LOOKUPS_PER_RUN + 1;
    let mut runners = Vec::new();
    for job in 0..count as u64 {
        let runner = world.running_runner(100 + job).await;
        let runner_id = runner.github_runner_id.expect("registered");
        world.forge.set_online(runner_id, true);
        world.forge.set_busy(runner_id, true);
        runners.push(runner);
    }
    let report = world
        .reaper()
        .run(now() + minutes(21), far())
        .await
        .expect("run");
    assert_eq!((report.sent_to_delete, report.busy), (0, 0), "{report:?}");
    assert_eq!(
        world.forge.calls().remove_runner,
        0,
        "no DELETE met a busy runner"
    );
    for runner in &runners {
        let record = world.store.runner(&runner.name).expect("record");
        assert_eq!(
            (record.status, record.runner_status),
            (InstanceStatus::Running, RunnerStatus::Active),
            "{}",
            runner.name
        );
    }
}

#[tokio::test(start_paused = true)]
async fn record_stuck_in_deleting_is_taken_up_again() {
    let world = World::new(5);
    let runner = world.running_runner(2).await;
    for (from, to) in [
        (InstanceStatus::Running, InstanceStatus::PendingDelete),
        (InstanceStatus::PendingDelete, InstanceStatus::Deleting),
    ] {
        let step = Transition::new(from, to, now());
        world
            .store
            .transition(&runner.name, &step)
            .await
            .expect("moved");
    }
    // A reaper died here. A minute later the record is still someone's work...
    let reaper = world.reaper();
    let report = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(report.deleted, 0, "{report:?}");
    // ... after `stuck_deleting` it is retried, and finished in that run.
    let report = reaper.run(now() + minutes(6), far()).await.expect("run");
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    assert_cleaned(&world, &runner);
}

#[tokio::test(start_paused = true)]
async fn failed_creation_has_what_was_made_cleaned_in_one_run() {
    let world = World::new(5);
    world
        .forge
        .fail_next_with(1, crate::memory::ForgeFailure::Rejected);
    let failed = world
        .scaler()
        .handle(&message(MessageKind::Queued, 3, None), now())
        .await;
    assert!(failed.is_err(), "registration refused");
    let errored = world
        .store
        .runners()
        .into_iter()
        .find(|r| r.status == InstanceStatus::Error)
        .expect("an error record");
    let instance_id = errored.instance_id.clone().expect("an instance was made");
    assert_eq!(
        world.fleet.instance(&instance_id).map(|i| i.state),
        Some(InstanceState::Pending)
    );
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    assert_cleaned(&world, &errored);
}

#[tokio::test(start_paused = true)]
async fn running_record_whose_instance_is_gone_or_stopped_is_cleaned() {
    for state in [InstanceState::Terminated, InstanceState::Stopped] {
        let world = World::new(5);
        let runner = world.running_runner(4).await;
        let instance_id = runner.instance_id.clone().expect("instance");
        world.fleet.set_state(&instance_id, state);
        let reaper = world.reaper();
        // Within the grace EC2's listing may lag a launch: nothing happens.
        let early = reaper.run(now() + minutes(1), far()).await.expect("run");
        assert_eq!(early.sent_to_delete, 0, "{state:?}: {early:?}");
        let report = reaper.run(now() + minutes(3), far()).await.expect("run");
        assert_eq!(
            (report.sent_to_delete, report.deleted),
            (1, 1),
            "{state:?}: {report:?}"
        );
        assert_cleaned(&world, &runner);
    }
}

/// A runner bound to its job by `in_progress`.
pub(super) async fn active_runner(world: &World, job: u64) -> RunnerRecord {
    let runner = world.running_runner(job).await;
    world
        .scaler()
        .handle(
            &message(MessageKind::InProgress, job, Some(&runner.name)),
            now(),
        )
        .await
        .expect("bound");
    world.store.runner(&runner.name).expect("record")
}

#[tokio::test(start_paused = true)]
async fn one_run_looks_up_at_most_its_budget_of_busy_runners_jobs_and_the_rest_next() {
    let busy = JOB_CHECKS_PER_RUN + 10;
    let world = World::new(u32::try_from(busy).expect("small"));
    for job in 1..=busy as u64 {
        active_runner(&world, job).await;
        world.forge.set_job_state(job, ForgeJobState::InProgress);
    }
    let reaper = world.reaper();
    reaper.run(now(), far()).await.expect("run");
    assert_eq!(world.forge.calls().job_state, JOB_CHECKS_PER_RUN);
    // The ten left are still due, and go first in the next run.
    reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(world.forge.calls().job_state, busy);
}

#[tokio::test(start_paused = true)]
async fn missed_completed_is_found_on_github_at_most_every_few_minutes() {
    let world = World::new(5);
    let runner = active_runner(&world, 5).await;
    assert_eq!(runner.runner_status, RunnerStatus::Active);
    world.forge.set_job_state(5, ForgeJobState::InProgress);
    let reaper = world.reaper();
    reaper.run(now(), far()).await.expect("run");
    assert_eq!(world.forge.calls().job_state, 1);
    let record = world.store.runner(&runner.name).expect("record");
    assert_eq!(record.next_attempt_at, now() + JOB_CHECK_INTERVAL);
    // Runs in between do not ask GitHub again.
    for minute in 1..3 {
        reaper
            .run(now() + minutes(minute), far())
            .await
            .expect("run");
    }
    assert_eq!(world.forge.calls().job_state, 1);
    // The job ended; its `completed` webhook never came.
    world.forge.set_job_state(5, ForgeJobState::Completed);
    let report = reaper.run(now() + minutes(3), far()).await.expect("run");
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(world.forge.calls().job_state, 2);
    assert_cleaned(&world, &runner);
}

#[tokio::test(start_paused = true)]
async fn busy_runner_sent_to_delete_by_a_rule_keeps_its_instance() {
    let world = World::new(5);
    let runner = active_runner(&world, 6).await;
    let runner_id = runner.github_runner_id.expect("registered");
    world.forge.set_busy(runner_id, true);
    let instance_id = runner.instance_id.clone().expect("instance");
    world.fleet.set_state(&instance_id, InstanceState::Stopping);
    let report = world
        .reaper()
        .run(now() + minutes(5), far())
        .await
        .expect("run");
    assert_eq!((report.sent_to_delete, report.busy), (1, 1), "{report:?}");
    assert_eq!(
        world.fleet.terminate_calls(),
        0,
        "never terminated while busy"
    );
}

#[tokio::test(start_paused = true)]
async fn runner_that_ran_its_job_while_its_record_said_creating_is_cleaned() {
    let world = World::new(5);
    let mut runner = world.running_runner(11).await;
    // The delivery creating it died after handing over the JIT config, before it
    // wrote `running`; the runner came online all the same and took its job.
    runner.status = InstanceStatus::Creating;
    world.store.put_runner(runner.clone());
    world
        .scaler()
        .handle(
            &message(MessageKind::InProgress, 11, Some(&runner.name)),
            now(),
        )
        .await
        .expect("bound");
    // The job ended, the instance shut itself down, and `completed` was lost.
    world.forge.set_job_state(11, ForgeJobState::Completed);
    let instance_id = runner.instance_id.clone().expect("instance");
    world
        .fleet
        .set_state(&instance_id, InstanceState::Terminated);
    let reaper = world.reaper();
    for minute in [2, 5] {
        reaper
            .run(now() + minutes(minute), far())
            .await
            .expect("run");
    }
    assert_cleaned(&world, &runner);
}

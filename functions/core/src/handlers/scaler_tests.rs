use super::*;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::memory::{FleetFailure, ForgeFailure};

#[tokio::test]
async fn queued_job_gets_one_running_runner_with_its_jit_config_delivered() {
    let world = World::new(5);
    let handled = world
        .scaler()
        .handle(&message(MessageKind::Queued, 1, None), now())
        .await
        .expect("handled");
    let Handled::RunnerUp(name) = handled else {
        panic!("no runner: {handled:?}")
    };
    let runner = world.store.runner(&name).expect("record");
    assert_eq!(runner.status, InstanceStatus::Running);
    assert_eq!(runner.runner_status, RunnerStatus::Pending);
    assert!(name.starts_with("eph-linux-"));
    let instance_id = runner.instance_id.clone().expect("instance recorded");
    let (secret_owner, _) = world
        .secrets
        .get(&instance_id)
        .expect("JIT config delivered to the instance");
    assert_eq!(secret_owner, name);
    assert!(runner.github_runner_id.is_some());
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), Some(name));
    assert_eq!(world.store.slots_used(POOL), 1);
}

#[tokio::test]
async fn duplicate_deliveries_give_one_runner() {
    let world = World::new(5);
    let scaler = world.scaler();
    for _ in 0..3 {
        scaler
            .handle(&message(MessageKind::Queued, 7, None), now())
            .await
            .expect("handled");
    }
    assert_eq!(world.store.runners().len(), 1);
    assert_eq!(world.fleet.launched_specs().len(), 1);
    assert_eq!(world.forge.calls().generate_jit_config, 1);
    assert_eq!(world.store.slots_used(POOL), 1);
}

#[tokio::test]
async fn scale_up_never_exceeds_max_runners() {
    let world = World::new(2);
    let scaler = world.scaler();
    let mut full = 0;
    for job in 1..=5 {
        match scaler
            .handle(&message(MessageKind::Queued, job, None), now())
            .await
        {
            Ok(_) => {}
            Err(ScalerError::PoolFull(_)) => full += 1,
            Err(err) => panic!("{err}"),
        }
    }
    assert_eq!(
        full, 3,
        "jobs over capacity fail, to be retried by the queue"
    );
    assert_eq!(world.fleet.launched_specs().len(), 2);
    assert_eq!(world.store.slots_used(POOL), 2);
    assert!(
        world
            .store
            .jobs()
            .iter()
            .filter(|j| j.runner_name.is_none())
            .count()
            == 3
    );
}

#[tokio::test]
async fn transient_failure_is_retried_and_resumes_without_a_second_instance() {
    let world = World::new(5);
    let scaler = world.scaler();
    world.forge.fail_next_with(1, ForgeFailure::Transient);
    let first = scaler
        .handle(&message(MessageKind::Queued, 3, None), now())
        .await;
    assert!(
        matches!(first, Err(ScalerError::Creation { .. })),
        "{first:?}"
    );
    let half_done = world.store.runners().pop().expect("record");
    assert_eq!(half_done.status, InstanceStatus::Creating);
    assert!(half_done.instance_id.is_some());

    let retried = scaler
        .handle(&message(MessageKind::Queued, 3, None), now())
        .await
        .expect("retry works");
    assert_eq!(retried, Handled::RunnerUp(half_done.name.clone()));
    assert_eq!(
        world.fleet.launched_specs().len(),
        1,
        "the retry reused the instance"
    );
    assert_eq!(
        world.store.runner(&half_done.name).map(|r| r.status),
        Some(InstanceStatus::Running)
    );
}

#[tokio::test]
async fn capacity_error_marks_the_runner_error_and_frees_the_job_for_a_retry() {
    let world = World::new(5);
    let scaler = world.scaler();
    world
        .fleet
        .fail_launch_with(Some(FleetFailure::CapacityUnavailable));
    let failed = scaler
        .handle(&message(MessageKind::Queued, 4, None), now())
        .await;
    assert!(failed.is_err());
    let broken = world.store.runners().pop().expect("record");
    assert_eq!(broken.status, InstanceStatus::Error);
    assert!(
        broken
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("capacity"),
        "{broken:?}"
    );
    assert_eq!(world.store.job(4).and_then(|j| j.runner_name), None);

    world.fleet.fail_launch_with(None);
    scaler
        .handle(&message(MessageKind::Queued, 4, None), now())
        .await
        .expect("retry launches afresh");
    let names: Vec<_> = world
        .store
        .runners()
        .into_iter()
        .map(|r| (r.name, r.status))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[tokio::test]
async fn in_progress_binds_and_completed_sends_the_runner_to_be_reaped() {
    let world = World::new(5);
    let scaler = world.scaler();
    let Handled::RunnerUp(name) = scaler
        .handle(&message(MessageKind::Queued, 9, None), now())
        .await
        .expect("up")
    else {
        panic!("no runner")
    };
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
    assert!(world.fleet.launched_specs().is_empty());
}

#[tokio::test]
async fn poison_message_fails_alone_in_its_batch() {
    let world = World::new(10);
    let scaler = world.scaler();
    let mut items: Vec<BatchItem> = (1..=9)
        .map(|job| BatchItem {
            message_id: format!("m{job}"),
            body: message(MessageKind::Queued, job, None).encode(),
        })
        .collect();
    items.push(BatchItem {
        message_id: "poison".into(),
        body: "{\"v\": 9}".into(),
    });
    let failed = scaler.handle_batch(items, now()).await;
    assert_eq!(failed, vec!["poison".to_owned()]);
    assert_eq!(world.store.runners().len(), 9);
}

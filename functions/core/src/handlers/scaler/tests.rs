use super::*;
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::memory::{FleetFailure, ForgeFailure};

async fn up(world: &World, job: u64) -> String {
    match world
        .scaler()
        .handle(&message(MessageKind::Queued, job, None), now())
        .await
    {
        Ok(Handled::RunnerUp(name)) => name,
        other => panic!("no runner for job {job}: {other:?}"),
    }
}

fn batch(jobs: impl IntoIterator<Item = u64>) -> Vec<BatchItem> {
    jobs.into_iter()
        .map(|job| BatchItem {
            message_id: format!("m{job}"),
            body: message(MessageKind::Queued, job, None).encode(),
        })
        .collect()
}

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
async fn an_ami_pool_launches_through_the_deployments_template_with_its_image() {
    let mut world = World::new(5);
    let text = world_config_text("[linux]").replace("launch_template: eph-runner", "ami: ami-1");
    world.config = Arc::new(crate::config::Config::parse("t.yaml", &text).expect("valid"));
    up(&world, 1).await;
    let requests = world.fleet.launch_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].launch_template, "eph-runner");
    assert_eq!(requests[0].ami.as_deref(), Some("ami-1"));
}

fn world_config_text(labels: &str) -> String {
    format!(
        "deployment: eph\ngithub: {{ app_id: 1 }}\npools:\n  - {{ name: {POOL}, labels: {labels}, \
         max_runners: 5, instance_types: [m7i.large], launch_template: eph-runner }}\n"
    )
}

#[tokio::test]
async fn duplicate_deliveries_give_one_runner() {
    let world = World::new(5);
    let scaler = world.scaler();
    // In one batch, and again later.
    let mut items = batch([7, 7, 7]);
    for (i, item) in items.iter_mut().enumerate() {
        item.message_id = format!("m{i}");
    }
    let failed = scaler.handle_batch(items, now()).await;
    assert!(failed.len() <= 2, "{failed:?}");
    scaler
        .handle(&message(MessageKind::Queued, 7, None), now())
        .await
        .expect("handled");
    assert_eq!(world.store.runners().len(), 1);
    assert_eq!(world.fleet.launched(), 1);
    assert_eq!(world.forge.calls().generate_jit_config, 1);
    assert_eq!(world.store.slots_used(POOL), 1);
}

#[tokio::test]
async fn jobs_of_one_pool_in_a_batch_share_one_fleet_request() {
    let world = World::new(10);
    let failed = world.scaler().handle_batch(batch(1..=6), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(world.fleet.launch_calls(), 1);
    assert_eq!(world.fleet.launch_requests()[0].count, 6);
    let running = world
        .store
        .runners()
        .into_iter()
        .filter(|r| r.status == InstanceStatus::Running)
        .count();
    assert_eq!(running, 6);
}

#[tokio::test]
async fn scale_up_never_exceeds_max_runners_and_defers_the_rest() {
    let world = World::new(2);
    let failed = world.scaler().handle_batch(batch(1..=5), now()).await;
    assert!(
        failed.is_empty(),
        "deferred jobs are not failures: {failed:?}"
    );
    assert_eq!(world.fleet.launched(), 2);
    assert_eq!(world.store.slots_used(POOL), 2);
    let deferred: Vec<u64> = world.queue.sent().iter().map(|m| m.job_id).collect();
    assert_eq!(deferred.len(), 3, "jobs over capacity go back to the queue");
    assert!(world
        .queue
        .delays()
        .iter()
        .all(|d| (CAPACITY_RETRY..=CAPACITY_RETRY.mul_f64(1.5)).contains(d)));
}

#[tokio::test]
async fn spot_capacity_error_falls_back_to_on_demand() {
    let mut world = World::new(5);
    world.config = config_with(5, "    spot: true\n");
    world
        .fleet
        .fail_market_with(Market::Spot, Some(FleetFailure::CapacityUnavailable));
    let failed = world.scaler().handle_batch(batch(1..=3), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    let requests = world.fleet.launch_requests();
    assert_eq!(
        requests.len(),
        1,
        "only the on-demand request made instances"
    );
    assert_eq!(
        (requests[0].market, requests[0].count),
        (Market::OnDemand, 3)
    );
    assert_eq!(
        world.fleet.launch_calls(),
        2,
        "one spot request, one fallback"
    );
}

#[tokio::test]
async fn partial_spot_launch_is_topped_up_on_demand() {
    let mut world = World::new(5);
    world.config = config_with(5, "    spot: true\n");
    world.fleet.cap_launches(Some(2));
    let failed = world.scaler().handle_batch(batch(1..=3), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    let requests: Vec<_> = world
        .fleet
        .launch_requests()
        .into_iter()
        .map(|r| (r.market, r.count))
        .collect();
    assert_eq!(requests, [(Market::Spot, 3), (Market::OnDemand, 1)]);
}

#[tokio::test]
async fn transient_failure_is_retried_after_the_lease_and_reuses_the_instance() {
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
async fn capacity_error_releases_the_slot_at_once_and_frees_the_job_for_a_retry() {
    let world = World::new(1);
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
    assert!(!broken.slot_held);
    assert!(
        broken
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("capacity"),
        "{broken:?}"
    );
    assert_eq!(
        world.store.slots_used(POOL),
        0,
        "slot given back when the launch failed"
    );
    assert_eq!(world.store.job(4).and_then(|j| j.runner_name), None);

    world.fleet.fail_launch_with(None);
    scaler
        .handle(&message(MessageKind::Queued, 4, None), now())
        .await
        .expect("retry launches afresh");
    assert_eq!(world.store.runners().len(), 2);
    assert_eq!(world.store.slots_used(POOL), 1);
}

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
async fn poison_message_fails_alone_in_its_batch() {
    let world = World::new(10);
    let mut items = batch(1..=9);
    items.push(BatchItem {
        message_id: "poison".into(),
        body: "{\"v\": 9}".into(),
    });
    let failed = world.scaler().handle_batch(items, now()).await;
    assert_eq!(failed, vec!["poison".to_owned()]);
    assert_eq!(world.store.runners().len(), 9);
}

#[tokio::test]
async fn runner_taking_a_job_that_had_claimed_a_runner_hands_its_own_job_over() {
    let world = World::new(5);
    let scaler = world.scaler();
    let runner_a = up(&world, 1).await;
    let runner_b = up(&world, 2).await;
    // GitHub gives job 2 to runner A, launched for job 1.
    scaler
        .handle(&message(MessageKind::InProgress, 2, Some(&runner_a)), now())
        .await
        .expect("handled");
    assert_eq!(
        world.store.job(1).and_then(|j| j.runner_name),
        Some(runner_b.clone()),
        "job 1 now waits for runner B"
    );
    assert_eq!(
        world.store.runner(&runner_b).and_then(|r| r.job_id),
        Some(1)
    );
    assert_eq!(
        world.store.runner(&runner_a).and_then(|r| r.job_id),
        Some(2)
    );
    assert!(world.queue.sent().is_empty(), "no new runner needed");
    assert_eq!(world.store.runners().len(), 2);
}

#[tokio::test]
async fn runner_taking_a_job_without_a_runner_sends_its_own_job_back_to_the_queue() {
    let world = World::new(5);
    let scaler = world.scaler();
    let runner_a = up(&world, 1).await;
    // Job 2 never got a runner (its message waits for capacity); runner A takes it.
    scaler
        .handle(&message(MessageKind::InProgress, 2, Some(&runner_a)), now())
        .await
        .expect("handled");
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), None);
    let sent = world.queue.take();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!((sent[0].kind, sent[0].job_id), (MessageKind::Queued, 1));
    // The message gives job 1 a runner of its own, once GitHub says it still waits.
    world.forge.set_job_state(1, ForgeJobState::Queued);
    let name = match scaler.handle(&sent[0], now()).await {
        Ok(Handled::RunnerUp(name)) => name,
        other => panic!("{other:?}"),
    };
    assert_ne!(name, runner_a);
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), Some(name));
}

#[tokio::test]
async fn a_job_queued_again_for_its_taken_runner_gets_none_if_github_gave_it_one() {
    let world = World::new(5);
    let scaler = world.scaler();
    let runner_a = up(&world, 1).await;
    scaler
        .handle(&message(MessageKind::InProgress, 2, Some(&runner_a)), now())
        .await
        .expect("handled");
    let sent = world.queue.take();
    assert_eq!((sent[0].kind, sent[0].job_id), (MessageKind::Queued, 1));
    // Another runner took job 1 meanwhile; its webhooks have not come yet.
    world.forge.set_job_state(1, ForgeJobState::InProgress);
    let handled = scaler.handle(&sent[0], now()).await.expect("handled");
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
async fn deferred_job_of_a_full_pool_is_dropped_once_the_table_knows_it_is_over() {
    let world = World::new(1);
    let scaler = world.scaler();
    let runner = up(&world, 1).await;
    // The pool is full. Job 2's `queued` is deferred, and recorded so the reaper knows it.
    let queued = message(MessageKind::Queued, 2, None);
    let first = scaler.handle(&queued, now()).await.expect("handled");
    assert_eq!(first, Handled::Deferred);
    assert_eq!(
        world.store.job(2).map(|j| j.status),
        Some(JobStatus::Queued)
    );
    // The pool's idle runner takes job 2 (as GitHub may: with a warm pool holding every
    // slot for good, every job is taken so) and the pool stays full.
    scaler
        .handle(&message(MessageKind::InProgress, 2, Some(&runner)), now())
        .await
        .expect("bound");
    world.queue.take();
    let again = scaler.handle(&queued, now()).await.expect("handled");
    assert_eq!(again, Handled::NothingToDo, "not deferred for ever");
    assert!(world.queue.sent().is_empty());
    assert_eq!(world.fleet.launched(), 1);
}

#[tokio::test]
async fn a_creation_failing_after_its_job_went_to_another_runner_is_reaped_not_retried() {
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
    world.forge.fail_next_with(1, ForgeFailure::Transient);
    let _ = scaler
        .handle(&message(MessageKind::Queued, 3, None), now())
        .await;
    let half_done = world.store.runners().pop().expect("record");
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

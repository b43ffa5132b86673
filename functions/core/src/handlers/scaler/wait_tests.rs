//! Wait: jobs over `max_runners` go back to the queue, delayed, and a job the table
//! knows is over is dropped; with a registration pace, jobs beyond their turn wait in the
//! queue, not on launched instances, and a throttled registration pauses the pace.

use super::testing::*;
use super::wait::MAX_QUEUE_DELAY;
use super::*;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::memory::ForgeFailure;
use crate::message::MessageKind;
use crate::model::JobStatus;
use crate::pace::RegistrationPace;

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

fn paced(world: &World, per_second: f64, burst: f64) -> Arc<Scaler> {
    let pace = Arc::new(RegistrationPace::new(per_second, burst));
    world.scaler_with(ScalerCapabilities {
        registration_pace: Some(pace),
        ..ScalerCapabilities::none()
    })
}

#[tokio::test(start_paused = true)]
async fn jobs_beyond_their_registration_turn_go_back_to_the_queue_unlaunched() {
    let world = World::new(10);
    // Two at once, then one a minute: the other two are a minute or more away.
    let scaler = paced(&world, 1.0 / 60.0, 2.0);
    let failed = scaler.handle_batch(batch(1..=4), now()).await;
    assert!(failed.is_empty(), "deferring is no failure: {failed:?}");
    assert_eq!(world.fleet.launched(), 2);
    assert_eq!(world.forge.calls().generate_jit_config, 2);
    assert_eq!(world.store.slots_used(POOL), 2);
    let back = world.queue.sent();
    assert_eq!(
        back.len(),
        2,
        "the two jobs beyond their turn wait in the queue"
    );
    for delay in world.queue.delays() {
        assert!(delay >= Duration::from_secs(60), "{delay:?}");
        assert!(delay <= MAX_QUEUE_DELAY, "{delay:?}");
    }
    for job in back {
        assert!(
            world.store.job(job.job_id).is_none(),
            "a job waiting for its turn is not recorded (the reaper does not ask about it)"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_turn_is_near_waits_in_the_invocation() {
    let world = World::new(10);
    let scaler = paced(&world, 1.0, 1.0);
    let failed = scaler.handle_batch(batch(1..=3), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        world.fleet.launched(),
        3,
        "waits of 1 s and 2 s are within PACE_WAIT"
    );
    assert!(world.queue.sent().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_throttled_registration_gives_its_slot_back_and_pauses_the_pace() {
    let world = World::new(10);
    let scaler = paced(&world, 100.0, 100.0);
    world.forge.fail_next_with(1, ForgeFailure::Throttled);
    let failed = scaler.handle_batch(batch([1]), now()).await;
    assert_eq!(failed, ["m1"], "retried, once, by the queue");
    assert_eq!(world.store.slots_used(POOL), 0, "slot given back at once");
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), None);
    // The retry finds the pace paused for GitHub's minute: the job waits in the queue.
    let failed = scaler.handle_batch(batch([1]), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(world.fleet.launched(), 1, "no second instance while paused");
    let delays = world.queue.delays();
    assert_eq!(delays.len(), 1);
    assert!(delays[0] >= Duration::from_secs(50), "{delays:?}");
}

#[tokio::test(start_paused = true)]
async fn a_turn_taken_by_a_job_already_running_goes_to_the_next_job() {
    let world = World::new(10);
    // One registration now, the next a minute away.
    let scaler = paced(&world, 1.0 / 60.0, 1.0);
    // Job 1 was taken by a runner launched for another job before its turn came.
    let running = BatchItem {
        message_id: "running".to_owned(),
        body: message(MessageKind::InProgress, 1, Some("eph-linux-other")).encode(),
    };
    assert!(scaler.handle_batch(vec![running], now()).await.is_empty());
    let failed = scaler.handle_batch(batch([1, 2]), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        world.fleet.launched(),
        1,
        "job 2 has the turn job 1 did not need"
    );
    assert!(
        world.queue.sent().is_empty(),
        "nothing waits for a later turn"
    );
}

//! Hand-over of a job whose runner took another: only to a runner whose labels cover the
//! job, noted in that runner's history, and a runner still in creation is resumed at once.

use super::testing::{a_takes_job_2_without_a_runner, b_claimed_for_job_2, up};
use super::*;
use crate::handlers::test_support::{message, now, World};
use crate::lifecycle::InstanceStatus;
use crate::message::MessageKind;

/// Runner A (launched for job 1) takes job 2, whose runner is B.
async fn a_takes_job_2(world: &World, runner_a: &str) {
    world
        .scaler()
        .handle(&message(MessageKind::InProgress, 2, Some(runner_a)), now())
        .await
        .expect("handled");
}

#[test]
fn a_runner_takes_a_job_when_it_has_every_wanted_label_ignoring_case() {
    let have = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let labels_cover = crate::routing::runner_takes;
    // A runner's labels are exactly those it registered with: `self-hosted` is among
    // them because registration adds it, not because it is implied here.
    assert!(labels_cover(
        &have(&["self-hosted", "Linux", "x64"]),
        &have(&["self-hosted", "linux", "X64"])
    ));
    assert!(!labels_cover(
        &have(&["linux", "x64"]),
        &have(&["linux", "gpu"])
    ));
    assert!(!labels_cover(
        &have(&["linux", "x64"]),
        &have(&["self-hosted", "linux"])
    ));
    assert!(labels_cover(&have(&["linux"]), &[]));
}

#[tokio::test]
async fn the_hand_over_is_in_the_receiving_runners_history() {
    let world = World::new(5);
    let runner_a = up(&world, 1).await;
    let runner_b = up(&world, 2).await;
    a_takes_job_2(&world, &runner_a).await;
    let b = world.store.runner(&runner_b).expect("record");
    assert_eq!(b.job_id, Some(1));
    let last = b.history.last().expect("history");
    assert_eq!((last.status, last.runner_status), (None, None));
    let note = last.reason.as_deref().unwrap_or_default();
    assert!(note.contains("now for job 1"), "{note}");
}

#[tokio::test]
async fn a_job_the_free_runners_labels_do_not_cover_goes_back_to_the_queue() {
    let world = World::new(5);
    let runner_a = up(&world, 1).await;
    let runner_b = up(&world, 2).await;
    // Job 1 asks for a GPU, which runner B does not have.
    let mut job = world.store.job(1).expect("job 1");
    job.labels.push("gpu".into());
    world.store.put_job(job);
    a_takes_job_2(&world, &runner_a).await;
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), None);
    assert_eq!(
        world.store.runner(&runner_b).and_then(|r| r.job_id),
        Some(2),
        "runner B is not given a job it cannot take"
    );
    let sent = world.queue.take();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!((sent[0].kind, sent[0].job_id), (MessageKind::Queued, 1));
}

#[tokio::test]
async fn a_job_handed_to_a_runner_in_creation_resumes_its_creation_at_once() {
    // One slot, held by runner A: the pool is full when B's creation resumes.
    let world = World::new(1);
    let scaler = world.scaler();
    let runner_a = up(&world, 1).await;
    // Job 2's runner B was claimed and its record written; then the scaler died.
    let runner_b = b_claimed_for_job_2(&world, InstanceStatus::PendingCreate, false);
    a_takes_job_2(&world, &runner_a).await;
    assert_eq!(
        world.store.job(1).and_then(|j| j.runner_name),
        Some(runner_b.clone())
    );
    let sent = world.queue.take();
    assert_eq!(sent.len(), 1, "the creation of B is resumed: {sent:?}");
    assert_eq!((sent[0].kind, sent[0].job_id), (MessageKind::Queued, 1));
    // That message creates runner B, now for job 1, even with the pool full.
    world.store.set_slots_used("linux", 1);
    let handled = scaler.handle(&sent[0], now()).await.expect("handled");
    assert_eq!(handled, Handled::RunnerUp(runner_b.clone()));
    let b = world.store.runner(&runner_b).expect("record");
    assert_eq!(b.status, InstanceStatus::Running);
    assert_eq!(b.job_id, Some(1));
    assert!(b.instance_id.is_some());
}

#[tokio::test]
async fn a_hand_over_follows_the_chain_of_taken_jobs_to_the_free_runner() {
    // Runners A, B and C were launched for jobs 1, 2 and 3. GitHub gave job 2 to A and
    // job 3 to B; the webhooks come late and out of order: job 2's `completed` first.
    let world = World::new(5);
    let scaler = world.scaler();
    let runner_a = up(&world, 1).await;
    let _runner_b = up(&world, 2).await;
    let runner_c = up(&world, 3).await;
    let runner_b = world.store.job(2).and_then(|j| j.runner_name).expect("B");
    let event = |kind, job, runner: &str| message(kind, job, Some(runner));
    for step in [
        event(MessageKind::Completed, 2, &runner_a),
        event(MessageKind::InProgress, 3, &runner_b),
        event(MessageKind::InProgress, 2, &runner_a),
    ] {
        scaler.handle(&step, now()).await.expect("handled");
    }
    // Job 1 lost runner A to job 2; B, launched for job 2, runs job 3; C, launched for
    // job 3, is the one no job waits for: job 1 is handed to it, and no runner is added.
    assert_eq!(
        world.store.job(1).and_then(|j| j.runner_name),
        Some(runner_c.clone())
    );
    assert_eq!(
        world.store.runner(&runner_c).and_then(|r| r.job_id),
        Some(1)
    );
    assert_eq!(world.queue.take(), vec![], "no job queued again");
}

#[tokio::test]
async fn a_hand_over_follows_a_longer_chain() {
    // As above, with one more link: C runs job 4, whose runner D is the free one.
    let world = World::new(5);
    let scaler = world.scaler();
    let runner_a = up(&world, 1).await;
    let runner_b = up(&world, 2).await;
    let runner_c = up(&world, 3).await;
    let _runner_d = up(&world, 4).await;
    let event = |kind, job, runner: &str| message(kind, job, Some(runner));
    for step in [
        event(MessageKind::Completed, 2, &runner_a),
        event(MessageKind::InProgress, 3, &runner_b),
        event(MessageKind::InProgress, 4, &runner_c),
        event(MessageKind::InProgress, 2, &runner_a),
    ] {
        scaler.handle(&step, now()).await.expect("handled");
    }
    // The chain A → B (runs 3) → C (runs 4) → D, launched for job 4, is free: job 1 is
    // handed to D.
    let d = world
        .store
        .job(4)
        .and_then(|j| j.launched_runner)
        .expect("D");
    assert_eq!(
        world.store.job(1).and_then(|j| j.runner_name),
        Some(d.clone())
    );
    assert_eq!(world.queue.take(), vec![]);
}

#[tokio::test]
async fn a_chain_that_ends_in_a_runner_on_its_way_out_queues_the_job_again() {
    let world = World::new(5);
    let scaler = world.scaler();
    let runner_a = up(&world, 1).await;
    let runner_b = up(&world, 2).await;
    let runner_c = up(&world, 3).await;
    // C, at the end of the chain, is being deleted: no job can be handed to it.
    let mut c = world.store.runner(&runner_c).expect("C");
    c.status = InstanceStatus::PendingDelete;
    world.store.put_runner(c);
    let event = |kind, job, runner: &str| message(kind, job, Some(runner));
    for step in [
        event(MessageKind::Completed, 2, &runner_a),
        event(MessageKind::InProgress, 3, &runner_b),
        event(MessageKind::InProgress, 2, &runner_a),
    ] {
        scaler.handle(&step, now()).await.expect("handled");
    }
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), None);
    let sent = world.queue.take();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!((sent[0].kind, sent[0].job_id), (MessageKind::Queued, 1));
}

/// Runner B runs for job 1 and job 1's claim names B: the hand-over is done.
fn assert_job_1_handed_to(world: &World, runner_b: &str) {
    assert_eq!(world.store.runner(runner_b).and_then(|r| r.job_id), Some(1));
    assert_eq!(
        world.store.job(1).and_then(|j| j.runner_name).as_deref(),
        Some(runner_b)
    );
}

#[tokio::test]
async fn a_hand_over_whose_transaction_fails_writes_nothing_then_the_retry_hands_over() {
    let world = World::new(5);
    let runner_a = up(&world, 1).await;
    let runner_b = up(&world, 2).await;
    world.store.fail(crate::memory::StoreOp::HandOverClaim, 1);
    let failed = world
        .scaler()
        .handle(&message(MessageKind::InProgress, 2, Some(&runner_a)), now())
        .await;
    assert!(failed.is_err(), "the delivery fails, to be retried");
    assert_eq!(
        world.store.runner(&runner_b).and_then(|r| r.job_id),
        Some(2),
        "B keeps its own job while job 1's claim is A's: never a runner the claim does not name"
    );
    assert_eq!(
        world.store.job(1).and_then(|j| j.runner_name),
        Some(runner_a.clone())
    );
    a_takes_job_2(&world, &runner_a).await;
    assert_job_1_handed_to(&world, &runner_b);
    assert!(world.queue.take().is_empty(), "no new runner for job 1");
}

#[tokio::test]
async fn a_hand_over_left_half_done_is_finished_not_undone() {
    let world = World::new(5);
    let runner_a = up(&world, 1).await;
    let runner_b = up(&world, 2).await;
    // A hand-over gave B job 1, then its process died before the claim passed.
    let mut b = world.store.runner(&runner_b).expect("B");
    b.job_id = Some(1);
    world.store.put_runner(b);
    a_takes_job_2(&world, &runner_a).await;
    assert_job_1_handed_to(&world, &runner_b);
    assert!(
        world.queue.take().is_empty(),
        "job 1 is not queued again for a runner of its own"
    );
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
    // Job 2 never got a runner (its message waits for capacity); runner A takes it.
    let (runner_a, sent) = a_takes_job_2_without_a_runner(&world, &scaler).await;
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), None);
    // The message gives job 1 a runner of its own, once GitHub says it still waits.
    world.forge.set_job_state(1, ForgeJobState::Queued);
    let name = match scaler.handle(&sent, now()).await {
        Ok(Handled::RunnerUp(name)) => name,
        other => panic!("{other:?}"),
    };
    assert_ne!(name, runner_a);
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), Some(name));
}

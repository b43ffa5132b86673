//! Claims under conflict: a claim that loses races on the pool item is tried again after
//! a jittered wait, and one that keeps losing goes back in line, never failing its
//! message.

use super::claim::{claim_wait, CLAIM_FIRST_WAIT, CLAIM_MAX_WAIT, CLAIM_TRIES, CONTENDED_RETRY};
use super::*;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::memory::StoreOp;
use crate::message::MessageKind;
use std::collections::HashSet;

#[test]
fn claim_waits_are_jittered_below_a_doubling_bound() {
    for tries in 1..=CLAIM_TRIES {
        let bound = CLAIM_FIRST_WAIT
            .saturating_mul(1 << (tries - 1))
            .min(CLAIM_MAX_WAIT);
        for _ in 0..20 {
            assert!(
                claim_wait(tries, ThreadJitter.unit()) <= bound,
                "try {tries}"
            );
        }
    }
    let waits: HashSet<Duration> = (0..20)
        .map(|_| claim_wait(6, ThreadJitter.unit()))
        .collect();
    assert!(waits.len() > 1, "waits are drawn at random");
}

#[tokio::test(start_paused = true)]
async fn a_claim_that_loses_a_few_races_still_launches() {
    let world = World::new(5);
    world.store.conflict(StoreOp::ClaimJob, CLAIM_TRIES - 1);
    let handled = world
        .scaler()
        .handle(&message(MessageKind::Queued, 1, None), now())
        .await
        .expect("handled");
    assert!(matches!(handled, Handled::RunnerUp(_)), "{handled:?}");
    assert_eq!(world.store.slots_used(POOL), 1);
    assert!(world.queue.sent().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_claim_that_keeps_losing_races_goes_back_in_line_without_failing() {
    let world = World::new(5);
    world.store.conflict(StoreOp::ClaimJob, CLAIM_TRIES);
    let items = vec![BatchItem {
        message_id: "m1".into(),
        body: message(MessageKind::Queued, 1, None).encode(),
    }];
    let failed = world.scaler().handle_batch(items, now()).await;
    assert!(
        failed.is_empty(),
        "a conflict is not a failed message: {failed:?}"
    );
    let again = world.queue.sent();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].job_id, 1);
    assert!(world.queue.delays()[0] >= CONTENDED_RETRY);
    assert!(world.store.runners().is_empty());
    assert_eq!(world.store.slots_used(POOL), 0);
    assert_eq!(world.store.job(1).and_then(|j| j.runner_name), None);
}

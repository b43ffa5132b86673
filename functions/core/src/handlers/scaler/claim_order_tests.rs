//! The claims of one batch take the pool item one after another: DynamoDB cancels a
//! transaction on an item another transaction holds, so claims sent all at once would
//! mostly conflict with each other.

use super::*;
use crate::handlers::test_support::{message, now, World};
use crate::memory::{Call, Hook, Intercept, Refusal};
use crate::message::MessageKind;
use std::sync::atomic::{AtomicU32, Ordering};

/// Claims that take a while, counted when one starts while another is under way, as
/// DynamoDB refuses overlapping transactions on the pool item.
#[derive(Default)]
struct OverlapCounter {
    claiming: AtomicU32,
    overlaps: AtomicU32,
}

#[async_trait::async_trait]
impl Hook for OverlapCounter {
    async fn before(&self, call: &Call<'_>) -> Result<(), Refusal> {
        if call.is("claim_job") {
            if self.claiming.fetch_add(1, Ordering::SeqCst) > 0 {
                self.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
            self.claiming.fetch_sub(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn the_claims_of_a_batch_never_hold_the_pool_item_at_once() {
    let world = World::new(20);
    let counter = Arc::new(OverlapCounter::default());
    let store = Intercept::new(world.store.clone(), &counter);
    let scaler = Arc::new(Scaler::bare(
        world.config.clone(),
        store.clone(),
        world.fleet.clone(),
        world.forge.clone(),
        world.jit_store.clone(),
        world.queue.clone(),
    ));
    let items = (1..=10)
        .map(|job| BatchItem {
            message_id: format!("m{job}"),
            body: message(MessageKind::Queued, job, None).encode(),
        })
        .collect();
    let failed = scaler.handle_batch(items, now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(world.fleet.launched(), 10);
    assert_eq!(
        counter.overlaps.load(Ordering::SeqCst),
        0,
        "claims overlapped"
    );
}

//! The batch: duplicate deliveries, one fleet request per pool, a bad body failing alone.

use super::testing::*;
use super::*;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::lifecycle::InstanceStatus;
use crate::message::MessageKind;

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

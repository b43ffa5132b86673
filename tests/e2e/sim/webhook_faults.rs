//! The simulator's webhook faults as a receiver sees them: deliveries lost, sent twice
//! with one delivery id, and held back so that a later one arrives first.

use super::{config, Receiver};
use ephemera_core::webhook::JobAction;
use ephemera_tests::sim::{self, SimFaults};
use std::time::Duration;

#[tokio::test]
async fn lost_deliveries_never_arrive_and_are_counted() -> anyhow::Result<()> {
    let (receiver, url) = Receiver::start().await?;
    let mut config = config("eph");
    config.webhook_url = Some(url);
    config.faults = SimFaults {
        lost_webhooks: 1.0,
        ..SimFaults::default()
    };
    let sim = sim::start(config).await?;
    sim.create_job("acme", "app", &["linux"], None).await?;
    sim.set_faults(SimFaults::default());
    let kept = sim.create_job("acme", "app", &["linux"], None).await?;
    receiver.wait_for(1, Duration::from_secs(5)).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let events = receiver.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1, kept);
    let counters = sim.snapshot().counters;
    assert_eq!((counters.webhooks_lost, counters.webhooks_sent), (1, 1));
    Ok(())
}

#[tokio::test]
async fn duplicated_deliveries_arrive_twice_with_one_delivery_id() -> anyhow::Result<()> {
    let (receiver, url) = Receiver::start().await?;
    let mut config = config("eph");
    config.webhook_url = Some(url);
    config.faults = SimFaults {
        duplicate_webhooks: 1.0,
        ..SimFaults::default()
    };
    let sim = sim::start(config).await?;
    let job_id = sim.create_job("acme", "app", &["linux"], None).await?;
    receiver.wait_for(2, Duration::from_secs(5)).await?;
    let events = receiver.events();
    assert!(events
        .iter()
        .all(|e| (e.0, e.1) == (JobAction::Queued, job_id)));
    let ids = receiver.delivery_ids();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "a redelivery keeps its delivery id");
    assert_eq!(sim.snapshot().counters.webhooks_duplicated, 1);
    Ok(())
}

#[tokio::test]
async fn a_held_back_delivery_is_overtaken_by_a_later_one() -> anyhow::Result<()> {
    let (receiver, url) = Receiver::start().await?;
    let mut config = config("eph");
    config.webhook_url = Some(url);
    config.faults = SimFaults {
        reordered_webhooks: 1.0,
        reorder_delay: Duration::from_millis(400),
        ..SimFaults::default()
    };
    let sim = sim::start(config).await?;
    let first = sim.create_job("acme", "app", &["linux"], None).await?;
    sim.set_faults(SimFaults::default());
    let second = sim.create_job("acme", "app", &["linux"], None).await?;
    receiver.wait_for(2, Duration::from_secs(5)).await?;
    let order: Vec<u64> = receiver.events().iter().map(|e| e.1).collect();
    assert_eq!(order, [second, first]);
    assert_eq!(sim.snapshot().counters.webhooks_delayed, 1);
    Ok(())
}

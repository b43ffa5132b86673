//! The redelivery sweep's pace on the in-memory deliveries: GitHub's content-creation
//! limits kept over runs, and its secondary limit's wait obeyed.

use super::redeliver::{
    CONTENT_CREATION_PER_HOUR, CONTENT_CREATION_PER_MINUTE, REDELIVERIES_PER_RUN,
};
use super::*;
use crate::handlers::test_support::{now, World};
use crate::memory::MemoryDeliveries;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn delivery(id: u64, guid: &str, status_code: u16) -> HookDelivery {
    HookDelivery {
        id,
        guid: guid.to_owned(),
        event: "workflow_job".to_owned(),
        action: Some("queued".to_owned()),
        status_code,
        delivered_at: now(),
        redelivery: false,
    }
}

/// GitHub allows an App 80 content-generating requests a minute and 500 an hour: a
/// sweep with 700 failed events, run every minute for an hour, asks for no more in any
/// minute or in the hour, and goes on asking as the allowance frees up.
#[tokio::test(start_paused = true)]
async fn the_sweep_keeps_to_githubs_content_creation_limits_a_minute_and_an_hour() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    for id in 1..=700 {
        deliveries.record(delivery(id, &format!("g{id}"), 503));
    }
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    let mut per_run = Vec::new();
    for minute in 0..60i64 {
        let at = now() + time::Duration::minutes(minute);
        let before = deliveries.redelivery_asks();
        reaper.run(at, far()).await.expect("run");
        per_run.push(deliveries.redelivery_asks() - before);
        tokio::time::advance(Duration::from_secs(60)).await;
    }
    assert_eq!(per_run[0], REDELIVERIES_PER_RUN, "{per_run:?}");
    assert!(
        per_run
            .iter()
            .all(|&n| n as f64 <= CONTENT_CREATION_PER_MINUTE),
        "a run a minute, none over the minute's limit: {per_run:?}"
    );
    let hour: usize = per_run.iter().sum();
    assert_eq!(
        hour as f64, CONTENT_CREATION_PER_HOUR,
        "the hour's allowance, all of it and no more: {per_run:?}"
    );
    // An hour after the first asks, the allowance frees up again.
    let before = deliveries.redelivery_asks();
    reaper
        .run(now() + time::Duration::minutes(60), far())
        .await
        .expect("run");
    assert!(deliveries.redelivery_asks() > before);
}

/// GitHub's secondary limit answers a redelivery with 403 and `retry-after`: the sweep
/// stops asking at once, and asks nothing more until that wait has passed.
#[tokio::test(start_paused = true)]
async fn a_secondary_limit_stops_the_sweep_until_githubs_retry_after() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    for id in 1..=10 {
        deliveries.record(delivery(id, &format!("g{id}"), 502));
    }
    deliveries.throttle_next(Some(Duration::from_secs(120)));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    let first = reaper.run(now(), far()).await.expect("run");
    assert_eq!(first.redelivered, 0);
    assert_eq!(deliveries.redelivery_asks(), 1, "no ask after the refusal");
    tokio::time::advance(Duration::from_secs(60)).await;
    let paused = reaper
        .run(now() + time::Duration::minutes(1), far())
        .await
        .expect("run");
    assert_eq!(paused.redelivered, 0);
    assert_eq!(
        deliveries.redelivery_asks(),
        1,
        "still within GitHub's wait"
    );
    tokio::time::advance(Duration::from_secs(61)).await;
    let after = reaper
        .run(now() + time::Duration::minutes(2), far())
        .await
        .expect("run");
    assert_eq!(after.redelivered, 10);
}

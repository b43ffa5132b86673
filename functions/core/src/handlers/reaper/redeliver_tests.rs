//! The redelivery sweep on the in-memory deliveries: failed `workflow_job` deliveries
//! asked again, from where the last sweep stopped, spaced while they keep failing, and a
//! lone job whose only `queued` delivery failed run through it.

use super::redeliver::{retry_after, DELIVERY_LOOKBACK, FIRST_RETRY, LONGEST_RETRY};
use super::*;
use crate::handlers::scaler::Handled;
use crate::handlers::test_support::{message, now, World};
use crate::memory::MemoryDeliveries;
use crate::message::MessageKind;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn delivery(id: u64, guid: &str, event: &str, status_code: u16) -> HookDelivery {
    HookDelivery {
        id,
        guid: guid.to_owned(),
        event: event.to_owned(),
        action: Some("queued".to_owned()),
        status_code,
        delivered_at: now(),
        redelivery: false,
    }
}

#[tokio::test(start_paused = true)]
async fn failed_workflow_job_events_no_attempt_delivered_are_asked_for_their_newest_attempt() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    for (id, guid, event, status) in [
        (1, "a", "workflow_job", 502),
        (2, "b", "workflow_job", 503),
        (3, "c", "workflow_job", 0),
        (4, "p", "ping", 500),
        (5, "b", "workflow_job", 200),
        (6, "c", "workflow_job", 503),
    ] {
        deliveries.record(delivery(id, guid, event, status));
    }
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    reaper.run(now(), far()).await.expect("run");
    assert_eq!(
        deliveries.redelivered(),
        [1, 6],
        "a: failed; b: delivered on its retry; c: its newest attempt; p: not a job's"
    );
}

#[tokio::test(start_paused = true)]
async fn each_failed_delivery_is_redelivered_once_from_where_the_last_sweep_stopped() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(2));
    for (id, status) in [(1, 200), (2, 503), (3, 200), (4, 502), (5, 200)] {
        deliveries.record(delivery(id, &format!("g{id}"), "workflow_job", status));
    }
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    let report = reaper.run(now(), far()).await.expect("run");
    assert_eq!(report.redelivered, 2);
    assert_eq!(deliveries.redelivered(), [2, 4]);
    let calls = deliveries.list_calls();
    assert_eq!(calls, 3, "five deliveries, two a page");
    // Nothing new: one page read, up to where the last sweep stopped; nothing asked.
    let again = reaper.run(now(), far()).await.expect("run");
    assert_eq!(again.redelivered, 0);
    assert_eq!(deliveries.list_calls(), calls + 1);
    // A new failure is asked for, and only it.
    deliveries.record(delivery(6, "g6", "workflow_job", 500));
    reaper.run(now(), far()).await.expect("run");
    assert_eq!(deliveries.redelivered(), [2, 4, 6]);
}

#[tokio::test(start_paused = true)]
async fn deliveries_a_run_has_no_pages_left_for_are_read_by_the_next_runs() {
    use super::redeliver::PAGES_PER_RUN;
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(2));
    let per_run = 2 * PAGES_PER_RUN as u64;
    let total = 2 * per_run + 5;
    let failed = [1, per_run + 2, total];
    for id in 1..=total {
        let status = if failed.contains(&id) { 503 } else { 200 };
        deliveries.record(delivery(id, &format!("g{id}"), "workflow_job", status));
    }
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    reaper.run(now(), far()).await.expect("run");
    assert_eq!(deliveries.redelivered(), [total], "the newest pages first");
    // A new failure arrives; the next run reads it, then goes on below the first run.
    deliveries.record(delivery(total + 1, "new", "workflow_job", 502));
    reaper.run(now(), far()).await.expect("run");
    assert_eq!(deliveries.redelivered(), [total, per_run + 2, total + 1]);
    reaper.run(now(), far()).await.expect("run");
    assert_eq!(
        deliveries.redelivered(),
        [total, per_run + 2, total + 1, 1],
        "down to the oldest delivery"
    );
    let calls = deliveries.list_calls();
    reaper.run(now(), far()).await.expect("run");
    assert_eq!(deliveries.list_calls(), calls + 1, "all read: one page");
}

#[test]
fn asks_for_one_event_are_spaced_doubling_up_to_the_longest_wait() {
    let waits: Vec<u64> = (1..=8).map(|asks| retry_after(asks).as_secs()).collect();
    assert_eq!(FIRST_RETRY.as_secs(), 10);
    assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(retry_after(u32::MAX), LONGEST_RETRY);
}

/// Runs the reaper every `every` from `start` until `until`, each failed redelivery
/// recorded as a new failed attempt of its event (as GitHub lists it) while `refusing`.
async fn sweep_through(
    reaper: &Reaper,
    deliveries: &MemoryDeliveries,
    start: OffsetDateTime,
    every: Duration,
    until: OffsetDateTime,
    refusing: impl Fn(OffsetDateTime) -> bool,
) -> Vec<OffsetDateTime> {
    let mut asks_at = Vec::new();
    let mut next_id = 1000;
    let mut at = start;
    while at <= until {
        let before = deliveries.redelivered().len();
        reaper.run(at, far()).await.expect("run");
        for _ in before..deliveries.redelivered().len() {
            asks_at.push(at);
            next_id += 1;
            let status = if refusing(at) { 503 } else { 200 };
            let mut attempt = delivery(next_id, "g", "workflow_job", status);
            attempt.delivered_at = at;
            attempt.redelivery = true;
            deliveries.record(attempt);
        }
        at += every;
    }
    asks_at
}

#[tokio::test(start_paused = true)]
async fn an_event_refused_for_minutes_is_asked_again_until_an_attempt_is_delivered() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    deliveries.record(delivery(1, "g", "workflow_job", 503));
    // The endpoint refuses for 2 minutes; the reaper runs every 2 s.
    let start = now();
    let back_at = start + Duration::from_secs(120);
    let asks = sweep_through(
        &reaper,
        &deliveries,
        start,
        Duration::from_secs(2),
        start + Duration::from_secs(600),
        |at| at < back_at,
    )
    .await;
    let offsets: Vec<i64> = asks
        .iter()
        .map(|at| (*at - start).whole_seconds())
        .collect();
    // Asked at once, then 10, 20, 40 and 80 s after each failed ask: the fifth ask,
    // after the endpoint is back, is delivered and ends the asks.
    assert_eq!(offsets, [0, 10, 30, 70, 150], "{offsets:?}");
    assert!(asks.last().is_some_and(|at| *at >= back_at));
}

#[tokio::test(start_paused = true)]
async fn an_event_that_keeps_failing_is_given_up_past_the_lookback() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    deliveries.record(delivery(1, "g", "workflow_job", 503));
    let start = now();
    let lookback = time::Duration::try_from(DELIVERY_LOOKBACK).expect("lookback");
    let asks = sweep_through(
        &reaper,
        &deliveries,
        start,
        Duration::from_secs(60),
        start + lookback * 2,
        |_| true,
    )
    .await;
    let last = *asks.last().expect("asked");
    assert!(
        last <= start + lookback,
        "asked at {last} past the lookback"
    );
    // Within the hour: 10 s, 20 s, ... up to 5 min apart, the runs a minute apart.
    assert!((12..=20).contains(&asks.len()), "{} asks", asks.len());
}

/// Chaos seed 347853: the deliveries list could not be read for 52 minutes, so the
/// event's first ask came late in its hour and failed too; it must still be asked again.
#[tokio::test(start_paused = true)]
async fn an_event_first_seen_late_in_its_hour_is_asked_for_a_whole_lookback() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    deliveries.record(delivery(1, "g", "workflow_job", 503));
    let start = now();
    let first_sweep = start + Duration::from_secs(52 * 60);
    let back_at = start + Duration::from_secs(61 * 60);
    let asks = sweep_through(
        &reaper,
        &deliveries,
        first_sweep,
        Duration::from_secs(60),
        start + Duration::from_secs(90 * 60),
        |at| at < back_at,
    )
    .await;
    assert_eq!(asks.first(), Some(&first_sweep), "{asks:?}");
    let last = *asks.last().expect("asked");
    assert!(last >= back_at, "last asked at {last}, while still refused");
    assert_eq!(deliveries.redelivered().len(), asks.len());
}

/// Chaos seeds 396028 and 480173: the deliveries list could not be read for more than
/// an hour after the event failed; the first sweep that reads it must still find it.
#[tokio::test(start_paused = true)]
async fn an_event_failed_while_the_list_was_unreadable_for_an_hour_is_still_asked_for() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    let start = now();
    reaper.run(start, far()).await.expect("first run");
    let mut failed = delivery(1, "g", "workflow_job", 503);
    failed.delivered_at = start + Duration::from_secs(2 * 60);
    deliveries.record(failed);
    deliveries.fail_next(3);
    for minutes in [30, 50, 60] {
        reaper
            .run(start + Duration::from_secs(minutes * 60), far())
            .await
            .expect("run");
    }
    assert!(deliveries.redelivered().is_empty());
    reaper
        .run(start + Duration::from_secs(63 * 60), far())
        .await
        .expect("run");
    assert_eq!(deliveries.redelivered(), [1]);
}

#[tokio::test(start_paused = true)]
async fn a_delivery_getting_through_ends_the_wait_of_the_events_still_failed() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    deliveries.record(delivery(1, "g1", "workflow_job", 503));
    reaper.run(now(), far()).await.expect("run");
    let mut failed_again = delivery(2, "g1", "workflow_job", 503);
    failed_again.redelivery = true;
    deliveries.record(failed_again);
    reaper
        .run(now() + Duration::from_secs(2), far())
        .await
        .expect("run");
    assert_eq!(deliveries.redelivered(), [1], "waiting out its spacing");
    // Another event gets through: the endpoint is back.
    let mut through = delivery(3, "g2", "workflow_job", 200);
    through.delivered_at = now() + Duration::from_secs(3);
    deliveries.record(through);
    reaper
        .run(now() + Duration::from_secs(4), far())
        .await
        .expect("run");
    assert_eq!(deliveries.redelivered(), [1, 2]);
}

#[tokio::test(start_paused = true)]
async fn a_fresh_process_asks_for_what_its_predecessor_had_not_recovered() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    deliveries.record(delivery(1, "g1", "workflow_job", 503));
    let first = world.reaper().with_deliveries(deliveries.clone());
    first.run(now(), far()).await.expect("run");
    assert_eq!(deliveries.redelivered(), [1]);
    // Its redelivery failed too, and the process died before the next run.
    let mut again = delivery(2, "g1", "workflow_job", 0);
    again.redelivery = true;
    deliveries.record(again);
    deliveries.record(delivery(3, "g2", "workflow_job", 200));
    let second = world.reaper().with_deliveries(deliveries.clone());
    second
        .run(now() + Duration::from_secs(5), far())
        .await
        .expect("run");
    assert_eq!(
        deliveries.redelivered(),
        [1],
        "the spacing after its first ask is read back from GitHub's list"
    );
    second.run(now() + FIRST_RETRY, far()).await.expect("run");
    assert_eq!(
        deliveries.redelivered(),
        [1, 2],
        "the event's newest attempt"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lone_job_whose_only_queued_delivery_failed_runs_through_the_sweep() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    // The endpoint refused job 9's `queued`; nothing else happens after it.
    deliveries.record(delivery(41, "job-9-queued", "workflow_job", 503));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    let mut runner = None;
    let mut delivered_again = 0;
    for run in 0..3u64 {
        let at = now() + Duration::from_secs(60 * run);
        reaper.run(at, far()).await.expect("run");
        // GitHub delivers again what was asked, under a new id: the webhook turns it into
        // a message and answers 202.
        let asked = deliveries.redelivered();
        for (attempt, _) in asked[delivered_again..].iter().enumerate() {
            let mut redelivered =
                delivery(42 + attempt as u64, "job-9-queued", "workflow_job", 202);
            redelivered.redelivery = true;
            deliveries.record(redelivered);
            let queued = message(MessageKind::Queued, 9, None);
            if let Ok(Handled::RunnerUp(name)) = world.scaler().handle(&queued, at).await {
                runner = Some(name);
            }
        }
        delivered_again = asked.len();
    }
    let runner = runner.expect("job 9 got a runner");
    assert_eq!(world.store.job(9).and_then(|j| j.runner_name), Some(runner));
    assert_eq!(
        deliveries.redelivered(),
        [41],
        "asked once: its redelivery got through"
    );
}

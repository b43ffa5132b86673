//! The redelivery sweep's bounds, per event and read back from GitHub's list: a 4xx is
//! asked for [`REFUSED_ASKS`] times then given up and reported, a fresh process neither
//! asks beyond that nor reopens an hour's window, the endpoint coming back hurries an
//! event once only, and events that keep failing never crowd out a newer failure.

use super::failed_events::{refusal, REFUSED_ASKS};
use super::redeliver::{DELIVERY_LOOKBACK, REDELIVERIES_PER_RUN};
use super::*;
use crate::handlers::test_support::{now, World};
use crate::memory::MemoryDeliveries;
use crate::metrics::{Dimension, Metric, Metrics};

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn attempt(id: u64, guid: &str, status_code: u16, at: OffsetDateTime) -> HookDelivery {
    HookDelivery {
        id,
        guid: guid.to_owned(),
        event: "workflow_job".to_owned(),
        action: Some("queued".to_owned()),
        status_code,
        delivered_at: at,
        redelivery: false,
    }
}

/// Runs `reaper` every `every` from `from` until `until`; GitHub makes each ask at once,
/// as a new attempt that the endpoint answers `answer(at)`, and `others` sends one more
/// delivery that gets through before each run. Returns when the asks were.
async fn sweep(
    reaper: &Reaper,
    deliveries: &MemoryDeliveries,
    (from, every, until): (OffsetDateTime, Duration, OffsetDateTime),
    answer: impl Fn(OffsetDateTime) -> u16,
    others: bool,
) -> Vec<OffsetDateTime> {
    let mut asks_at = Vec::new();
    let mut at = from;
    while at <= until {
        let next_id = || deliveries.deliveries().last().map_or(1, |d| d.id + 1);
        if others {
            deliveries.record(attempt(next_id(), &format!("ok-{at}"), 202, at));
        }
        let before = deliveries.redelivered();
        reaper.run(at, far()).await.expect("run");
        for id in &deliveries.redelivered()[before.len()..] {
            asks_at.push(at);
            let asked = deliveries
                .delivery(*id)
                .expect("asked for a listed attempt");
            let mut again = attempt(next_id(), &asked.guid, answer(at), at);
            again.redelivery = true;
            deliveries.record(again);
        }
        at += every;
        // The sweep's pace runs on the process's clock: in step with the runs' times.
        tokio::time::advance(every).await;
    }
    asks_at
}

fn given_up(captured: &crate::metrics::Captured, reason: &str) -> f64 {
    let documents = captured.documents().expect("valid EMF");
    documents
        .iter()
        .filter(|d| d.dimension(Dimension::Reason) == Some(reason))
        .filter_map(|d| d.values(Metric::RedeliveriesGivenUp))
        .flatten()
        .sum()
}

#[test]
fn a_refusal_is_a_4xx_other_than_a_timeout_or_a_throttle() {
    assert!(refusal(401) && refusal(400) && refusal(413) && refusal(422));
    assert!(!refusal(408) && !refusal(429));
    assert!(!refusal(0) && !refusal(500) && !refusal(502) && !refusal(504));
}

#[tokio::test(start_paused = true)]
async fn an_event_refused_with_401_is_asked_for_a_bounded_number_of_times_then_reported() {
    let world = World::new(5);
    let (metrics, captured) = Metrics::capture("eph");
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world
        .reaper()
        .with_deliveries(deliveries.clone())
        .with_metrics(metrics);
    deliveries.record(attempt(1, "g", 401, now()));
    let hour = time::Duration::try_from(DELIVERY_LOOKBACK).expect("lookback");
    let window = (now(), Duration::from_secs(2), now() + hour);
    let asks = sweep(&reaper, &deliveries, window, |_| 401, false).await;
    assert_eq!(asks.len() as u32, REFUSED_ASKS, "{asks:?}");
    assert_eq!(given_up(&captured, "unauthorized"), 1.0);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_other_than_401_is_bounded_and_a_throttle_is_not() {
    let world = World::new(5);
    let (metrics, captured) = Metrics::capture("eph");
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world
        .reaper()
        .with_deliveries(deliveries.clone())
        .with_metrics(metrics);
    deliveries.record(attempt(1, "g", 413, now()));
    let window = (
        now(),
        Duration::from_secs(2),
        now() + Duration::from_secs(600),
    );
    let asks = sweep(&reaper, &deliveries, window, |_| 413, false).await;
    assert_eq!(asks.len() as u32, REFUSED_ASKS);
    assert_eq!(given_up(&captured, "refused"), 1.0);

    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    deliveries.record(attempt(1, "g", 429, now()));
    let asks = sweep(&reaper, &deliveries, window, |_| 429, false).await;
    assert!(asks.len() as u32 > REFUSED_ASKS, "{asks:?}");
}

#[tokio::test(start_paused = true)]
async fn a_fresh_process_neither_asks_beyond_the_bound_nor_reports_it_again() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    deliveries.record(attempt(1, "g", 401, now()));
    let first = world.reaper().with_deliveries(deliveries.clone());
    let window = (
        now(),
        Duration::from_secs(2),
        now() + Duration::from_secs(12),
    );
    let asks = sweep(&first, &deliveries, window, |_| 401, false).await;
    assert_eq!(asks.len(), 2, "{asks:?}");
    // The process dies; its successor reads the two asks back from the list.
    let (metrics, captured) = Metrics::capture("eph");
    let second = world
        .reaper()
        .with_deliveries(deliveries.clone())
        .with_metrics(metrics);
    let from = now() + Duration::from_secs(14);
    let window = (
        from,
        Duration::from_secs(2),
        from + Duration::from_secs(600),
    );
    let asks = sweep(&second, &deliveries, window, |_| 401, false).await;
    assert_eq!(asks.len() as u32, REFUSED_ASKS - 2, "{asks:?}");
    assert_eq!(given_up(&captured, "unauthorized"), 1.0, "it asked last");
    // A third process finds it given up: no ask, no second report.
    let (metrics, captured) = Metrics::capture("eph");
    let third = world
        .reaper()
        .with_deliveries(deliveries.clone())
        .with_metrics(metrics);
    let from = now() + Duration::from_secs(20 * 60);
    let window = (from, Duration::from_secs(2), from + Duration::from_secs(60));
    let asks = sweep(&third, &deliveries, window, |_| 401, false).await;
    assert!(asks.is_empty(), "{asks:?}");
    assert_eq!(given_up(&captured, "unauthorized"), 0.0);
}

#[tokio::test(start_paused = true)]
async fn a_fresh_process_does_not_reopen_the_window_of_an_event_failing_for_an_hour() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    deliveries.record(attempt(1, "g", 503, now()));
    let hour = time::Duration::try_from(DELIVERY_LOOKBACK).expect("lookback");
    let first = world.reaper().with_deliveries(deliveries.clone());
    let restart = now() + Duration::from_secs(30 * 60);
    let window = (now(), Duration::from_secs(60), restart);
    let mut asks = sweep(&first, &deliveries, window, |_| 503, false).await;
    let asked_before = asks.len();
    let second = world.reaper().with_deliveries(deliveries.clone());
    let window = (restart, Duration::from_secs(60), now() + hour * 2);
    asks.extend(sweep(&second, &deliveries, window, |_| 503, false).await);
    let last = *asks.last().expect("asked");
    assert!(last <= now() + hour, "asked at {last}, past its hour");
    assert!(asks.len() > asked_before, "the successor goes on asking");
    // As many as one process asks in the hour: 10 s, 20 s, ... up to 5 min apart.
    assert!((12..=20).contains(&asks.len()), "{} asks", asks.len());
}

#[tokio::test(start_paused = true)]
async fn the_endpoint_coming_back_cuts_an_events_wait_once_only() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    deliveries.record(attempt(1, "g", 503, now()));
    // Every other delivery gets through; this event fails each time on its own.
    let window = (
        now(),
        Duration::from_secs(2),
        now() + Duration::from_secs(600),
    );
    let asks = sweep(&reaper, &deliveries, window, |_| 503, true).await;
    let offsets: Vec<i64> = asks
        .iter()
        .map(|at| (*at - now()).whole_seconds())
        .collect();
    // At once; at the next run, the endpoint being back; then its own spacing.
    assert_eq!(offsets, [0, 2, 22, 62, 142, 302], "{offsets:?}");
}

#[tokio::test(start_paused = true)]
async fn events_that_keep_failing_do_not_crowd_out_a_newer_failure() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    let stuck = REDELIVERIES_PER_RUN as u64 + 25;
    for id in 1..=stuck {
        deliveries.record(attempt(id, &format!("stuck-{id}"), 503, now()));
    }
    // Every run, a minute apart, deliveries get through and each stuck event fails
    // again; five runs stay within GitHub's hour of content creation.
    let window = (
        now(),
        Duration::from_secs(60),
        now() + Duration::from_secs(240),
    );
    sweep(&reaper, &deliveries, window, |_| 503, true).await;
    let at = now() + Duration::from_secs(270);
    let newer = deliveries.deliveries().last().map_or(1, |d| d.id + 1);
    deliveries.record(attempt(newer, "newer", 502, at));
    deliveries.record(attempt(newer + 1, "through", 202, at));
    let before = deliveries.redelivered().len();
    reaper
        .run(at + Duration::from_secs(30), far())
        .await
        .expect("run");
    assert!(
        deliveries.redelivered()[before..].contains(&newer),
        "the newer failure is asked for in the next run"
    );
}

/// GitHub lists `delivered_at` in whole seconds, so a redelivery made at once after an
/// ask at 12:00:00.4 is listed at 12:00:00, before the ask: still the answer to it.
#[tokio::test(start_paused = true)]
async fn an_ask_listed_at_the_whole_second_before_it_is_taken_as_answered() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    deliveries.record(attempt(1, "g", 401, now()));
    let mut asks = 0;
    for second in 0..120u64 {
        let at = now() + Duration::from_millis(second * 1000 + 400);
        reaper.run(at, far()).await.expect("run");
        let asked = deliveries.redelivered();
        if asked.len() > asks {
            asks = asked.len();
            let id = deliveries.deliveries().last().map_or(1, |d| d.id + 1);
            let mut again = attempt(id, "g", 401, now() + Duration::from_secs(second));
            again.redelivery = true;
            deliveries.record(again);
        }
    }
    assert_eq!(asks as u32, REFUSED_ASKS);
}

#[tokio::test(start_paused = true)]
async fn a_fresh_process_leaves_alone_an_event_whose_first_attempt_lies_before_its_read_back() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    deliveries.record(attempt(1, "g", 503, now()));
    let hour = time::Duration::try_from(DELIVERY_LOOKBACK).expect("lookback");
    let first = world.reaper().with_deliveries(deliveries.clone());
    let window = (
        now(),
        Duration::from_secs(60),
        now() + hour - time::Duration::minutes(5),
    );
    let asks = sweep(&first, &deliveries, window, |_| 503, false).await;
    assert!(asks.len() > 10, "{asks:?}");
    // Its successor reads back an hour: its redeliveries, not its first attempt, so it
    // cannot count its asks nor know when they began.
    let second = world.reaper().with_deliveries(deliveries.clone());
    let from = now() + hour + time::Duration::minutes(10);
    let window = (from, Duration::from_secs(60), from + hour);
    let asks = sweep(&second, &deliveries, window, |_| 503, false).await;
    assert!(asks.is_empty(), "{asks:?}");
}

#[tokio::test(start_paused = true)]
async fn a_run_with_more_events_due_than_asks_asks_for_the_least_asked_first() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    let stuck = REDELIVERIES_PER_RUN as u64 + 25;
    for id in 1..=stuck {
        deliveries.record(attempt(id, &format!("stuck-{id}"), 503, now()));
    }
    // One run: the first REDELIVERIES_PER_RUN are asked for and fail again.
    let window = (now(), Duration::from_secs(10), now());
    let asks = sweep(&reaper, &deliveries, window, |_| 503, false).await;
    assert_eq!(asks.len(), REDELIVERIES_PER_RUN);
    let at = now() + Duration::from_secs(5);
    let newer = deliveries.deliveries().last().map_or(1, |d| d.id + 1);
    deliveries.record(attempt(newer, "newer", 502, at));
    // The next run, a minute on: every stuck event is due again, and the newer failure
    // too.
    tokio::time::advance(Duration::from_secs(50)).await;
    let before = deliveries.redelivered().len();
    reaper
        .run(now() + Duration::from_secs(60), far())
        .await
        .expect("run");
    let asked = &deliveries.redelivered()[before..];
    assert_eq!(asked.len(), REDELIVERIES_PER_RUN);
    assert!(
        asked.contains(&newer),
        "the newer failure waits behind older ones"
    );
    // The stuck events the first run had no asks left for go before those asked once.
    let first_run = &deliveries.redelivered()[..before];
    let mut never_asked = (1..=stuck).filter(|id| !first_run.contains(id));
    assert!(never_asked.all(|id| asked.contains(&id)), "{asked:?}");
}

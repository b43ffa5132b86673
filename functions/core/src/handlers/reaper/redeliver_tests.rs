//! The redelivery sweep on the in-memory deliveries: failed `workflow_job` deliveries
//! asked again once each, from where the last sweep stopped, and a lone job whose only
//! `queued` delivery failed run through it.

use super::redeliver::{failed_deliveries, ATTEMPTS_PER_EVENT};
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

#[test]
fn failed_workflow_job_deliveries_no_attempt_delivered_are_picked_once_each() {
    // Newest first, as GitHub lists them.
    let read = [
        delivery(6, "c", "workflow_job", 503),
        delivery(5, "b", "workflow_job", 200),
        delivery(4, "p", "ping", 500),
        delivery(3, "c", "workflow_job", 0),
        delivery(2, "b", "workflow_job", 503),
        delivery(1, "a", "workflow_job", 502),
    ];
    let ids: Vec<u64> = failed_deliveries(&read).iter().map(|d| d.id).collect();
    assert_eq!(
        ids,
        [1, 6],
        "a: failed; b: delivered on its retry; c: newest attempt"
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
async fn an_event_whose_redeliveries_keep_failing_is_asked_a_bounded_number_of_times() {
    let world = World::new(5);
    let deliveries = Arc::new(MemoryDeliveries::new(100));
    let reaper = world.reaper().with_deliveries(deliveries.clone());
    for id in 1..=u64::from(ATTEMPTS_PER_EVENT) + 3 {
        deliveries.record(delivery(id, "g", "workflow_job", 503));
        reaper.run(now(), far()).await.expect("run");
    }
    assert_eq!(deliveries.redelivered().len(), ATTEMPTS_PER_EVENT as usize);
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
        // GitHub delivers again what was asked: the webhook turns it into a message.
        let asked = deliveries.redelivered();
        for _ in &asked[delivered_again..] {
            let queued = message(MessageKind::Queued, 9, None);
            if let Ok(Handled::RunnerUp(name)) = world.scaler().handle(&queued, at).await {
                runner = Some(name);
            }
        }
        delivered_again = asked.len();
    }
    let runner = runner.expect("job 9 got a runner");
    assert_eq!(world.store.job(9).and_then(|j| j.runner_name), Some(runner));
    assert_eq!(deliveries.redelivered(), [41], "asked once");
}

//! The spot circuit breaker on the in-memory fakes: interrupted instances counted once
//! each, the breaker opened past the pool's allowance, the scaler launching on-demand
//! while it is open and spot again after the cool-down.

use super::*;
use crate::handlers::scaler::{Handled, Scaler};
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::memory::MemorySpotBreakers;
use crate::message::MessageKind;
use crate::metrics::Metrics;
use crate::ports::SpotBreakerStore;
use serde_json::json;

fn warning(instance_id: &str) -> InstanceEvent {
    let event = json!({
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "time": "2026-11-22T10:00:00Z",
        "detail": {"instance-id": instance_id, "instance-action": "terminate"}
    });
    InstanceEvent::from_eventbridge(&event)
        .expect("readable")
        .expect("an EC2 event")
}

fn scaler(world: &World, breakers: &Arc<MemorySpotBreakers>) -> Arc<Scaler> {
    world.scaler_with(crate::handlers::scaler::ScalerCapabilities {
        spot_breakers: Some(breakers.clone()),
        ..crate::handlers::scaler::ScalerCapabilities::none()
    })
}

async fn launch(scaler: &Arc<Scaler>, job: u64, at: OffsetDateTime) -> String {
    let Handled::RunnerUp(name) = scaler
        .handle(&message(MessageKind::Queued, job, None), at)
        .await
        .expect("up")
    else {
        panic!("no runner")
    };
    name
}

#[tokio::test(start_paused = true)]
async fn a_spike_of_interruptions_sends_the_pools_launches_on_demand_for_the_cool_down() {
    let world = World {
        config: config_with(
            10,
            "    spot: true\n    spot_breaker: { interruptions: 2 }\n",
        ),
        ..World::new(10)
    };
    let breakers = Arc::new(MemorySpotBreakers::new());
    let (metrics, captured) = Metrics::capture("eph");
    let reaper = world
        .reaper()
        .with_spot_breakers(breakers.clone())
        .with_metrics(metrics);
    let scaler = scaler(&world, &breakers);
    let mut instances = Vec::new();
    for job in 1..=3 {
        let name = launch(&scaler, job, now()).await;
        let record = world.store.runner(&name).expect("record");
        assert_eq!(record.market, Some(Market::Spot));
        instances.push(record.instance_id.expect("launched"));
    }
    // Two interruptions, one of them reported twice: allowed.
    for instance_id in [&instances[0], &instances[0], &instances[1]] {
        reaper
            .on_instance_event(&warning(instance_id), now())
            .await
            .expect("handled");
    }
    assert_eq!(breakers.state(POOL).interrupted.len(), 2);
    assert_eq!(breakers.state(POOL).paused_until, None);
    // The third opens it for 30 minutes.
    reaper
        .on_instance_event(&warning(&instances[2]), now())
        .await
        .expect("handled");
    let until = now() + time::Duration::minutes(30);
    assert_eq!(breakers.state(POOL).paused_until, Some(until));
    let opened: f64 = captured
        .documents()
        .expect("valid EMF")
        .iter()
        .filter_map(|d| d.values(Metric::SpotBreakerOpened))
        .flatten()
        .sum();
    assert_eq!(opened, 1.0);

    let during = launch(&scaler, 4, now() + time::Duration::minutes(29)).await;
    let record = world.store.runner(&during).expect("record");
    assert_eq!(record.market, Some(Market::OnDemand), "breaker open");
    let after = launch(&scaler, 5, until).await;
    let record = world.store.runner(&after).expect("record");
    assert_eq!(record.market, Some(Market::Spot), "cool-down over");
    let markets: Vec<Market> = world
        .fleet
        .launch_requests()
        .iter()
        .map(|r| r.market)
        .collect();
    assert_eq!(
        markets,
        [
            Market::Spot,
            Market::Spot,
            Market::Spot,
            Market::OnDemand,
            Market::Spot
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn interruptions_spread_over_more_than_the_window_never_open_it() {
    let world = World {
        config: config_with(
            10,
            "    spot: true\n    spot_breaker: { interruptions: 1, within: 5m }\n",
        ),
        ..World::new(10)
    };
    let breakers = Arc::new(MemorySpotBreakers::new());
    let reaper = world.reaper().with_spot_breakers(breakers.clone());
    let scaler = scaler(&world, &breakers);
    for (job, minutes) in [(1, 0), (2, 6), (3, 12)] {
        let at = now() + time::Duration::minutes(minutes);
        let name = launch(&scaler, job, at).await;
        let instance_id = world.store.runner(&name).expect("record").instance_id;
        reaper
            .on_instance_event(&warning(&instance_id.expect("launched")), at)
            .await
            .expect("handled");
        assert_eq!(breakers.state(POOL).paused_until, None, "at {minutes} min");
    }
    assert_eq!(
        breakers.state(POOL).interrupted.len(),
        1,
        "older ones forgotten"
    );
    let state = breakers.breaker_state(POOL).await.expect("state");
    assert!(!state.paused(now()));
}

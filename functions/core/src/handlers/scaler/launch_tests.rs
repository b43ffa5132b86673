//! Launch: one request per pool through the right template, spot falling back to on-demand,
//! and a launch that fails giving its slot back.

use super::testing::*;
use super::*;
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::lifecycle::InstanceStatus;
use crate::memory::FleetFailure;
use crate::message::MessageKind;

#[tokio::test]
async fn an_ami_pool_launches_through_the_deployments_template_with_its_image() {
    let mut world = World::new(5);
    let text = world_config_text("[linux]").replace("launch_template: eph-runner", "ami: ami-1");
    world.config = Arc::new(crate::config::Config::parse("t.yaml", &text).expect("valid"));
    up(&world, 1).await;
    let requests = world.fleet.launch_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].launch_template, "eph-runner");
    assert_eq!(requests[0].ami.as_deref(), Some("ami-1"));
}

#[tokio::test]
async fn a_pool_with_ssm_access_launches_through_the_session_manager_template() {
    let mut world = World::new(5);
    world.config = config_with(5, "    ssm_access: true\n");
    up(&world, 1).await;
    let requests = world.fleet.launch_requests();
    assert_eq!(requests[0].launch_template, "eph-runner-ssm");
    assert_eq!(requests[0].template_version, TemplateVersion::Stack);

    let without = World::new(5);
    up(&without, 1).await;
    assert_eq!(
        without.fleet.launch_requests()[0].launch_template,
        "eph-runner"
    );
}

#[tokio::test]
async fn spot_capacity_error_falls_back_to_on_demand() {
    let mut world = World::new(5);
    world.config = config_with(5, "    spot: true\n");
    world
        .fleet
        .fail_market_with(Market::Spot, Some(FleetFailure::CapacityUnavailable));
    let failed = world.scaler().handle_batch(batch(1..=3), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    let requests = world.fleet.launch_requests();
    assert_eq!(
        requests.len(),
        1,
        "only the on-demand request made instances"
    );
    assert_eq!(
        (requests[0].market, requests[0].count),
        (Market::OnDemand, 3)
    );
    assert_eq!(
        world.fleet.launch_calls(),
        2,
        "one spot request, one fallback"
    );
}

#[tokio::test]
async fn partial_spot_launch_is_topped_up_on_demand() {
    let mut world = World::new(5);
    world.config = config_with(5, "    spot: true\n");
    world.fleet.cap_launches(Some(2));
    let failed = world.scaler().handle_batch(batch(1..=3), now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    let requests: Vec<_> = world
        .fleet
        .launch_requests()
        .into_iter()
        .map(|r| (r.market, r.count))
        .collect();
    assert_eq!(requests, [(Market::Spot, 3), (Market::OnDemand, 1)]);
    // Each runner records the market its instance was bought in.
    let mut markets: Vec<_> = world
        .store
        .runners()
        .into_iter()
        .map(|r| r.market.map(Market::as_str))
        .collect();
    markets.sort_unstable();
    assert_eq!(markets, [Some("on_demand"), Some("spot"), Some("spot")]);
}

#[tokio::test]
async fn capacity_error_releases_the_slot_at_once_and_frees_the_job_for_a_retry() {
    let world = World::new(1);
    let scaler = world.scaler();
    world
        .fleet
        .fail_launch_with(Some(FleetFailure::CapacityUnavailable));
    let failed = scaler
        .handle(&message(MessageKind::Queued, 4, None), now())
        .await;
    assert!(failed.is_err());
    let broken = world.store.runners().pop().expect("record");
    assert_eq!(broken.status, InstanceStatus::Error);
    assert!(!broken.slot_held);
    assert!(
        broken
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("capacity"),
        "{broken:?}"
    );
    assert_eq!(
        world.store.slots_used(POOL),
        0,
        "slot given back when the launch failed"
    );
    assert_eq!(world.store.job(4).and_then(|j| j.runner_name), None);

    world.fleet.fail_launch_with(None);
    scaler
        .handle(&message(MessageKind::Queued, 4, None), now())
        .await
        .expect("retry launches afresh");
    assert_eq!(world.store.runners().len(), 2);
    assert_eq!(world.store.slots_used(POOL), 1);
}

#[tokio::test(start_paused = true)]
async fn a_throttled_launch_sends_its_jobs_back_in_line_instead_of_failing_their_messages() {
    let world = World::new(5);
    world.fleet.fail_launch_with(Some(FleetFailure::Throttled));
    let failed = world.scaler().handle_batch(batch(1..=3), now()).await;
    // Failed messages would count a receive each, and dead-letter after five.
    assert!(failed.is_empty(), "{failed:?}");
    let requeued: Vec<u64> = world.queue.sent().iter().map(|m| m.job_id).collect();
    assert_eq!(requeued, [1, 2, 3]);
    assert!(world.queue.delays().iter().all(|d| !d.is_zero()));
    for runner in world.store.runners() {
        assert_eq!(
            runner.status,
            InstanceStatus::Error,
            "cleaned by the reaper"
        );
        assert!(!runner.slot_held);
    }
    assert_eq!(world.store.slots_used(POOL), 0);
    for job in 1..=3 {
        assert_eq!(world.store.job(job).and_then(|j| j.runner_name), None);
    }
}

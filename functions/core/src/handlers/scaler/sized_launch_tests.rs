//! The launch of a sized job: its request's shape within the pool's policy, its own
//! EC2 request apart from the unsized jobs of the batch, its purchase option, and the
//! runner registered with the job's sizing labels so GitHub gives it that job.

use super::*;
use crate::handlers::test_support::{config_with, message, now, World};
use crate::memory::FleetFailure;
use crate::message::MessageKind;

const POLICY: &str = "    sizing:
      accept: true
      max_vcpus_per_runner: 32
      max_memory_gib: 128
      images: { ubuntu-24: ami-0123456789abcdef0 }
      spot: [true, false]
";

fn sized(job: u64, sizing: &[&str]) -> BatchItem {
    let mut queued = message(MessageKind::Queued, job, None);
    queued.labels.extend(sizing.iter().map(|l| l.to_string()));
    BatchItem {
        message_id: format!("m{job}"),
        body: queued.encode(),
    }
}

fn sized_world(extra: &str) -> World {
    let mut world = World::new(5);
    world.config = config_with(5, &format!("{POLICY}{extra}"));
    world
}

#[tokio::test]
async fn a_sized_job_launches_its_shape_and_registers_with_its_labels() {
    let world = sized_world("");
    let batch = vec![sized(
        1,
        &["ephemera.cpu=8", "ephemera.ram=32", "ephemera.disk=80:gp3"],
    )];
    let failed = world.scaler().handle_batch(batch, now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    let requests = world.fleet.launch_requests();
    assert_eq!(requests.len(), 1);
    let shape = requests[0].shape.clone().expect("a shape");
    assert_eq!((shape.vcpus_min, shape.vcpus_max), (8, 8));
    assert_eq!(
        (shape.memory_mib_min, shape.memory_mib_max),
        (32 * 1024, Some(32 * 1024)),
        "GiB in the label, MiB to EC2"
    );
    let root = requests[0].root_volume.clone().expect("a root volume");
    assert_eq!((root.gib, root.volume_type.as_deref()), (80, Some("gp3")));
    let jit = world.forge.jit_requests();
    assert_eq!(
        jit[0].labels,
        [
            "self-hosted",
            "linux",
            "x64",
            "ephemera.cpu=8",
            "ephemera.ram=32",
            "ephemera.disk=80:gp3"
        ]
    );
}

#[tokio::test]
async fn an_open_range_is_bounded_by_the_policy() {
    let world = sized_world("");
    let batch = vec![sized(1, &["ephemera.cpu=4+", "ephemera.family=m7i"])];
    assert!(world.scaler().handle_batch(batch, now()).await.is_empty());
    let shape = world.fleet.launch_requests()[0]
        .shape
        .clone()
        .expect("shape");
    assert_eq!((shape.vcpus_min, shape.vcpus_max), (4, 32));
    assert_eq!(
        (shape.memory_mib_min, shape.memory_mib_max),
        (0, Some(128 * 1024))
    );
    assert_eq!(shape.families, ["m7i"]);
}

#[tokio::test]
async fn sized_and_unsized_jobs_of_a_batch_get_one_request_per_size() {
    let world = sized_world("");
    let mut items = crate::handlers::scaler::testing::batch(1..=2);
    items.push(sized(3, &["ephemera.cpu=8"]));
    items.push(sized(4, &["ephemera.cpu=8"]));
    items.push(sized(5, &["ephemera.cpu=16"]));
    assert!(world.scaler().handle_batch(items, now()).await.is_empty());
    let mut counts: Vec<(Option<u32>, u32)> = world
        .fleet
        .launch_requests()
        .iter()
        .map(|r| (r.shape.as_ref().map(|s| s.vcpus_min), r.count))
        .collect();
    counts.sort();
    assert_eq!(counts, [(None, 2), (Some(8), 2), (Some(16), 1)]);
    assert_eq!(world.fleet.launched(), 5, "one instance per job");
}

#[tokio::test]
async fn the_spot_label_picks_the_market_and_the_image_name_its_ami() {
    let world = sized_world("");
    let batch = vec![sized(
        1,
        &["ephemera.spot=true", "ephemera.image=ubuntu-24"],
    )];
    assert!(world.scaler().handle_batch(batch, now()).await.is_empty());
    let request = &world.fleet.launch_requests()[0];
    assert_eq!(request.market, Market::Spot);
    assert_eq!(request.ami.as_deref(), Some("ami-0123456789abcdef0"));
    assert_eq!(
        request.shape, None,
        "no cpu, ram, family or arch: the pool's types"
    );
}

#[tokio::test]
async fn spot_falls_back_on_demand_only_where_the_policy_allows_it() {
    let world = sized_world("");
    world
        .fleet
        .fail_market_with(Market::Spot, Some(FleetFailure::CapacityUnavailable));
    let batch = vec![sized(1, &["ephemera.spot=true", "ephemera.cpu=4"])];
    assert!(world.scaler().handle_batch(batch, now()).await.is_empty());
    assert_eq!(world.fleet.launch_requests()[0].market, Market::OnDemand);

    let spot_only = sized_world("").config.as_ref().clone();
    let mut world = World::new(5);
    let mut config = spot_only;
    config.pools[0].sizing.spot = vec![true];
    world.config = Arc::new(config);
    world
        .fleet
        .fail_market_with(Market::Spot, Some(FleetFailure::CapacityUnavailable));
    let batch = vec![sized(1, &["ephemera.spot=true", "ephemera.cpu=4"])];
    world.scaler().handle_batch(batch, now()).await;
    assert_eq!(world.fleet.launch_calls(), 1, "no on-demand try");
    assert_eq!(world.fleet.launched(), 0);
}

#[tokio::test]
async fn an_image_in_ssm_is_refused_at_launch_with_its_reason() {
    // `config check` refuses such an image; a configuration built past it still
    // reaches no CreateFleet.
    let mut world = sized_world("");
    let mut config = (*world.config).clone();
    config.pools[0]
        .sizing
        .images
        .insert("jammy".into(), "ssm:/images/jammy".into());
    world.config = std::sync::Arc::new(config);
    let batch = vec![sized(1, &["ephemera.image=jammy"])];
    world.scaler().handle_batch(batch, now()).await;
    assert_eq!(world.fleet.launch_calls(), 0, "nothing asked of EC2");
    let runners = world.store.runners();
    assert!(
        runners.iter().any(|r| r
            .last_error
            .as_deref()
            .is_some_and(|why| why.contains("SSM parameter"))),
        "{runners:?}"
    );
}

#[tokio::test]
async fn a_launch_past_max_vcpus_waits_like_one_past_max_runners() {
    // 32 vCPUs at 32 a runner: one runner at a time, whatever max_runners (5) says.
    let world = sized_world("    max_vcpus: 32\n");
    let items = vec![
        sized(1, &["ephemera.cpu=8"]),
        sized(2, &["ephemera.cpu=8"]),
        sized(3, &["ephemera.cpu=16"]),
    ];
    let failed = world.scaler().handle_batch(items, now()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(world.fleet.launched(), 1);
    assert_eq!(
        world.store.slots_used(crate::handlers::test_support::POOL),
        1
    );
    assert_eq!(world.queue.take().len(), 2, "the others went back in line");
}

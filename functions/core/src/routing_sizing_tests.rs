//! Routing of jobs with sizing labels, and of jobs that are not ours.

use super::*;
use crate::config::Config;
use crate::sizing::Amount;
use proptest::prelude::*;

fn pools() -> Vec<PoolConfig> {
    let text = r#"
deployment: eph
github: { app_id: 1 }
pools:
  - { name: fixed, labels: [linux, x64], max_runners: 2, instance_types: [m7i.large], ami: ami-1 }
  - name: sized
    labels: [linux]
    max_runners: 4
    instance_types: [m7i.large]
    ami: ami-1
    sizing:
      accept: true
      max_vcpus_per_runner: 16
      families: [m7i, m7a]
      images: { ubuntu-24: ami-0123456789abcdef0 }
      spot: [false]
"#;
    Config::parse("t.yaml", text).expect("valid").pools
}

fn labels(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn reason(routing: Routing<'_>) -> String {
    match routing {
        Routing::Unrouted { reason } => reason,
        other => panic!("not unrouted: {other:?}"),
    }
}

#[test]
fn a_sized_job_goes_to_the_first_pool_accepting_sizing_with_its_request() {
    let pools = pools();
    let job = labels(&["self-hosted", "linux", "ephemera.cpu=8", "ephemera.ram=32"]);
    let Routing::Routed { pool, sizing } = route_job(&pools, &job) else {
        panic!("not routed");
    };
    assert_eq!(pool.name, "sized");
    let sizing = sizing.expect("a request");
    assert_eq!(sizing.cpu, Some(Amount::exact(8)));
    assert_eq!(sizing.ram_gib, Some(Amount::exact(32)));
}

#[test]
fn a_job_without_sizing_labels_routes_as_before_and_carries_no_request() {
    let pools = pools();
    let routing = route_job(&pools, &labels(&["self-hosted", "linux", "x64"]));
    assert_eq!(routing.pool().map(|p| p.name.as_str()), Some("fixed"));
    assert!(matches!(routing, Routing::Routed { sizing: None, .. }));
}

#[test]
fn a_job_over_the_policy_is_unrouted_naming_the_label_and_the_bound() {
    let pools = pools();
    let reason = reason(route_job(&pools, &labels(&["linux", "ephemera.cpu=64"])));
    assert!(reason.contains("ephemera.cpu=64"), "{reason}");
    assert!(reason.contains("limit of 16"), "{reason}");
    let refused = [
        ("ephemera.family=c7i", "sizing.families"),
        ("ephemera.image=windows", "sizing.images"),
        ("ephemera.spot=true", "sizing.spot"),
        ("ephemera.disk=500", "sizing.max_disk_gib"),
        ("ephemera.ram=128", "sizing.max_memory_gib"),
    ];
    for (label, rule) in refused {
        let reason = super::route_job(&pools, &labels(&["linux", label]));
        let reason = self::reason(reason);
        assert!(reason.contains(label) && reason.contains(rule), "{reason}");
    }
}

#[test]
fn a_range_is_allowed_while_its_minimum_fits_the_policy() {
    let pools = pools();
    for cpu in ["ephemera.cpu=4+", "ephemera.cpu=8-64", "ephemera.cpu=16"] {
        let routing = route_job(&pools, &labels(&["linux", cpu]));
        assert_eq!(
            routing.pool().map(|p| p.name.as_str()),
            Some("sized"),
            "{cpu}"
        );
    }
}

#[test]
fn a_malformed_sizing_label_is_unrouted_with_the_grammars_rule() {
    let pools = pools();
    let reason = reason(route_job(
        &pools,
        &labels(&["linux", "ephemera.image=ami-0abc"]),
    ));
    assert!(reason.contains("\"ephemera.image=ami-0abc\""), "{reason}");
    assert!(reason.contains("AMI id"), "{reason}");
}

#[test]
fn sizing_labels_go_only_to_a_pool_that_accepts_them() {
    let mut pools = pools();
    pools.truncate(1);
    let reason = reason(route_job(
        &pools,
        &labels(&["linux", "x64", "ephemera.cpu=2"]),
    ));
    assert!(reason.contains("does not accept sizing labels"), "{reason}");
    let reason = self::reason(route_job(&pools, &labels(&["gpu", "ephemera.cpu=2"])));
    assert!(reason.contains("other than the sizing ones"), "{reason}");
}

#[test]
fn a_hosted_job_is_not_ours_and_a_job_naming_ours_is_unrouted() {
    let pools = pools();
    for hosted in [&["ubuntu-latest"][..], &["windows-2022", "x86"], &[]] {
        assert_eq!(
            route_job(&pools, &labels(hosted)),
            Routing::NotOurs,
            "{hosted:?}"
        );
    }
    for ours in [
        &["self-hosted", "windows"][..],
        &["LINUX", "gpu"],
        &["ubuntu-latest", "x64", "arm64"],
    ] {
        let reason = reason(route_job(&pools, &labels(ours)));
        assert_eq!(reason, NO_POOL_HAS_ALL, "{ours:?}");
    }
}

/// `request` brought within the sized pool's policy, keeping its shape (ranges stay
/// ranges), so that the property sees routed jobs as often as refused ones.
fn within_policy(mut request: crate::sizing::SizingRequest) -> crate::sizing::SizingRequest {
    let tame = |amount: Amount, cap: u32| {
        let min = (amount.min - 1) % cap + 1;
        Amount {
            min,
            max: amount.max.map(|max| max.max(min)),
        }
    };
    request.cpu = request.cpu.map(|cpu| tame(cpu, 16));
    request.ram_gib = request.ram_gib.map(|ram| tame(ram, 64));
    if let Some(disk) = request.disk.as_mut() {
        disk.gib = (disk.gib - 1) % 200 + 1;
    }
    request.families.retain(|f| f == "m7i" || f == "m7a");
    request.image = request.image.map(|_| "ubuntu-24".to_owned());
    request.spot = request.spot.map(|_| false);
    request
}

proptest! {
    #[test]
    fn a_sized_job_is_routed_only_within_a_policy_or_refused_naming_one_of_its_labels(
        wild in crate::sizing::tests::request(),
        tame in any::<bool>(),
    ) {
        let request = if tame { within_policy(wild) } else { wild };
        prop_assume!(request != crate::sizing::SizingRequest::default());
        let pools = pools();
        let mut job = labels(&["self-hosted", "linux"]);
        let sizing_labels = request.labels();
        job.extend(sizing_labels.iter().cloned());
        match route_job(&pools, &job) {
            Routing::Routed { pool, sizing } => {
                let policy = &pool.sizing;
                prop_assert!(policy.accept);
                if let Some(cpu) = request.cpu {
                    prop_assert!(cpu.min <= policy.max_vcpus_per_runner);
                }
                if let Some(ram) = request.ram_gib {
                    prop_assert!(ram.min <= policy.max_memory_gib);
                }
                if let Some(disk) = &request.disk {
                    prop_assert!(disk.gib <= policy.max_disk_gib);
                }
                for family in &request.families {
                    prop_assert!(policy.families.contains(family));
                }
                if let Some(image) = &request.image {
                    prop_assert!(policy.images.contains_key(image));
                }
                if let Some(spot) = request.spot {
                    prop_assert!(policy.spot.contains(&spot));
                }
                prop_assert_eq!(sizing.as_ref(), Some(&request));
            }
            Routing::Unrouted { reason } => {
                prop_assert!(!tame, "a request within the policy was refused: {}", reason);
                prop_assert!(
                    sizing_labels.iter().any(|label| reason.contains(label.as_str())),
                    "{} names none of {:?}", reason, sizing_labels
                );
            }
            Routing::NotOurs => prop_assert!(false, "a self-hosted job is ours"),
        }
    }
}

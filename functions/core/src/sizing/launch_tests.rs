//! The shape of a sized launch: the labels' ranges bounded by the policy, GiB in MiB.

use super::*;
use crate::config::Config;
use crate::sizing::SizingRequest;

fn pool() -> PoolConfig {
    let cap = "";
    let text = format!(
        "deployment: eph\ngithub: {{ app_id: 1 }}\npools:\n  - name: sized\n    labels: [linux]\n    \
         max_runners: 4\n{cap}    instance_types: [m7i.large]\n    launch_template: lt\n    \
         sizing: {{ accept: true, max_vcpus_per_runner: 32, max_memory_gib: 64 }}\n"
    );
    Config::parse("t.yaml", &text).expect("valid").pools[0].clone()
}

fn request(labels: &[&str]) -> SizingRequest {
    let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
    SizingRequest::from_labels(&labels)
        .expect("parses")
        .expect("sized")
}

#[test]
fn an_exact_request_is_an_exact_shape_in_mib() {
    let shape = shape(&pool(), &request(&["ephemera.cpu=8", "ephemera.ram=32"])).expect("shape");
    assert_eq!((shape.vcpus_min, shape.vcpus_max), (8, 8));
    assert_eq!(
        (shape.memory_mib_min, shape.memory_mib_max),
        (32_768, Some(32_768))
    );
}

#[test]
fn a_range_above_the_policy_is_cut_to_it() {
    let asked = request(&["ephemera.cpu=8-64", "ephemera.ram=16+"]);
    let shape = shape(&pool(), &asked).expect("shape");
    assert_eq!((shape.vcpus_min, shape.vcpus_max), (8, 32));
    assert_eq!(shape.memory_mib_max, Some(64 * 1024));
}

#[test]
fn arch_is_named_as_ec2_names_it() {
    let shape = shape(&pool(), &request(&["ephemera.arch=x64"])).expect("shape");
    assert_eq!(shape.architecture.as_deref(), Some("x86_64"));
    assert_eq!((shape.vcpus_min, shape.vcpus_max), (1, 32));
    let arm = super::shape(&pool(), &request(&["ephemera.arch=arm64"])).expect("shape");
    assert_eq!(arm.architecture.as_deref(), Some("arm64"));
}

#[test]
fn a_request_of_no_type_keeps_the_pools_types() {
    assert_eq!(
        shape(&pool(), &request(&["ephemera.disk=80", "ephemera.run=7"])),
        None
    );
}

#[test]
fn a_job_naming_no_family_gets_the_families_the_policy_allows() {
    let mut limited = pool();
    limited.sizing.families = vec!["m7i".into(), "m7a".into()];
    let shape = shape(&limited, &request(&["ephemera.cpu=8"])).expect("shape");
    assert_eq!(shape.families, ["m7i", "m7a"]);
    let named = super::shape(
        &limited,
        &request(&["ephemera.cpu=8", "ephemera.family=m7a"]),
    );
    assert_eq!(named.expect("shape").families, ["m7a"]);
}

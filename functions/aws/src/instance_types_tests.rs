//! Matching a shape against the catalog: ranges, families, architecture, market, and
//! the types never offered.

use super::*;

fn info(name: &str, vcpus: u32, gib: u64, arch: &str) -> TypeInfo {
    TypeInfo {
        name: name.to_owned(),
        vcpus,
        memory_mib: gib * 1024,
        architectures: vec![arch.to_owned()],
        spot: true,
        excluded: false,
    }
}

fn catalog() -> Vec<TypeInfo> {
    let mut burstable = info("t3.2xlarge", 8, 32, "x86_64");
    burstable.excluded = true;
    let mut no_spot = info("m7i-flex.2xlarge", 8, 32, "x86_64");
    no_spot.spot = false;
    vec![
        info("m7i.large", 2, 8, "x86_64"),
        info("m7i.2xlarge", 8, 32, "x86_64"),
        info("m7a.2xlarge", 8, 32, "x86_64"),
        info("c7i.2xlarge", 8, 16, "x86_64"),
        info("m7g.2xlarge", 8, 32, "arm64"),
        info("m7i.4xlarge", 16, 64, "x86_64"),
        burstable,
        no_spot,
    ]
}

fn shape(cpu: (u32, u32), gib: (u64, Option<u64>)) -> Shape {
    Shape {
        vcpus_min: cpu.0,
        vcpus_max: cpu.1,
        memory_mib_min: gib.0 * 1024,
        memory_mib_max: gib.1.map(|g| g * 1024),
        ..Shape::default()
    }
}

#[test]
fn eight_vcpus_and_32_gib_match_only_types_of_that_size() {
    let found = matching(
        &catalog(),
        &shape((8, 8), (32, Some(32))),
        Market::OnDemand,
        &[],
        10,
    );
    assert_eq!(found, ["m7a.2xlarge", "m7i-flex.2xlarge", "m7i.2xlarge"]);
}

#[test]
fn spot_offers_only_types_sold_as_spot_and_never_an_excluded_type() {
    let found = matching(
        &catalog(),
        &shape((8, 8), (32, Some(32))),
        Market::Spot,
        &[],
        10,
    );
    assert_eq!(found, ["m7a.2xlarge", "m7i.2xlarge"]);
}

#[test]
fn families_and_architecture_narrow_the_match() {
    let mut wanted = shape((1, 64), (0, None));
    wanted.families = vec!["m7i".into()];
    let found = matching(&catalog(), &wanted, Market::OnDemand, &[], 10);
    assert_eq!(
        found,
        ["m7i.large", "m7i.2xlarge", "m7i.4xlarge"],
        "smallest first"
    );
    let mut arm = shape((8, 8), (0, None));
    arm.architecture = Some("arm64".into());
    assert_eq!(
        matching(&catalog(), &arm, Market::OnDemand, &[], 10),
        ["m7g.2xlarge"]
    );
}

#[test]
fn without_an_architecture_the_pools_own_types_say_which() {
    let any = shape((8, 8), (32, Some(32)));
    let found = matching(
        &catalog(),
        &any,
        Market::Spot,
        &["m7g.large".into(), "m7g.2xlarge".into()],
        10,
    );
    assert_eq!(found, ["m7g.2xlarge"]);
}

#[test]
fn the_match_is_cut_at_the_limit() {
    let found = matching(
        &catalog(),
        &shape((1, 64), (0, None)),
        Market::OnDemand,
        &[],
        2,
    );
    assert_eq!(found, ["m7i.large", "c7i.2xlarge"]);
}

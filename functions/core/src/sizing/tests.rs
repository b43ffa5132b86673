use super::*;
use proptest::prelude::*;

fn labels(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn parse(list: &[&str]) -> Result<Option<SizingRequest>, SizingError> {
    SizingRequest::from_labels(&labels(list))
}

#[test]
fn every_key_parses_and_other_labels_are_ignored() {
    let request = parse(&[
        "self-hosted",
        "Ephemera.CPU=4-16",
        "ephemera.ram=16+",
        "ephemera.family=m7i+M7i-flex",
        "ephemera.arch=arm64",
        "ephemera.disk=80:gp3",
        "ephemera.spot=false",
        "ephemera.image=Ubuntu-24",
        "ephemera.run=Run-42",
    ])
    .expect("valid")
    .expect("some");
    assert_eq!(
        request.cpu,
        Some(Amount {
            min: 4,
            max: Some(16)
        })
    );
    assert_eq!(request.ram_gib, Some(Amount { min: 16, max: None }));
    assert_eq!(request.families, ["m7i", "m7i-flex"]);
    assert_eq!(request.arch, Some(Arch::Arm64));
    let disk = Disk {
        gib: 80,
        volume_type: Some("gp3".into()),
    };
    assert_eq!(request.disk, Some(disk));
    assert_eq!(request.spot, Some(false));
    assert_eq!(request.image.as_deref(), Some("ubuntu-24"));
    assert_eq!(request.run.as_deref(), Some("Run-42"));
    assert_eq!(parse(&["self-hosted", "linux"]), Ok(None));
}

#[test]
fn each_rejection_names_the_label_and_the_rule() {
    let cases: [(&str, SizingRule); 16] = [
        ("ephemera.cpu", SizingRule::NoValue),
        ("ephemera.gpu=1", SizingRule::UnknownKey("gpu".into())),
        ("ephemera.cpu=0", SizingRule::Amount { max: MAX_CPU }),
        ("ephemera.cpu=16-4", SizingRule::EmptyRange),
        ("ephemera.ram=1.5", SizingRule::Amount { max: MAX_RAM_GIB }),
        ("ephemera.family=m7i++m7a", SizingRule::Family),
        ("ephemera.arch=amd64", SizingRule::Arch),
        ("ephemera.disk=80gb", SizingRule::Disk),
        ("ephemera.disk=80:gp9", SizingRule::Disk),
        ("ephemera.disk=80:io2", SizingRule::DiskIops("io2".into())),
        ("ephemera.disk=500:st1", SizingRule::DiskBoot("st1".into())),
        (
            "ephemera.disk=2000:standard",
            SizingRule::DiskSize {
                volume_type: "standard".into(),
                min: 1,
                max: 1024,
            },
        ),
        ("ephemera.disk=20000", SizingRule::Disk),
        ("ephemera.spot=yes", SizingRule::Spot),
        ("ephemera.image=AMI-0123abcd", SizingRule::AmiId),
        ("ephemera.image=my/image", SizingRule::Image),
    ];
    for (label, rule) in cases {
        let err = parse(&["linux", label]).expect_err(label);
        assert_eq!((err.label.as_str(), &err.rule), (label, &rule));
        let text = err.to_string();
        assert!(text.starts_with(&format!("label {label:?}: ")), "{text}");
        assert!(text.ends_with(&rule.to_string()), "{text}");
    }
}

#[test]
fn a_disk_ec2_cannot_boot_from_is_refused_naming_the_rule() {
    for (label, words) in [
        ("ephemera.disk=80:io1", "only with provisioned IOPS"),
        ("ephemera.disk=80:IO2", "only with provisioned IOPS"),
        ("ephemera.disk=125:sc1", "cannot boot from a sc1 volume"),
        ("ephemera.disk=2000:standard", "from 1 to 1024 GiB"),
        ("ephemera.disk=16385:gp3", "from 1 to 16384"),
    ] {
        let err = parse(&[label]).expect_err(label);
        let text = err.to_string();
        assert!(text.starts_with(&format!("label {label:?}: ")), "{text}");
        assert!(text.contains(words), "{text}");
    }
    for fits in [
        "ephemera.disk=16384:gp3",
        "ephemera.disk=16384:gp2",
        "ephemera.disk=1024:standard",
        "ephemera.disk=16384",
        "ephemera.disk=1",
    ] {
        assert!(parse(&[fits]).is_ok(), "{fits}");
    }
}

#[test]
fn a_key_given_twice_is_refused() {
    let err = parse(&["ephemera.cpu=4", "ephemera.CPU=8"]).expect_err("twice");
    assert_eq!(err.label, "ephemera.CPU=8");
    assert_eq!(err.rule, SizingRule::Repeated);
    let err = parse(&["ephemera.family=m7i", "ephemera.family=m7a"]).expect_err("twice");
    assert_eq!(err.rule, SizingRule::Repeated);
}

#[test]
fn only_the_prefix_makes_a_sizing_label() {
    assert!(is_sizing("ephemera.cpu=4") && is_sizing(" EPHEMERA.x"));
    assert!(!is_sizing("ephemera") && !is_sizing("linux") && !is_sizing("my-ephemera.cpu=4"));
}

const KEYS: [&str; 8] = [
    "cpu", "ram", "family", "arch", "disk", "spot", "image", "run",
];

fn amount(max: u32) -> impl Strategy<Value = Amount> {
    (1..=max, prop::option::of(0..=max)).prop_map(move |(min, extra)| Amount {
        min,
        max: extra.map(|e| min.saturating_add(e).min(max)),
    })
}

fn family() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,6}[0-9](-[a-z0-9]{1,5})?"
}

/// Any root volume EC2 can launch: a size within its type's range, or up to the label's
/// bound without a type.
fn disk() -> impl Strategy<Value = Disk> {
    let typed = prop::sample::select(&ROOT_VOLUME_SIZES[..]).prop_flat_map(|(kind, min, max)| {
        (min..=max).prop_map(move |gib| Disk {
            gib,
            volume_type: Some(kind.to_owned()),
        })
    });
    let untyped = (1..=MAX_DISK_GIB).prop_map(|gib| Disk {
        gib,
        volume_type: None,
    });
    prop_oneof![typed, untyped]
}

prop_compose! {
    /// Any request the grammar can express (shared with routing's property tests).
    pub(crate) fn request()(
        cpu in prop::option::of(amount(MAX_CPU)),
        ram_gib in prop::option::of(amount(MAX_RAM_GIB)),
        families in prop::collection::vec(family(), 0..4),
        arch in prop::option::of(prop_oneof![Just(Arch::X64), Just(Arch::Arm64)]),
        disk in prop::option::of(disk()),
        spot in prop::option::of(any::<bool>()),
        image in prop::option::of("[a-z0-9][a-z0-9._-]{0,20}".prop_filter("not an AMI id", |i| !i.starts_with("ami-"))),
        run in prop::option::of("[A-Za-z0-9_=/.-]{1,20}"),
    ) -> SizingRequest {
        SizingRequest { cpu, ram_gib, families, arch, disk, spot, image, run }
    }
}

proptest! {
    #[test]
    fn a_rendered_request_parses_back_to_itself(request in request()) {
        let rendered = request.labels();
        let parsed = SizingRequest::from_labels(&rendered).expect("renders valid labels");
        let expected = (request != SizingRequest::default()).then_some(request);
        prop_assert_eq!(parsed, expected);
    }

    #[test]
    fn any_sizing_label_parses_or_is_rejected_naming_itself(
        key in prop_oneof![
            prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
            "[a-z]{1,6}",
        ],
        value in "[ -~]{0,16}",
    ) {
        let label = format!("ephemera.{key}={value}");
        match SizingRequest::from_labels(&[label.clone(), "self-hosted".into()]) {
            Ok(request) => {
                let request = request.expect("a sizing label makes a request");
                for amount in [request.cpu, request.ram_gib].into_iter().flatten() {
                    prop_assert!(amount.max.is_none_or(|max| amount.min <= max));
                    prop_assert!(amount.min >= 1);
                }
            }
            Err(err) => {
                prop_assert_eq!(&err.label, label.trim());
                let named = format!("label {:?}: ", label.trim());
                prop_assert!(err.to_string().starts_with(&named));
            }
        }
    }

    #[test]
    fn a_range_whose_minimum_is_above_its_maximum_is_rejected(
        key in prop_oneof![Just("cpu"), Just("ram")],
        low in 2..=MAX_CPU,
        below in 1..=MAX_CPU,
    ) {
        let high = low.saturating_sub(below).max(1).min(low - 1);
        let label = format!("ephemera.{key}={low}-{high}");
        let err = SizingRequest::from_labels(std::slice::from_ref(&label)).expect_err("empty range");
        prop_assert_eq!(err.label, label);
        prop_assert_eq!(err.rule, SizingRule::EmptyRange);
    }

    #[test]
    fn an_out_of_range_amount_is_rejected(key in prop_oneof![Just("cpu"), Just("disk")], over in 1..=1_000_000u32) {
        let max = if key == "cpu" { MAX_CPU } else { MAX_DISK_GIB };
        let label = format!("ephemera.{key}={}", max as u64 + over as u64);
        let err = SizingRequest::from_labels(std::slice::from_ref(&label)).expect_err("too large");
        prop_assert_eq!(err.label, label);
    }

    #[test]
    fn an_ami_id_is_never_an_image(id in "[0-9a-f]{8,17}") {
        let label = format!("ephemera.image=ami-{id}");
        let err = SizingRequest::from_labels(std::slice::from_ref(&label)).expect_err("an AMI id");
        prop_assert_eq!(err.rule, SizingRule::AmiId);
        prop_assert_eq!(err.label, label);
    }
}

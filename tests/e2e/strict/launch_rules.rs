//! CreateFleet's launches against the image they run, in the strict world: the layer
//! refuses, with EC2's codes, a root volume its type does not allow, io1 without IOPS,
//! an HDD root, a root volume below the image's snapshot, and an instance type of
//! another architecture than the image; and lets through what EC2 launches.

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetBlockDeviceMappingRequest, FleetEbsBlockDeviceRequest,
    FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest,
    FleetLaunchTemplateSpecificationRequest, FleetType, InstanceType,
    TargetCapacitySpecificationRequest, VolumeType,
};
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, ResourceNames};
use ephemera_tests::moto::Moto;

/// The root volume (`/dev/xvda`, the Amazon Linux image's root device) of `gib` GiB of
/// `kind`, with `iops` when given.
fn root(gib: i32, kind: VolumeType, iops: Option<i32>) -> FleetBlockDeviceMappingRequest {
    FleetBlockDeviceMappingRequest::builder()
        .device_name("/dev/xvda")
        .ebs(
            FleetEbsBlockDeviceRequest::builder()
                .volume_size(gib)
                .volume_type(kind)
                .set_iops(iops)
                .build(),
        )
        .build()
}

/// The code CreateFleet refused `override_` with, or `None` when it launched.
async fn launch(
    ec2: &aws_sdk_ec2::Client,
    template: &str,
    override_: FleetLaunchTemplateOverridesRequest,
) -> Option<String> {
    let config = FleetLaunchTemplateConfigRequest::builder()
        .launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_name(template)
                .version("$Default")
                .build(),
        )
        .overrides(override_)
        .build();
    let answer = ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .launch_template_configs(config)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(DefaultTargetCapacityType::OnDemand)
                .build(),
        )
        .send()
        .await;
    answer.err().map(|err| {
        let code = err.code().unwrap_or("no code").to_owned();
        format!("{code}: {}", err.message().unwrap_or_default())
    })
}

fn sized(
    instance_type: InstanceType,
    root: FleetBlockDeviceMappingRequest,
) -> FleetLaunchTemplateOverridesRequest {
    FleetLaunchTemplateOverridesRequest::builder()
        .instance_type(instance_type)
        .block_device_mappings(root)
        .build()
}

#[tokio::test]
async fn the_strict_layer_refuses_launches_ec2_refuses_for_their_volume_or_architecture(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let template = resources.launch_template.as_str();
    let x86 = InstanceType::M7iLarge;
    let cases = [
        (
            sized(x86.clone(), root(20_000, VolumeType::Gp3, None)),
            "InvalidParameterValue",
        ),
        (
            sized(x86.clone(), root(2_000, VolumeType::Standard, None)),
            "InvalidParameterValue",
        ),
        (
            sized(x86.clone(), root(80, VolumeType::Io1, None)),
            "InvalidParameterCombination",
        ),
        (
            sized(x86.clone(), root(80, VolumeType::Gp2, Some(3000))),
            "InvalidParameterCombination",
        ),
        (
            sized(x86.clone(), root(500, VolumeType::St1, None)),
            "InvalidBlockDeviceMapping",
        ),
        (
            sized(x86.clone(), root(10, VolumeType::Gp3, None)),
            "InvalidBlockDeviceMapping",
        ),
        (
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(InstanceType::M7gLarge)
                .build(),
            "InvalidParameterValue",
        ),
    ];
    let count = cases.len();
    for (override_, code) in cases {
        let shown = format!("{override_:?}");
        let refused = launch(&ec2, template, override_).await;
        assert!(
            refused.as_deref().is_some_and(|r| r.starts_with(code)),
            "{code} expected for {shown}: {refused:?}"
        );
    }
    let below_snapshot = launch(
        &ec2,
        template,
        sized(x86.clone(), root(10, VolumeType::Gp3, None)),
    )
    .await;
    assert!(
        below_snapshot
            .as_deref()
            .is_some_and(|r| r.contains("is smaller than snapshot") && r.contains(">= 15GB")),
        "{below_snapshot:?}"
    );
    let arch = launch(
        &ec2,
        template,
        FleetLaunchTemplateOverridesRequest::builder()
            .instance_type(InstanceType::M7gLarge)
            .build(),
    )
    .await;
    assert!(
        arch.as_deref()
            .is_some_and(|r| r.contains("'arm64' of the specified instance type")),
        "{arch:?}"
    );
    for allowed in [
        sized(x86.clone(), root(15, VolumeType::Gp3, None)),
        sized(x86.clone(), root(1024, VolumeType::Standard, None)),
        sized(x86.clone(), root(80, VolumeType::Gp3, Some(3000))),
        FleetLaunchTemplateOverridesRequest::builder()
            .instance_type(x86.clone())
            .build(),
    ] {
        let shown = format!("{allowed:?}");
        assert_eq!(launch(&ec2, template, allowed).await, None, "{shown}");
    }
    let counted = moto.strict_stats().await?.count("ec2_fleet_launch_rules");
    assert_eq!(counted, count as u64 + 2);
    Ok(())
}

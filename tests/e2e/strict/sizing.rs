//! CreateFleet's overrides in the strict world: the layer refuses a malformed
//! `InstanceRequirements` (Min above Max, no VCpuCount.Min, InstanceType beside it) and
//! more than 300 overrides with EC2's codes, where moto would launch; and a sized launch
//! through the fleet adapter comes up as an instance of a type that matches its shape,
//! with the root volume it asked.

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceRequirementsRequest, InstanceType, MemoryMiBRequest,
    TargetCapacitySpecificationRequest, VCpuCountRangeRequest,
};
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, Ec2Fleet, ResourceNames};
use ephemera_core::ports::{FleetRequest, Launcher, Market, RootVolume, Shape, TemplateVersion};
use ephemera_tests::moto::Moto;

fn requirements(vcpus: (Option<i32>, i32), memory_min: i32) -> InstanceRequirementsRequest {
    InstanceRequirementsRequest::builder()
        .v_cpu_count(
            VCpuCountRangeRequest::builder()
                .set_min(vcpus.0)
                .max(vcpus.1)
                .build(),
        )
        .memory_mib(MemoryMiBRequest::builder().min(memory_min).build())
        .build()
}

async fn create_fleet(
    ec2: &aws_sdk_ec2::Client,
    template: &str,
    overrides: Vec<FleetLaunchTemplateOverridesRequest>,
) -> Option<String> {
    let config = FleetLaunchTemplateConfigRequest::builder()
        .launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_name(template)
                .version("$Default")
                .build(),
        )
        .set_overrides(Some(overrides))
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
    answer
        .err()
        .map(|err| err.code().unwrap_or("no code").to_owned())
}

#[tokio::test]
async fn the_strict_layer_refuses_malformed_instance_requirements_as_ec2_does() -> anyhow::Result<()>
{
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let template = resources.launch_template.as_str();
    let with = |r: InstanceRequirementsRequest| {
        FleetLaunchTemplateOverridesRequest::builder()
            .instance_requirements(r)
            .build()
    };

    let min_above_max = with(requirements((Some(16), 8), 1024));
    let no_min = with(requirements((None, 8), 1024));
    let both = FleetLaunchTemplateOverridesRequest::builder()
        .instance_type(InstanceType::M7i2xlarge)
        .instance_requirements(requirements((Some(8), 8), 32_768))
        .build();
    let too_many: Vec<_> = (0..301)
        .map(|_| {
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(InstanceType::T3Micro)
                .build()
        })
        .collect();
    let refusals = [
        create_fleet(&ec2, template, vec![min_above_max]).await,
        create_fleet(&ec2, template, vec![no_min]).await,
        create_fleet(&ec2, template, vec![both]).await,
        create_fleet(&ec2, template, too_many).await,
    ];
    assert_eq!(
        refusals.map(|r| r.unwrap_or_default()),
        [
            "InvalidParameterValue",
            "InvalidParameterValue",
            "InvalidParameterCombination",
            "InvalidParameterValue"
        ]
    );
    let well_formed = with(requirements((Some(8), 8), 32_768));
    assert_eq!(create_fleet(&ec2, template, vec![well_formed]).await, None);
    assert_eq!(moto.strict_stats().await?.count("ec2_fleet_overrides"), 4);
    Ok(())
}

#[tokio::test]
async fn a_sized_launch_comes_up_as_a_matching_type_with_its_root_volume() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let fleet = Ec2Fleet::new(ec2.clone(), "eph");
    let request = FleetRequest {
        pool: "sized".to_owned(),
        count: 1,
        launch_template: resources.launch_template.clone(),
        template_version: TemplateVersion::Named("$Default".to_owned()),
        ami: None,
        instance_types: vec!["m7i.large".to_owned()],
        subnets: Vec::new(),
        market: Market::OnDemand,
        spot_allocation: Default::default(),
        shape: Some(Shape {
            vcpus_min: 8,
            vcpus_max: 8,
            memory_mib_min: 32_768,
            memory_mib_max: Some(32_768),
            families: vec!["m7i".to_owned(), "m7a".to_owned()],
            architecture: None,
        }),
        root_volume: Some(RootVolume {
            gib: 80,
            volume_type: Some("gp3".to_owned()),
        }),
    };
    let launch = fleet.launch(&request).await?;
    assert_eq!(launch.instance_ids.len(), 1, "one instance for one runner");
    let described = ec2
        .describe_instances()
        .instance_ids(&launch.instance_ids[0])
        .send()
        .await?;
    let instance = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .next()
        .expect("the instance");
    let launched = instance.instance_type().map(|t| t.as_str().to_owned());
    assert!(
        matches!(launched.as_deref(), Some("m7i.2xlarge" | "m7a.2xlarge")),
        "{launched:?}"
    );
    let root = instance.root_device_name().expect("a root device");
    let volume_id = instance
        .block_device_mappings()
        .iter()
        .find(|m| m.device_name() == Some(root))
        .and_then(|m| m.ebs())
        .and_then(|e| e.volume_id())
        .expect("the root volume");
    let volumes = ec2.describe_volumes().volume_ids(volume_id).send().await?;
    assert_eq!(volumes.volumes()[0].size(), Some(80));
    Ok(())
}

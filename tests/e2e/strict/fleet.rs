//! EC2 CreateFleet (instant) through the strict layer with its partial-fulfilment fault
//! on: fewer instances than asked, and one error per override that did not launch
//! (`Unsupported` in one subnet, `InsufficientInstanceCapacity` elsewhere), in EC2's
//! answer shape; the fleet adapter reads the shortfall as capacity.

use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceType, TargetCapacitySpecificationRequest,
};
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, Ec2Fleet, ResourceNames};
use ephemera_core::ports::{FleetError, FleetRequest, Launcher, Market, TemplateVersion};
use ephemera_tests::moto::Moto;
use serde_json::json;

async fn two_subnets(ec2: &aws_sdk_ec2::Client) -> anyhow::Result<(String, String)> {
    let subnets = ec2.describe_subnets().send().await?;
    let mut ids = subnets.subnets().iter().filter_map(|s| s.subnet_id());
    match (ids.next(), ids.next()) {
        (Some(a), Some(b)) => Ok((a.to_owned(), b.to_owned())),
        _ => anyhow::bail!("moto's default VPC has fewer than two subnets"),
    }
}

fn override_in(instance_type: &str, subnet: &str) -> FleetLaunchTemplateOverridesRequest {
    FleetLaunchTemplateOverridesRequest::builder()
        .instance_type(InstanceType::from(instance_type))
        .subnet_id(subnet)
        .build()
}

#[tokio::test]
async fn instant_fleet_launches_part_and_answers_one_error_per_failed_override(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let (zone_a, zone_b) = two_subnets(&ec2).await?;
    let fault = json!({"launch_at_most": 1, "unsupported_subnet": zone_b});
    moto.set_strict(json!({ "ec2_create_fleet_fault": fault }))
        .await?;

    let template = FleetLaunchTemplateConfigRequest::builder()
        .launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_name(&resources.launch_template)
                .version("$Default")
                .build(),
        )
        .overrides(override_in("t3.micro", &zone_a))
        .overrides(override_in("t3.micro", &zone_b))
        .overrides(override_in("t3.small", &zone_a))
        .build();
    let output = ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .launch_template_configs(template)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(3)
                .default_target_capacity_type(DefaultTargetCapacityType::OnDemand)
                .build(),
        )
        .send()
        .await?;
    let launched: Vec<&str> = output
        .instances()
        .iter()
        .flat_map(|set| set.instance_ids())
        .map(String::as_str)
        .collect();
    assert_eq!(launched.len(), 1, "{output:?}");
    let errors: Vec<(&str, &str, &str)> = output
        .errors()
        .iter()
        .map(|e| {
            let overrides = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            (
                e.error_code().unwrap_or_default(),
                overrides
                    .and_then(|o| o.instance_type())
                    .map_or("", |t| t.as_str()),
                overrides.and_then(|o| o.subnet_id()).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        errors,
        [
            ("Unsupported", "t3.micro", zone_b.as_str()),
            ("InsufficientInstanceCapacity", "t3.small", zone_a.as_str()),
        ]
    );
    for error in output.errors() {
        assert_eq!(error.lifecycle().map(|l| l.as_str()), Some("on-demand"));
        assert!(!error.error_message().unwrap_or_default().is_empty());
    }

    // The fleet adapter reads the partial answer as a capacity shortfall.
    let fleet = Ec2Fleet::new(ec2.clone(), "eph");
    let request = FleetRequest {
        pool: "linux".to_owned(),
        count: 3,
        launch_template: resources.launch_template.clone(),
        template_version: TemplateVersion::Stack,
        ami: None,
        instance_types: vec!["t3.micro".to_owned(), "t3.small".to_owned()],
        subnets: vec![zone_b.clone(), zone_a.clone()],
        market: Market::Spot,
        spot_allocation: Default::default(),
        shape: None,
        root_volume: None,
    };
    let launch = fleet.launch(&request).await?;
    assert_eq!(launch.instance_ids.len(), 1);
    assert!(
        matches!(&launch.shortfall, Some(FleetError::CapacityUnavailable(code)) if code == "InsufficientInstanceCapacity"),
        "{:?}",
        launch.shortfall
    );
    assert_eq!(
        moto.strict_stats().await?.count("ec2_create_fleet_partial"),
        2
    );
    Ok(())
}

/// `ephemera local` provisions the Session Manager template's twin, so a pool with
/// `ssm_access` launches there as it does on a deployed stack (CreateFleet refuses a
/// launch template that does not exist).
#[tokio::test]
async fn local_resources_include_the_session_manager_template_a_pool_launches_from(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let names = ResourceNames::for_deployment("eph");
    ensure_resources(&config, &names).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let (subnet, _) = two_subnets(&ec2).await?;
    let request = FleetRequest {
        pool: "debug".to_owned(),
        count: 1,
        launch_template: names.ssm_launch_template.clone(),
        template_version: TemplateVersion::Stack,
        ami: None,
        instance_types: vec!["t3.micro".to_owned()],
        subnets: vec![subnet],
        market: Market::OnDemand,
        spot_allocation: Default::default(),
        shape: None,
        root_volume: None,
    };
    let launch = Ec2Fleet::new(ec2.clone(), "eph").launch(&request).await?;
    assert_eq!(launch.instance_ids.len(), 1, "{:?}", launch.shortfall);
    Ok(())
}

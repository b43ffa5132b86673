//! The EC2 fleet against moto: launches carry the deployment's tags, listing sees only
//! this deployment, and terminating is idempotent.

use aws_sdk_ec2::types::{Filter, InstanceStateName};
use ephemera_aws::tags;
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, Ec2Fleet, ResourceNames};
use ephemera_core::ports::{
    Fleet, FleetError, FleetRequest, InstanceState, Launcher, Market, ShutdownBehaviour,
    TemplateVersion,
};
use ephemera_tests::moto::Moto;

fn request(count: u32) -> FleetRequest {
    FleetRequest {
        pool: "linux".to_owned(),
        count,
        launch_template: "eph-runner".to_owned(),
        template_version: TemplateVersion::Stack,
        ami: None,
        instance_types: vec!["t3.micro".to_owned(), "t3.small".to_owned()],
        subnets: Vec::new(),
        market: Market::OnDemand,
        spot_allocation: Default::default(),
        shape: None,
        root_volume: None,
    }
}

async fn tags_of(
    ec2: &aws_sdk_ec2::Client,
    instance_id: &str,
) -> anyhow::Result<Vec<aws_sdk_ec2::types::Tag>> {
    let output = ec2
        .describe_instances()
        .instance_ids(instance_id)
        .send()
        .await?;
    let instance = output
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .next()
        .ok_or_else(|| anyhow::anyhow!("{instance_id} not found"))?;
    Ok(instance.tags().to_vec())
}

fn assert_pool_tags(tags: &[aws_sdk_ec2::types::Tag]) {
    assert_eq!(tags::value(tags, tags::DEPLOYMENT), Some("eph"));
    assert_eq!(tags::value(tags, tags::POOL), Some("linux"));
    assert_eq!(tags::value(tags, tags::NAME), Some("eph-linux"));
}

#[tokio::test]
async fn fleet_launches_tagged_instances_from_a_template_and_from_an_ami() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let fleet = Ec2Fleet::new(ec2.clone(), "eph");

    // Three runners, one CreateFleet request.
    let mut from_template = request(3);
    from_template.launch_template = resources.launch_template.clone();
    let launch = fleet.launch(&from_template).await?;
    assert_eq!(launch.instance_ids.len(), 3, "{launch:?}");
    assert!(launch.shortfall.is_none());
    for id in &launch.instance_ids {
        assert_pool_tags(&tags_of(&ec2, id).await?);
        // The type CreateFleet's answer names, one of those offered (for `jobs show`).
        let chosen = launch.instance_types.get(id).expect("a type per instance");
        assert!(from_template.instance_types.contains(chosen), "{chosen}");
    }

    let image = ec2.describe_images().owners("amazon").send().await?;
    let ami = image
        .images()
        .first()
        .and_then(|i| i.image_id())
        .expect("moto ships images");
    let mut from_ami = request(2);
    from_ami.ami = Some(ami.to_owned());
    from_ami.market = Market::Spot;
    let launch = fleet.launch(&from_ami).await?;
    assert_eq!(launch.instance_ids.len(), 2);
    let id = &launch.instance_ids[0];
    assert_pool_tags(&tags_of(&ec2, id).await?);
    let volumes = ec2
        .describe_volumes()
        .filters(
            Filter::builder()
                .name("attachment.instance-id")
                .values(id)
                .build(),
        )
        .send()
        .await?;
    assert!(!volumes.volumes().is_empty(), "the root volume is attached");
    // An `ami` launch goes through the template (CreateFleet, whose instant fleets tag
    // instances only) with the image as an override.
    let described = ec2.describe_instances().instance_ids(id).send().await?;
    let image_of = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.image_id());
    assert_eq!(image_of, Some(ami), "the pool's image, not the template's");

    let mut bad = request(1);
    bad.launch_template = "no-such-template".to_owned();
    match fleet.launch(&bad).await {
        Err(FleetError::Rejected { code, .. }) => {
            assert!(code.starts_with("InvalidLaunchTemplate"), "{code}")
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn fleet_describes_only_this_deployment_and_terminates_idempotently() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let ours = Ec2Fleet::new(ec2.clone(), "eph");
    let theirs = Ec2Fleet::new(ec2.clone(), "other");
    let mut launch = request(2);
    launch.launch_template = resources.launch_template.clone();
    let mut made = ours.launch(&launch).await?.instance_ids;
    made.sort();
    let (a, b) = (made[0].clone(), made[1].clone());
    launch.count = 1;
    let c = theirs.launch(&launch).await?.instance_ids.remove(0);

    let mut seen = ours.describe().await?;
    seen.sort_by(|x, y| x.id.cmp(&y.id));
    let ids: Vec<&str> = seen.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, [a.as_str(), b.as_str()]);
    assert_eq!(seen[0].pool.as_deref(), Some("linux"));
    assert!(seen[0].launched_at.is_some());
    assert!(matches!(
        seen[0].state,
        InstanceState::Pending | InstanceState::Running
    ));
    assert_eq!(theirs.describe().await?.len(), 1);

    ours.terminate(&a).await?;
    ours.terminate(&a).await?;
    ours.terminate("i-0123456789abcdef0").await?;
    let after = ours.describe().await?;
    let a_state = after.iter().find(|i| i.id == a).map(|i| i.state);
    assert!(matches!(
        a_state,
        Some(InstanceState::ShuttingDown | InstanceState::Terminated)
    ));
    let c_state = ec2.describe_instances().instance_ids(&c).send().await?;
    let c_state = c_state
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.state().and_then(|s| s.name()).cloned());
    assert_eq!(
        c_state,
        Some(InstanceStateName::Running),
        "another deployment's instance is untouched"
    );
    Ok(())
}

#[tokio::test]
async fn spot_launches_ask_the_pools_allocation_strategy_price_capacity_optimized_by_default(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let fleet = Ec2Fleet::new(ec2.clone(), "eph");
    let strategies = [
        (Default::default(), "price-capacity-optimized"),
        (
            ephemera_core::config::SpotAllocation::CapacityOptimized,
            "capacity-optimized",
        ),
    ];
    for (spot_allocation, expected) in strategies {
        let spot = FleetRequest {
            market: Market::Spot,
            spot_allocation,
            ..request(1)
        };
        fleet.launch(&spot).await?;
        let fleets = ec2.describe_fleets().send().await?;
        let asked: Vec<&str> = fleets
            .fleets()
            .iter()
            .filter_map(|f| f.spot_options()?.allocation_strategy())
            .map(|s| s.as_str())
            .collect();
        assert!(asked.contains(&expected), "{expected} not in {asked:?}");
    }
    Ok(())
}

#[tokio::test]
async fn the_scaler_starts_a_stopped_instance_of_its_deployment_and_reads_a_refusal_as_capacity(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let fleet = Ec2Fleet::new(ec2.clone(), "eph");
    let mut from_template = request(1);
    from_template.launch_template = resources.launch_template.clone();
    let launch = fleet.launch(&from_template).await?;
    let id = launch.instance_ids[0].clone();
    moto.pause_strict_clock().await?;
    ec2.stop_instances().instance_ids(&id).send().await?;
    moto.advance_strict_clock(std::time::Duration::from_secs(3))
        .await?;
    // As template.yaml's ScalerRole: its grant is on the deployment's tagged instances.
    let scaler = sdk_config(&moto.role_settings("ScalerRole", "eph").await?).await;
    let scaler_fleet = Ec2Fleet::new(aws_sdk_ec2::Client::new(&scaler), "eph");

    moto.set_strict(serde_json::json!({"ec2_start_insufficient_capacity": 1}))
        .await?;
    match scaler_fleet.start(&id).await {
        Err(FleetError::CapacityUnavailable(code)) => {
            assert_eq!(code, "InsufficientInstanceCapacity")
        }
        other => panic!("expected a capacity refusal, got {other:?}"),
    }
    scaler_fleet.start(&id).await?;
    let states = ec2.describe_instances().instance_ids(&id).send().await?;
    let state = states
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.state().and_then(|s| s.name()).cloned());
    assert_eq!(state, Some(InstanceStateName::Pending));
    Ok(())
}

/// The instance's `InstanceInitiatedShutdownBehavior`, as EC2 describes it.
async fn shutdown_behaviour(ec2: &aws_sdk_ec2::Client, id: &str) -> anyhow::Result<String> {
    let attribute = ec2
        .describe_instance_attribute()
        .instance_id(id)
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::InstanceInitiatedShutdownBehavior)
        .send()
        .await?;
    Ok(attribute
        .instance_initiated_shutdown_behavior()
        .and_then(|v| v.value())
        .unwrap_or_default()
        .to_owned())
}

#[tokio::test]
async fn the_scaler_sets_a_stopped_pool_instance_to_stop_and_the_reaper_back_to_terminate(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let fleet = Ec2Fleet::new(ec2.clone(), "eph");
    let mut from_template = request(1);
    from_template.launch_template = resources.launch_template.clone();
    let id = fleet.launch(&from_template).await?.instance_ids[0].clone();
    // Each as its template.yaml role: the grants are on the deployment's tagged instances.
    let scaler = sdk_config(&moto.role_settings("ScalerRole", "eph").await?).await;
    let scaler_fleet = Ec2Fleet::new(aws_sdk_ec2::Client::new(&scaler), "eph");
    let reaper = sdk_config(&moto.role_settings("ReaperRole", "eph").await?).await;
    let reaper_fleet = Ec2Fleet::new(aws_sdk_ec2::Client::new(&reaper), "eph");

    Launcher::set_shutdown_behaviour(&scaler_fleet, &id, ShutdownBehaviour::Stop).await?;
    assert_eq!(shutdown_behaviour(&ec2, &id).await?, "stop");
    Fleet::set_shutdown_behaviour(&reaper_fleet, &id, ShutdownBehaviour::Terminate).await?;
    assert_eq!(shutdown_behaviour(&ec2, &id).await?, "terminate");
    Ok(())
}

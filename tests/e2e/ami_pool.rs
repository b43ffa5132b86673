//! A pool that names an `ami` launches through the deployment's launch template with the
//! image as an override (moto, with CreateFleet building instances from the template's
//! data as EC2 does): its instances carry the template's instance profile, user data,
//! security groups and IMDSv2 settings, run the pool's image, and have the template's
//! root volume on the image's own root device.

use anyhow::Context;

use aws_sdk_ec2::types::{
    Filter, HttpTokensState, InstanceAttributeName, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataOptionsRequest, RequestLaunchTemplateData, ResourceType,
    ShutdownBehavior, Tag, TagSpecification, VolumeType,
};
use base64::Engine;
use ephemera_aws::{sdk_config, AwsSettings, Ec2Fleet};
use ephemera_core::names::launch_template_name;
use ephemera_core::ports::{FleetRequest, Launcher, Market, TemplateVersion};
use ephemera_tests::moto::Moto;

const USER_DATA: &str = "#!/bin/bash\necho bootstrap\n";

/// An instance profile made the way the stack makes it (CloudFormation on moto).
async fn instance_profile(sdk: &aws_config::SdkConfig) -> anyhow::Result<String> {
    let cfn = aws_sdk_cloudformation::Client::new(sdk);
    let body = r#"{"Resources": {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}}},
        "Profile": {"Type": "AWS::IAM::InstanceProfile", "Properties": {"Roles": [{"Ref": "Role"}]}}},
      "Outputs": {"Arn": {"Value": {"Fn::GetAtt": ["Profile", "Arn"]}}}}"#;
    cfn.create_stack()
        .stack_name("runner-profile")
        .template_body(body)
        .send()
        .await?;
    let stacks = cfn
        .describe_stacks()
        .stack_name("runner-profile")
        .send()
        .await?;
    let arn = stacks
        .stacks()
        .first()
        .and_then(|s| s.outputs().first())
        .and_then(|o| o.output_value())
        .context("the profile stack has its Arn output")?;
    Ok(arn.to_owned())
}

async fn image_named(ec2: &aws_sdk_ec2::Client, pattern: &str) -> anyhow::Result<(String, String)> {
    let filter = Filter::builder().name("name").values(pattern).build();
    let images = ec2.describe_images().filters(filter).send().await?;
    let image = images.images().first().context("moto ships the image")?;
    Ok((
        image.image_id().context("image id")?.to_owned(),
        image.root_device_name().context("root device")?.to_owned(),
    ))
}

#[tokio::test]
async fn an_ami_pool_launches_through_the_deployment_template_with_its_image() -> anyhow::Result<()>
{
    let moto = Moto::start().await?;
    let sdk = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let profile = instance_profile(&sdk).await?;
    let vpc = ec2.create_vpc().cidr_block("10.8.0.0/16").send().await?;
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).context("vpc")?;
    let mut subnets = Vec::new();
    for cidr in ["10.8.1.0/24", "10.8.2.0/24"] {
        let made = ec2
            .create_subnet()
            .vpc_id(vpc_id)
            .cidr_block(cidr)
            .send()
            .await?;
        subnets.push(
            made.subnet()
                .and_then(|s| s.subnet_id())
                .context("subnet")?
                .to_owned(),
        );
    }
    let group = ec2
        .create_security_group()
        .group_name("runners")
        .description("runners")
        .vpc_id(vpc_id)
        .send()
        .await?;
    let group_id = group.group_id().context("group")?.to_owned();

    // The deployment's template, as the stack makes it: an Amazon Linux image whose root
    // is /dev/xvda, and a 30 GiB root volume named for it.
    let (template_image, template_root) = image_named(&ec2, "amzn*").await?;
    assert_eq!(template_root, "/dev/xvda");
    let data = RequestLaunchTemplateData::builder()
        .image_id(template_image)
        .iam_instance_profile(
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .arn(&profile)
                .build(),
        )
        .security_group_ids(&group_id)
        .user_data(base64::engine::general_purpose::STANDARD.encode(USER_DATA))
        .instance_initiated_shutdown_behavior(ShutdownBehavior::Terminate)
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_tokens(LaunchTemplateHttpTokensState::Required)
                .http_put_response_hop_limit(2)
                .build(),
        )
        .block_device_mappings(
            LaunchTemplateBlockDeviceMappingRequest::builder()
                .device_name(&template_root)
                .ebs(
                    LaunchTemplateEbsBlockDeviceRequest::builder()
                        .volume_size(30)
                        .volume_type(VolumeType::Gp3)
                        .encrypted(true)
                        .delete_on_termination(true)
                        .build(),
                )
                .build(),
        )
        .build();
    ec2.create_launch_template()
        .launch_template_name(launch_template_name("eph"))
        .launch_template_data(data)
        .tag_specifications(deployment_tag())
        .send()
        .await?;

    // The pool's image is Ubuntu, whose root device is /dev/sda1.
    let (ubuntu, ubuntu_root) = image_named(&ec2, "ubuntu*").await?;
    assert_eq!(ubuntu_root, "/dev/sda1");
    let request = FleetRequest {
        pool: "ubuntu".to_owned(),
        count: 2,
        launch_template: launch_template_name("eph"),
        template_version: TemplateVersion::Stack,
        ami: Some(ubuntu.clone()),
        instance_types: vec!["t3.micro".to_owned(), "t3.small".to_owned()],
        subnets: subnets.clone(),
        market: Market::OnDemand,
        spot_allocation: Default::default(),
        shape: None,
        root_volume: None,
    };
    let launch = Ec2Fleet::new(ec2.clone(), "eph").launch(&request).await?;
    assert_eq!(launch.instance_ids.len(), 2, "{launch:?}");

    for id in &launch.instance_ids {
        let described = ec2.describe_instances().instance_ids(id).send().await?;
        let instance = described
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .next()
            .context("instance described")?;
        assert_eq!(
            instance.image_id(),
            Some(ubuntu.as_str()),
            "the pool's image"
        );
        assert!(request
            .instance_types
            .iter()
            .any(|t| Some(t.as_str()) == instance.instance_type().map(|t| t.as_str())));
        assert!(subnets
            .iter()
            .any(|s| Some(s.as_str()) == instance.subnet_id()));
        let arn = instance.iam_instance_profile().and_then(|p| p.arn());
        assert_eq!(
            arn,
            Some(profile.as_str()),
            "the template's instance profile"
        );
        let groups: Vec<&str> = instance
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id())
            .collect();
        assert_eq!(
            groups,
            [group_id.as_str()],
            "the template's security groups"
        );
        let metadata = instance.metadata_options().context("metadata options")?;
        assert_eq!(
            metadata.http_tokens(),
            Some(&HttpTokensState::Required),
            "IMDSv2 only"
        );
        assert_eq!(metadata.http_put_response_hop_limit(), Some(2));
        let user_data = ec2
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(InstanceAttributeName::UserData)
            .send()
            .await?;
        let encoded = user_data
            .user_data()
            .and_then(|u| u.value())
            .context("user data")?;
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded)?;
        assert_eq!(decoded, USER_DATA.as_bytes(), "the template's user data");

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
        let attached: Vec<(String, i32)> = volumes
            .volumes()
            .iter()
            .map(|v| {
                let device = v
                    .attachments()
                    .first()
                    .and_then(|a| a.device())
                    .unwrap_or_default();
                (device.to_owned(), v.size().unwrap_or_default())
            })
            .collect();
        assert_eq!(
            attached,
            [(ubuntu_root.clone(), 30)],
            "one root volume, on the image's root device"
        );
    }
    Ok(())
}

/// The volumes attached to an instance: (device, GiB).
async fn volumes_of(ec2: &aws_sdk_ec2::Client, id: &str) -> anyhow::Result<Vec<(String, i32)>> {
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
    Ok(volumes
        .volumes()
        .iter()
        .map(|v| {
            let device = v
                .attachments()
                .first()
                .and_then(|a| a.device())
                .unwrap_or_default();
            (device.to_owned(), v.size().unwrap_or_default())
        })
        .collect())
}

/// The deployment's template `eph-runner` as the stack makes it, on `image` (an AMI id
/// or `resolve:ssm:NAME`) with a 30 GiB root volume named for /dev/xvda, and a request
/// for one on-demand runner of the pool `linux` through it.
async fn xvda_template_request(
    ec2: &aws_sdk_ec2::Client,
    image: &str,
) -> anyhow::Result<FleetRequest> {
    let data = RequestLaunchTemplateData::builder()
        .image_id(image)
        .instance_initiated_shutdown_behavior(ShutdownBehavior::Terminate)
        .block_device_mappings(
            LaunchTemplateBlockDeviceMappingRequest::builder()
                .device_name("/dev/xvda")
                .ebs(
                    LaunchTemplateEbsBlockDeviceRequest::builder()
                        .volume_size(30)
                        .volume_type(VolumeType::Gp3)
                        .encrypted(true)
                        .delete_on_termination(true)
                        .build(),
                )
                .build(),
        )
        .build();
    ec2.create_launch_template()
        .launch_template_name(launch_template_name("eph"))
        .launch_template_data(data)
        .tag_specifications(deployment_tag())
        .send()
        .await?;
    let request = FleetRequest {
        pool: "linux".to_owned(),
        count: 1,
        launch_template: launch_template_name("eph"),
        template_version: TemplateVersion::Stack,
        ami: None,
        instance_types: vec!["t3.micro".to_owned()],
        subnets: Vec::new(),
        market: Market::OnDemand,
        spot_allocation: Default::default(),
        shape: None,
        root_volume: None,
    };
    Ok(request)
}

#[tokio::test]
async fn a_deployment_template_on_an_ubuntu_image_gets_its_root_volume_on_sda1(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    // The stack's template names /dev/xvda, but its RunnerAmi is an Ubuntu image, whose
    // root device is /dev/sda1; the pool names no `ami` of its own.
    let (ubuntu, ubuntu_root) = image_named(&ec2, "ubuntu*").await?;
    assert_eq!(ubuntu_root, "/dev/sda1");
    let request = xvda_template_request(&ec2, &ubuntu).await?;
    let fleet = Ec2Fleet::new(ec2.clone(), "eph");
    // Twice: the second launch reuses what the first read.
    for _ in 0..2 {
        let launch = fleet.launch(&request).await?;
        assert_eq!(launch.instance_ids.len(), 1, "{launch:?}");
        let id = &launch.instance_ids[0];
        let image = launched_image(&ec2, id).await?;
        assert_eq!(image, ubuntu, "the template's image");
        assert_eq!(
            volumes_of(&ec2, id).await?,
            [(ubuntu_root.clone(), 30)],
            "one 30 GiB root volume on the image's root device, no extra /dev/xvda disk"
        );
    }
    Ok(())
}

/// A bake that moves the deployment's image parameter from an image whose root device is
/// /dev/xvda to one whose root is /dev/sda1 never gives a warm scaler's launch the
/// template's volume as a second disk beside the new image's small default root: the
/// launch runs the image whose root device was read.
#[tokio::test]
async fn a_bake_to_another_root_device_never_launches_with_the_old_images_mapping(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let (amazon, amazon_root) = image_named(&ec2, "amzn*").await?;
    let (ubuntu, ubuntu_root) = image_named(&ec2, "ubuntu*").await?;
    assert_eq!(
        (amazon_root.as_str(), ubuntu_root.as_str()),
        ("/dev/xvda", "/dev/sda1")
    );
    let parameter = "/ephemera/eph/runner-image/x86_64";
    // Image Builder's distribution writes the parameter with the pipeline's execution
    // role (infra/image/template.yaml); the scalers launch as theirs.
    let pipeline = sdk_config(&moto.image_role_settings("ExecutionRoleX86", "eph").await?).await;
    let pipeline_ssm = aws_sdk_ssm::Client::new(&pipeline);
    let scaler = sdk_config(&moto.role_settings("ScalerRole", "eph").await?).await;
    let scaler_ec2 = aws_sdk_ec2::Client::new(&scaler);
    let publish = |ami: String| {
        pipeline_ssm
            .put_parameter()
            .name(parameter)
            .value(ami)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .data_type("aws:ec2:image")
            .overwrite(true)
            .send()
    };
    publish(amazon.clone()).await?;
    let request = xvda_template_request(&ec2, &format!("resolve:ssm:{parameter}")).await?;
    let warm = Ec2Fleet::new(scaler_ec2.clone(), "eph");
    let first = warm.launch(&request).await?;
    let first = first.instance_ids.first().context("launched")?;
    assert_eq!(volumes_of(&ec2, first).await?, [(amazon_root.clone(), 30)]);

    publish(ubuntu.clone()).await?;
    let cold = Ec2Fleet::new(scaler_ec2.clone(), "eph");
    for (scaler, fleet) in [("warm", &warm), ("cold", &cold)] {
        let launch = fleet.launch(&request).await?;
        let id = launch.instance_ids.first().context("launched")?;
        let image = launched_image(&ec2, id).await?;
        let root = if image == amazon {
            &amazon_root
        } else {
            &ubuntu_root
        };
        assert_eq!(
            volumes_of(&ec2, id).await?,
            [(root.clone(), 30)],
            "the {scaler} scaler's runner ({image}) has one 30 GiB volume, on its own image's root device"
        );
        if scaler == "cold" {
            assert_eq!(
                image, ubuntu,
                "a scaler started after the bake launches the new image"
            );
        }
    }
    moto.stop().await;
    Ok(())
}

/// The launch template's tag of the deployment, as the stack's carries it: the scaler's
/// role launches from no other template.
fn deployment_tag() -> TagSpecification {
    TagSpecification::builder()
        .resource_type(ResourceType::LaunchTemplate)
        .tags(
            Tag::builder()
                .key("ephemera:deployment")
                .value("eph")
                .build(),
        )
        .build()
}

/// The image an instance was launched from.
async fn launched_image(ec2: &aws_sdk_ec2::Client, id: &str) -> anyhow::Result<String> {
    let described = ec2.describe_instances().instance_ids(id).send().await?;
    described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.image_id())
        .map(str::to_owned)
        .context("the instance's image")
}

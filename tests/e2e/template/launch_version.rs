//! A stack update reaches the next launch. CloudFormation writes a new version of the
//! runner launch template on every update and never moves its default version, so the
//! scaler launches the version the stack last wrote, which the stack passes to the
//! functions. On the stack template.yaml creates in moto (its updates reach what reads
//! a changed attribute, as CloudFormation's do: strict_moto/cfn_updates.py), an update of
//! the image or of the user data shows in the next instance; and an Ubuntu image gets
//! exactly one root volume, of the size the stack sets (CreateFleet's block-device
//! merge: strict_moto/fleet_templates.py).

use anyhow::{ensure, Context};
use aws_sdk_ec2::types::{Filter, InstanceAttributeName};
use base64::Engine;
use ephemera_aws::config_source::load_config_or_default;
use ephemera_aws::lambda::LAUNCH_TEMPLATE_VERSION;
use ephemera_aws::{AwsSettings, Ec2Fleet};
use ephemera_core::handlers::scaler::fleet_request;
use ephemera_core::ports::{Launcher, Market};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::stack::{create_stack_with, template_path, update_stack, Stack, StackSpec};

/// The default pool's instance type for moto's Amazon Linux and Ubuntu images, which are
/// x86_64 (the stack's default, m7g.large, runs only arm64 images).
const X86_TYPE: (&str, &str) = ("RunnerInstanceType", "m7i.large");

struct World {
    moto: Moto,
    sdk: aws_config::SdkConfig,
    spec: StackSpec,
}

impl World {
    async fn start(deployment: &str) -> anyhow::Result<World> {
        let moto = Moto::start().await?;
        let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
        let spec = StackSpec {
            stack_name: format!("ephemera-{deployment}"),
            deployment: deployment.into(),
            app_id: 4343,
            github_api_url: "http://127.0.0.1:9".into(),
            webhook_secret: "launch-webhook-secret".into(),
            app_key_pem: std::fs::read_to_string(workspace_path(
                "tests/fixtures/github-app-test-key.pem",
            ))?,
            pools_config: None,
        };
        Ok(World { moto, sdk, spec })
    }

    fn ec2(&self) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::new(&self.sdk)
    }

    /// An SSM parameter naming `image`, as the stack's `RunnerAmi` takes it.
    async fn image_parameter(&self, name: &str, image: &str) -> anyhow::Result<()> {
        aws_sdk_ssm::Client::new(&self.sdk)
            .put_parameter()
            .name(name)
            .value(image)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .overwrite(true)
            .send()
            .await?;
        Ok(())
    }

    /// One runner of the stack's default pool, launched as the scaler function is wired:
    /// the configuration it reads, and the fleet made from its environment, each call
    /// made as its role.
    async fn launch_one(&self, stack: &Stack) -> anyhow::Result<String> {
        let role = self
            .moto
            .role_settings("ScalerRole", &self.spec.deployment)
            .await?;
        let scaler = ephemera_aws::sdk_config(&role).await;
        let ssm = aws_sdk_ssm::Client::new(&scaler);
        let parameter = stack.function_env("ScalerFunction", "EPHEMERA_CONFIG_PARAMETER")?;
        let default = stack.function_env("ScalerFunction", "EPHEMERA_DEFAULT_CONFIG_PARAMETER")?;
        let config = load_config_or_default(&ssm, parameter, Some(default))
            .await?
            .config;
        let pool = config.pools.first().context("the stack's default pool")?;
        let request = fleet_request(&config.deployment, pool, 1, Market::OnDemand);
        let version = stack.function_env("ScalerFunction", LAUNCH_TEMPLATE_VERSION)?;
        let fleet = Ec2Fleet::new(aws_sdk_ec2::Client::new(&scaler), &config.deployment)
            .with_stack_template_version(version);
        let launch = fleet.launch(&request).await?;
        launch
            .instance_ids
            .first()
            .cloned()
            .with_context(|| format!("nothing launched: {launch:?}"))
    }

    async fn image_of(&self, instance_id: &str) -> anyhow::Result<String> {
        super::image::image_of(&self.ec2(), instance_id).await
    }

    async fn user_data_of(&self, instance_id: &str) -> anyhow::Result<String> {
        user_data_of(&self.ec2(), instance_id).await
    }

    /// (device, GiB) of every volume attached to the instance.
    async fn volumes_of(&self, instance_id: &str) -> anyhow::Result<Vec<(String, i32)>> {
        let volumes = self
            .ec2()
            .describe_volumes()
            .filters(
                Filter::builder()
                    .name("attachment.instance-id")
                    .values(instance_id)
                    .build(),
            )
            .send()
            .await?;
        let mut attached: Vec<(String, i32)> = volumes
            .volumes()
            .iter()
            .map(|v| {
                let device = v.attachments().first().and_then(|a| a.device());
                (
                    device.unwrap_or_default().to_owned(),
                    v.size().unwrap_or_default(),
                )
            })
            .collect();
        attached.sort();
        Ok(attached)
    }

    /// (default, latest) version numbers of the stack's launch template.
    async fn template_versions(&self, stack: &Stack) -> anyhow::Result<(i64, i64)> {
        let described = self
            .ec2()
            .describe_launch_templates()
            .launch_template_names(stack.output("LaunchTemplateName")?)
            .send()
            .await?;
        let template = described
            .launch_templates()
            .first()
            .context("the stack's launch template")?;
        Ok((
            template.default_version_number().unwrap_or_default(),
            template.latest_version_number().unwrap_or_default(),
        ))
    }

    /// The id and root device of the images moto ships whose name matches `pattern`.
    async fn images_named(&self, pattern: &str) -> anyhow::Result<Vec<(String, String)>> {
        let filter = Filter::builder().name("name").values(pattern).build();
        let images = self.ec2().describe_images().filters(filter).send().await?;
        Ok(images
            .images()
            .iter()
            .filter_map(|i| Some((i.image_id()?.to_owned(), i.root_device_name()?.to_owned())))
            .collect())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_stack_update_of_the_image_the_next_launch_runs_the_new_image() -> anyhow::Result<()>
{
    let world = World::start("lvami").await?;
    let images = world.images_named("amzn*").await?;
    ensure!(images.len() >= 2, "moto ships two Amazon Linux images");
    let (old, new) = (&images[0].0, &images[1].0);
    world.image_parameter("/lvami/ami-old", old).await?;
    let stack = create_stack_with(
        &world.moto,
        &template_path(),
        &world.spec,
        &[("RunnerAmi", "/lvami/ami-old"), X86_TYPE],
    )
    .await?;
    let first = world.launch_one(&stack).await?;
    ensure!(world.image_of(&first).await? == *old, "the stack's image");

    world.image_parameter("/lvami/ami-new", new).await?;
    let stack = update_stack(
        &world.moto,
        &template_path(),
        &world.spec,
        &[("RunnerAmi", "/lvami/ami-new"), X86_TYPE],
    )
    .await?;
    ensure!(
        world.template_versions(&stack).await? == (1, 2),
        "CloudFormation adds a version and leaves the default where it was"
    );
    let next = world.launch_one(&stack).await?;
    let image = world.image_of(&next).await?;
    ensure!(
        image == *new,
        "the launch after the update runs the updated image {new}, not {image}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_stack_update_of_the_user_data_the_next_launch_boots_it() -> anyhow::Result<()> {
    let world = World::start("lvdata").await?;
    let stack = create_stack_with(&world.moto, &template_path(), &world.spec, &[]).await?;
    let first = world.launch_one(&stack).await?;
    ensure!(world
        .user_data_of(&first)
        .await?
        .contains("EPHEMERA_RUNNER_VERSION='latest'"));

    let stack = update_stack(
        &world.moto,
        &template_path(),
        &world.spec,
        &[("RunnerVersion", "2.999.1")],
    )
    .await?;
    let next = world.launch_one(&stack).await?;
    let user_data = world.user_data_of(&next).await?;
    ensure!(
        user_data.contains("EPHEMERA_RUNNER_VERSION='2.999.1'"),
        "the launch after the update boots the updated user data:\n{}",
        user_data.lines().take(2).collect::<Vec<_>>().join("\n")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ubuntu_image_gets_exactly_one_root_volume_of_the_configured_size() -> anyhow::Result<()>
{
    let world = World::start("lvroot").await?;
    let ubuntu = world.images_named("ubuntu*").await?;
    let (image, root) = ubuntu.first().context("moto ships an Ubuntu image")?;
    ensure!(root == "/dev/sda1", "Ubuntu's root device: {root}");
    world.image_parameter("/lvroot/ubuntu", image).await?;
    let stack = create_stack_with(
        &world.moto,
        &template_path(),
        &world.spec,
        &[
            ("RunnerAmi", "/lvroot/ubuntu"),
            ("RunnerVolumeSize", "40"),
            X86_TYPE,
        ],
    )
    .await?;
    let instance = world.launch_one(&stack).await?;
    ensure!(world.image_of(&instance).await? == *image);
    let volumes = world.volumes_of(&instance).await?;
    ensure!(
        volumes == [("/dev/sda1".to_owned(), 40)],
        "one 40 GiB root volume on /dev/sda1 and no other disk: {volumes:?}"
    );
    Ok(())
}

/// The user data instance `instance_id` was launched with, decoded.
pub(super) async fn user_data_of(
    ec2: &aws_sdk_ec2::Client,
    instance_id: &str,
) -> anyhow::Result<String> {
    let attribute = ec2
        .describe_instance_attribute()
        .instance_id(instance_id)
        .attribute(InstanceAttributeName::UserData)
        .send()
        .await?;
    let encoded = attribute
        .user_data()
        .and_then(|u| u.value())
        .context("user data")?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded)?;
    Ok(String::from_utf8(decoded)?)
}

//! A pool with `ssm_access` launches through the stack's Session Manager template, and a
//! pool without it does not. On the stack template.yaml creates in moto (whose CreateFleet
//! builds each instance from its launch template: strict_moto/fleet_templates.py), one
//! runner of each pool, launched as the scaler function is wired, carries the instance
//! profile of its template; and after a stack update the SSM pool launches the version
//! the stack last wrote, like the runner template.

use super::launch_version::user_data_of;
use anyhow::{ensure, Context};
use ephemera_aws::config_source::load_config_or_default;
use ephemera_aws::lambda::{LAUNCH_TEMPLATE_VERSION, SSM_LAUNCH_TEMPLATE_VERSION};
use ephemera_aws::{AwsSettings, Ec2Fleet};
use ephemera_core::handlers::scaler::fleet_request;
use ephemera_core::ports::{Launcher, Market};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::stack::{create_stack_with, template_path, update_stack, Stack, StackSpec};

const DEPLOYMENT: &str = "ssmacc";

/// Two pools of arm64 types, for the stack's default image (Amazon Linux 2023 arm64).
fn pools() -> String {
    format!(
        "pools: [{{name: shell, labels: [self-hosted, shell], max_runners: 2, \
         instance_types: [t4g.micro], launch_template: {DEPLOYMENT}-runner, ssm_access: true}}, \
         {{name: plain, labels: [self-hosted, plain], max_runners: 2, \
         instance_types: [t4g.micro], launch_template: {DEPLOYMENT}-runner}}]"
    )
}

/// One runner of `pool`, launched from the configuration and environment the stack gives
/// the scaler function, with `sdk` calling AWS as its role; its instance id.
async fn launch_one(
    sdk: &aws_config::SdkConfig,
    stack: &Stack,
    pool: &str,
) -> anyhow::Result<String> {
    let ssm = aws_sdk_ssm::Client::new(sdk);
    let parameter = stack.function_env("ScalerFunction", "EPHEMERA_CONFIG_PARAMETER")?;
    let default = stack.function_env("ScalerFunction", "EPHEMERA_DEFAULT_CONFIG_PARAMETER")?;
    let config = load_config_or_default(&ssm, parameter, Some(default))
        .await?
        .config;
    let pool = config.pool(pool).context("the pool")?;
    let request = fleet_request(&config.deployment, pool, 1, Market::OnDemand);
    let fleet = Ec2Fleet::new(aws_sdk_ec2::Client::new(sdk), &config.deployment)
        .with_stack_template_version(stack.function_env("ScalerFunction", LAUNCH_TEMPLATE_VERSION)?)
        .with_ssm_template_version(
            stack.function_env("ScalerFunction", SSM_LAUNCH_TEMPLATE_VERSION)?,
        );
    let launch = fleet.launch(&request).await?;
    launch
        .instance_ids
        .first()
        .cloned()
        .with_context(|| format!("nothing launched: {launch:?}"))
}

/// The ARN of the instance profile `instance` runs with.
async fn profile_of(ec2: &aws_sdk_ec2::Client, instance: &str) -> anyhow::Result<String> {
    let described = ec2
        .describe_instances()
        .instance_ids(instance)
        .send()
        .await?;
    described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.iam_instance_profile().and_then(|p| p.arn()))
        .map(str::to_owned)
        .with_context(|| format!("{instance} has no instance profile"))
}

/// The stack's name of instance profile `logical_id` (moto's physical id).
fn profile_name<'a>(stack: &'a Stack, logical_id: &str) -> anyhow::Result<&'a str> {
    stack
        .resources
        .iter()
        .find(|(id, _, _)| id == logical_id)
        .map(|(_, _, physical)| physical.as_str())
        .with_context(|| format!("the stack made no {logical_id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_pool_with_ssm_access_launches_with_the_session_manager_profile(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let spec = StackSpec {
        stack_name: format!("ephemera-{DEPLOYMENT}"),
        deployment: DEPLOYMENT.into(),
        app_id: 4343,
        github_api_url: "http://127.0.0.1:9".into(),
        webhook_secret: "ssm-webhook-secret".into(),
        app_key_pem: std::fs::read_to_string(workspace_path(
            "tests/fixtures/github-app-test-key.pem",
        ))?,
        pools_config: None,
    };
    let pools = pools();
    let stack =
        create_stack_with(&moto, &template_path(), &spec, &[("PoolsConfig", &pools)]).await?;
    ensure!(stack.output("SsmLaunchTemplateName")? == format!("{DEPLOYMENT}-runner-ssm"));
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let ssm_profile = profile_name(&stack, "RunnerSsmInstanceProfile")?;
    let runner_profile = profile_name(&stack, "RunnerInstanceProfile")?;
    ensure!(ssm_profile != runner_profile);
    let scaler =
        ephemera_aws::sdk_config(&moto.role_settings("ScalerRole", DEPLOYMENT).await?).await;

    let shell = launch_one(&scaler, &stack, "shell").await?;
    let plain = launch_one(&scaler, &stack, "plain").await?;
    let (shell_profile, plain_profile) = (
        profile_of(&ec2, &shell).await?,
        profile_of(&ec2, &plain).await?,
    );
    ensure!(
        shell_profile.ends_with(&format!("/{ssm_profile}")),
        "the ssm_access pool's instance runs with {shell_profile}, not {ssm_profile}"
    );
    ensure!(
        plain_profile.ends_with(&format!("/{runner_profile}")),
        "the pool without ssm_access runs with {plain_profile}, not {runner_profile}"
    );
    ensure!(user_data_of(&ec2, &shell).await? == user_data_of(&ec2, &plain).await?);

    let stack = update_stack(
        &moto,
        &template_path(),
        &spec,
        &[("PoolsConfig", &pools), ("RunnerVersion", "2.999.1")],
    )
    .await?;
    let next = launch_one(&scaler, &stack, "shell").await?;
    let user_data = user_data_of(&ec2, &next).await?;
    ensure!(
        user_data.contains("EPHEMERA_RUNNER_VERSION='2.999.1'"),
        "after the update the ssm_access pool boots the updated user data:\n{}",
        user_data.lines().take(2).collect::<Vec<_>>().join("\n")
    );
    ensure!(profile_of(&ec2, &next)
        .await?
        .ends_with(&format!("/{ssm_profile}")));
    moto.stop().await;
    Ok(())
}

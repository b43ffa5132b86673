//! A redeploy keeps a pushed configuration: the stack template.yaml creates in moto runs
//! its default configuration until `ephemera config push --stack` writes the
//! deployment's configuration parameter, which the stack does not own; applying the
//! template again (a `sam deploy` with a changed parameter) rewrites the stack's default
//! and leaves the pushed configuration in force.

use crate::cli::{config_yaml, ephemera, stdout_of, Scratch};
use anyhow::ensure;
use ephemera_aws::config_source::load_config_or_default;
use ephemera_aws::AwsSettings;
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::stack::{create_stack, template_path, update_stack, Stack, StackSpec};

const DEPLOYMENT: &str = "rdp";
const STACK: &str = "ephemera-redeploy";

/// The pools of the configuration the scaler function reads now, with their sizes.
async fn scaler_pools(
    ssm: &aws_sdk_ssm::Client,
    stack: &Stack,
) -> anyhow::Result<Vec<(String, u32)>> {
    let parameter = stack.function_env("ScalerFunction", "EPHEMERA_CONFIG_PARAMETER")?;
    let default = stack.function_env("ScalerFunction", "EPHEMERA_DEFAULT_CONFIG_PARAMETER")?;
    let loaded = load_config_or_default(ssm, parameter, Some(default)).await?;
    Ok(loaded
        .config
        .pools
        .iter()
        .map(|pool| (pool.name.clone(), pool.max_runners))
        .collect())
}

/// The value of the SSM parameter `name`.
async fn parameter(ssm: &aws_sdk_ssm::Client, name: &str) -> anyhow::Result<(String, i64)> {
    let output = ssm.get_parameter().name(name).send().await?;
    let parameter = output.parameter().expect("a parameter");
    Ok((
        parameter.value().unwrap_or_default().to_owned(),
        parameter.version(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redeploy_keeps_a_pushed_configuration() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let spec = StackSpec {
        stack_name: STACK.into(),
        deployment: DEPLOYMENT.into(),
        app_id: 4343,
        github_api_url: "http://127.0.0.1:9".into(),
        webhook_secret: "redeploy-webhook-secret".into(),
        app_key_pem: std::fs::read_to_string(workspace_path(
            "tests/fixtures/github-app-test-key.pem",
        ))?,
        pools_config: None,
    };
    let stack = create_stack(&moto, &template_path(), &spec).await?;
    let pushed_name = stack.output("ConfigParameterName")?.to_owned();
    let default_name = stack.output("DefaultConfigParameterName")?.to_owned();
    ensure!(pushed_name != default_name);
    ensure!(
        !stack
            .resources
            .iter()
            .any(|(_, _, physical)| *physical == pushed_name),
        "the stack must not own {pushed_name}: {:?}",
        stack.resources
    );
    ensure!(
        scaler_pools(&ssm, &stack).await? == [("linux-arm64".to_owned(), 10)],
        "nothing pushed: the stack's default pool"
    );

    let scratch = Scratch::new()?;
    let file = scratch.write(
        "config.yaml",
        &config_yaml(DEPLOYMENT, "http://127.0.0.1:9"),
    )?;
    let endpoint = moto.endpoint.clone();
    let pushed = tokio::task::spawn_blocking(move || {
        ephemera()?
            .args(["config", "push"])
            .arg(&file)
            .args(["--stack", STACK, "--endpoint-url", &endpoint])
            .args(["--region", "us-east-1"])
            .output()
            .map_err(anyhow::Error::from)
    })
    .await??;
    let said = stdout_of(&pushed);
    ensure!(
        pushed.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    ensure!(said.contains(&format!("to {pushed_name}")), "{said}");
    ensure!(
        said.contains("redeploying the stack does not change it"),
        "{said}"
    );
    let pushed_before = parameter(&ssm, &pushed_name).await?;
    ensure!(scaler_pools(&ssm, &stack).await? == [("linux-x64".to_owned(), 10)]);

    // `sam deploy` again, with other pools for the stack's default configuration.
    let pools = format!(
        "pools: [{{name: linux-arm64, labels: [self-hosted, linux, ARM64], max_runners: 7, \
         instance_types: [m7g.large], launch_template: {DEPLOYMENT}-runner}}]"
    );
    let stack = update_stack(&moto, &template_path(), &spec, &[("PoolsConfig", &pools)]).await?;
    let (default_text, _) = parameter(&ssm, &default_name).await?;
    ensure!(
        default_text.contains("max_runners: 7"),
        "the redeploy rewrote the stack's default:\n{default_text}"
    );
    ensure!(
        parameter(&ssm, &pushed_name).await? == pushed_before,
        "the pushed configuration is untouched"
    );
    ensure!(
        scaler_pools(&ssm, &stack).await? == [("linux-x64".to_owned(), 10)],
        "the functions still read the pushed configuration"
    );
    moto.stop().await;
    Ok(())
}

//! `ephemera doctor` through the real binary, against the stack template.yaml creates in
//! moto and the GitHub simulator: the healthy deployment passes every check, and each
//! broken setup (placeholder key, App not installed, wrong webhook URL, missing
//! permission, missing event, unknown subnet) fails exactly the check that names it,
//! with its fix, and exit code 8; a subnet too small for the pool's `max_runners` warns,
//! naming it as what binds the burst the account can take.
//!
//! moto cannot create the webhook's Function URL (the stack has no `WebhookUrl` output
//! there), so the tests give the URL with `--webhook-url`. moto answers any `DryRun`
//! with `DryRunOperation` without validating the launch, so a bad subnet is caught by
//! `ec2.subnets` here (the dry run is then not run, as on AWS).
//!
//! moto runs no function, so the test records the configuration the functions would
//! run (`ephemera_aws::running`, as their cold start does; `lambda::follow` checks that
//! the real functions write it) before `config.running` can pass.
//!
//! moto implements Service Quotas for the `vpc` service only (GetServiceQuota answers
//! NoSuchResourceException for EC2's vCPU quotas and Lambda's concurrent executions, and
//! it has no GetAWSDefaultServiceQuota), so here `quotas.vcpu`, `lambda.concurrency` and
//! `webhook.concurrency` warn that the quota is unknown, and nothing else may warn; it
//! knows vpc's "Network interfaces per Region" (5,000), which `capacity.network_interfaces`
//! reads as on AWS. moto counts a subnet's free addresses as AWS does (its size less the
//! 5 reserved, less the addresses of its network interfaces). The
//! "quota too low" setups are tested on the ports
//! (`functions/cli/src/cmd/doctor/tests/account.rs`: on-demand, spot, a G type, Lambda
//! concurrency; `functions/cli/src/cmd/doctor/flood.rs`: the webhook's reservation).
//! moto does not implement IAM's SimulatePrincipalPolicy either: `iam.simulate` warns for
//! each role here; its decisions are tested on the ports, and the requests it makes are
//! checked against template.yaml's policies by `template::simulations`.
//! moto parses CloudWatch in the query and JSON protocols only, and the CloudWatch SDK
//! speaks Smithy RPC v2 CBOR: the strict layer translates it (`strict_moto/rpcv2_cbor.py`),
//! so `webhook.rejections` reads the metric here as on AWS. moto runs no function, so no
//! EMF line becomes a metric: the test puts the datapoints CloudWatch would have made of
//! the webhook's `WebhookRejected` lines, through the SDK. The verdicts' wording (none,
//! some, bad signatures, a refused read) is tested on the ports
//! (`functions/cli/src/cmd/doctor/tests/rejections.rs`).

use crate::cli::ephemera;
use anyhow::{ensure, Context};
use ephemera_aws::stack::APP_KEY_PLACEHOLDER as PLACEHOLDER;
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::sim::{self, SimConfig, SimHandle};
use ephemera_tests::stack::{create_stack, template_path, Stack, StackSpec};
use serde_json::Value;

pub(super) const DEPLOYMENT: &str = "doc";
const STACK: &str = "ephemera-doctor";
pub(super) const APP_ID: u64 = 5151;
const WEBHOOK_SECRET: &str = "doctor-webhook-secret";
/// Where the App's webhook should go (the Function URL moto cannot make).
const WEBHOOK_URL: &str = "https://doc-hook.lambda-url.us-east-1.on.aws/";
pub(super) const ORG: &str = "acme";

pub(super) struct World {
    pub(super) moto: Moto,
    pub(super) sim: SimHandle,
    pub(super) stack: Stack,
    pub(super) sdk: aws_config::SdkConfig,
}

async fn world() -> anyhow::Result<World> {
    world_with(Vec::new()).await
}

/// The world with further Apps in the simulator, as (App id, public key PEM).
pub(super) async fn world_with(more_apps: Vec<(u64, String)>) -> anyhow::Result<World> {
    let moto = Moto::start().await?;
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&moto.endpoint)).await;
    let public_key =
        std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pub.pem"))?;
    let private_key =
        std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pem"))?;
    let mut config = SimConfig::new(APP_ID, public_key, WEBHOOK_SECRET, DEPLOYMENT);
    config.webhook_url = Some(WEBHOOK_URL.to_owned());
    config.more_apps = more_apps;
    let sim = sim::start(config).await?;
    let spec = StackSpec {
        stack_name: STACK.into(),
        deployment: DEPLOYMENT.into(),
        app_id: APP_ID,
        github_api_url: sim.url.clone(),
        webhook_secret: WEBHOOK_SECRET.into(),
        app_key_pem: private_key,
        pools_config: None,
    };
    let stack = create_stack(&moto, &template_path(), &spec).await?;
    runner_copy_synced(&sdk, stack.output("RunnerBucketName")?).await?;
    Ok(World {
        moto,
        sim,
        stack,
        sdk,
    })
}

/// What the reaper's first sync of GitHub's runner releases leaves in the stack's bucket
/// (moto runs no reaper): `runner/latest-<arch>` for both architectures.
async fn runner_copy_synced(sdk: &aws_config::SdkConfig, bucket: &str) -> anyhow::Result<()> {
    let s3 = ephemera_aws::runner_bucket::s3_client(sdk);
    for arch in ["x64", "arm64"] {
        s3.put_object()
            .bucket(bucket)
            .key(format!("runner/latest-{arch}"))
            .body(format!("2.336.0 {}\n", "0".repeat(64)).into_bytes().into())
            .send()
            .await?;
    }
    Ok(())
}

/// Records, as each function does at its cold start (`ephemera_aws::running`), that it
/// runs the configuration the stack's parameters hold now. moto runs no function, so the
/// test world does it for them.
pub(super) async fn functions_run_the_current_configuration(world: &World) -> anyhow::Result<()> {
    let ssm = aws_sdk_ssm::Client::new(&world.sdk);
    let loaded = ephemera_aws::config_source::load_config_or_default(
        &ssm,
        world.stack.output("ConfigParameterName")?,
        Some(world.stack.output("DefaultConfigParameterName")?),
    )
    .await?;
    let dynamodb = aws_sdk_dynamodb::Client::new(&world.sdk);
    for function in ephemera_aws::running::FUNCTIONS {
        let running = ephemera_aws::running::RunningConfig {
            function: function.to_owned(),
            parameter: loaded.parameter.clone(),
            version: loaded.version,
            at: time::OffsetDateTime::now_utc(),
        };
        ephemera_aws::running::record(&dynamodb, world.stack.output("TableName")?, &running)
            .await?;
    }
    Ok(())
}

/// `ephemera doctor --json` on the stack: exit code and report.
pub(super) async fn doctor(world: &World) -> anyhow::Result<(i32, Value)> {
    let endpoint = world.moto.endpoint.clone();
    let output = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        Ok(ephemera()?
            .args(["doctor", "--stack", STACK, "--json"])
            .args(["--endpoint-url", &endpoint, "--region", "us-east-1"])
            .args(["--webhook-url", WEBHOOK_URL, "--owner", ORG])
            .output()?)
    })
    .await??;
    let code = output.status.code().context("killed")?;
    let report: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "doctor printed no JSON: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    Ok((code, report))
}

fn checks_with(report: &Value, status: &str) -> Vec<Value> {
    report["checks"]
        .as_array()
        .map(|checks| {
            checks
                .iter()
                .filter(|c| c["status"] == status)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Doctor exits 8 with exactly one failed check, `check`; returns it.
pub(super) async fn only_failure(world: &World, check: &str) -> anyhow::Result<Value> {
    let (code, report) = doctor(world).await?;
    let failed = checks_with(&report, "fail");
    ensure!(code == 8, "exit code {code}: {report:#}");
    ensure!(failed.len() == 1, "failed: {failed:#?}");
    ensure!(failed[0]["check"] == check, "failed: {failed:#?}");
    ensure!(
        failed[0]["fix"].as_str().is_some_and(|f| !f.is_empty()),
        "no fix: {failed:#?}"
    );
    Ok(failed[0].clone())
}

/// The checks moto cannot answer (see the module's comment), with what they say: they
/// warn here, saying the emulator cannot answer them, and pass on AWS.
const UNANSWERED_BY_MOTO: [(&str, &str); 4] = [
    ("quotas.vcpu", "Service Quotas does not know"),
    ("lambda.concurrency", "Service Quotas does not know"),
    ("webhook.concurrency", "Service Quotas does not know"),
    ("iam.simulate", "cannot simulate the role's policies"),
];

fn unanswered_by_moto(check: &Value) -> bool {
    UNANSWERED_BY_MOTO.iter().any(|(name, why)| {
        check["check"] == *name
            && check["status"] == "warn"
            && check["message"]
                .as_str()
                .is_some_and(|m| m.contains(why) && m.contains("the emulator at"))
            && check["fix"]
                .as_str()
                .is_some_and(|f| f.starts_with("nothing to do locally"))
    })
}

pub(super) async fn expect_healthy(world: &World) -> anyhow::Result<()> {
    let (code, report) = doctor(world).await?;
    ensure!(code == 0, "exit code {code}: {report:#}");
    let not_passed: Vec<Value> = report["checks"]
        .as_array()
        .context("no checks")?
        .iter()
        .filter(|c| c["status"] != "pass" && !unanswered_by_moto(c))
        .cloned()
        .collect();
    ensure!(not_passed.is_empty(), "not passed: {not_passed:#?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_a_healthy_stack_and_names_each_broken_setting() -> anyhow::Result<()> {
    let world = world().await?;
    // Before any function ran: each says so, as a warning.
    let (code, report) = doctor(&world).await?;
    ensure!(
        code == 0,
        "no function ran yet, exit code {code}: {report:#}"
    );
    let not_run: Vec<Value> = checks_with(&report, "warn")
        .into_iter()
        .filter(|c| c["check"] == "config.running")
        .collect();
    ensure!(not_run.len() == 3, "{report:#}");
    ensure!(
        not_run.iter().all(|c| c["message"]
            .as_str()
            .is_some_and(|m| m.contains("has not run yet"))),
        "{not_run:#?}"
    );
    functions_run_the_current_configuration(&world).await?;
    let (code, report) = doctor(&world).await?;
    ensure!(code == 0, "healthy stack, exit code {code}: {report:#}");
    let names: Vec<&str> = report["checks"]
        .as_array()
        .context("no checks")?
        .iter()
        .filter_map(|c| c["check"].as_str())
        .collect();
    for expected in [
        "stack.status",
        "stack.outputs",
        "stack.table",
        "stack.queue",
        "stack.runner_logs",
        "config.valid",
        "config.running",
        "github.app_key",
        "github.app",
        "github.permissions",
        "github.events",
        "github.webhook_url",
        "github.installation",
        "github.rate_limit",
        "github.deliveries",
        "ec2.launch_template",
        "ec2.subnets",
        "ec2.security_groups",
        "ec2.architecture",
        "ec2.dry_run",
        "quotas.vcpu",
        "capacity.network_interfaces",
        "capacity.subnet_addresses",
        "capacity.burst",
        "lambda.concurrency",
        "webhook.concurrency",
        "webhook.rejections",
        "iam.simulate",
    ] {
        ensure!(names.contains(&expected), "{expected} not run: {report:#}");
    }
    // The network interfaces' quota (moto knows vpc's) and the subnet's addresses are
    // counted; the vCPU quota moto does not know is said to be left out.
    let burst = the_line(&report, "capacity.burst")?;
    ensure!(
        burst["status"] == "pass"
            && burst["message"].as_str().is_some_and(|m| m
                .contains("can take the 10 runners the pools may run at once")
                && m.ends_with("(not counted: the vCPU quota L-1216C47A)")),
        "{burst:#}"
    );
    expect_healthy(&world).await?;

    // The App key secret still holds the template's placeholder.
    let secrets = aws_sdk_secretsmanager::Client::new(&world.sdk);
    let key_secret = world.stack.output("GitHubAppKeySecret")?.to_owned();
    let real_key = secrets
        .get_secret_value()
        .secret_id(&key_secret)
        .send()
        .await?
        .secret_string()
        .context("no key")?
        .to_owned();
    secrets
        .put_secret_value()
        .secret_id(&key_secret)
        .secret_string(PLACEHOLDER)
        .send()
        .await?;
    let failed = only_failure(&world, "github.app_key").await?;
    ensure!(failed["message"]
        .as_str()
        .is_some_and(|m| m.contains("placeholder")));
    ensure!(failed["fix"]
        .as_str()
        .is_some_and(|f| f.contains(&format!("put-secret-value --secret-id {key_secret}"))));
    secrets
        .put_secret_value()
        .secret_id(&key_secret)
        .secret_string(real_key)
        .send()
        .await?;
    expect_healthy(&world).await?;

    // The runners' log group is gone: hosts cannot ship their logs.
    let logs = aws_sdk_cloudwatchlogs::Client::new(&world.sdk);
    let group = world.stack.output("RunnerLogGroupName")?.to_owned();
    logs.delete_log_group()
        .log_group_name(&group)
        .send()
        .await?;
    let failed = only_failure(&world, "stack.runner_logs").await?;
    ensure!(failed["message"]
        .as_str()
        .is_some_and(|m| m.contains(&format!("log group {group} does not exist"))));
    logs.create_log_group()
        .log_group_name(&group)
        .send()
        .await?;
    logs.put_retention_policy()
        .log_group_name(&group)
        .retention_in_days(30)
        .send()
        .await?;
    expect_healthy(&world).await?;

    // The App is not installed on the organization.
    world
        .sim
        .with_state(|s| s.app.not_installed_on.insert(ORG.to_owned()));
    let failed = only_failure(&world, "github.installation").await?;
    ensure!(failed["subject"] == ORG, "{failed:#}");
    ensure!(failed["fix"]
        .as_str()
        .is_some_and(|f| f.contains("https://github.com/apps/ephemera-sim/installations/new")));
    world.sim.with_state(|s| s.app.not_installed_on.clear());

    // The App's webhook goes elsewhere.
    world.sim.set_webhook_url("https://old.example.com/webhook");
    let failed = only_failure(&world, "github.webhook_url").await?;
    ensure!(failed["message"]
        .as_str()
        .is_some_and(|m| m.contains("https://old.example.com/webhook")));
    ensure!(failed["fix"]
        .as_str()
        .is_some_and(|f| f.contains(WEBHOOK_URL)));
    world.sim.set_webhook_url(WEBHOOK_URL);

    // The App lacks the permission to register organization runners.
    let granted = world
        .sim
        .with_state(|s| s.app.permissions.remove("organization_self_hosted_runners"));
    let failed = only_failure(&world, "github.permissions").await?;
    ensure!(failed["message"]
        .as_str()
        .is_some_and(|m| m.contains("organization_self_hosted_runners: write (has none)")));
    world.sim.with_state(|s| {
        s.app.permissions.insert(
            "organization_self_hosted_runners".to_owned(),
            granted.unwrap_or_default(),
        )
    });

    // The App does not get workflow_job events.
    world.sim.with_state(|s| s.app.events.clear());
    only_failure(&world, "github.events").await?;
    world
        .sim
        .with_state(|s| s.app.events.push("workflow_job".to_owned()));
    expect_healthy(&world).await?;

    // The pool names a subnet EC2 does not know (a pushed configuration).
    let ssm = aws_sdk_ssm::Client::new(&world.sdk);
    let default = ssm
        .get_parameter()
        .name(world.stack.output("DefaultConfigParameterName")?)
        .send()
        .await?
        .parameter()
        .and_then(|p| p.value())
        .context("no default configuration")?
        .to_owned();
    let start = default
        .find("subnet-")
        .context("no subnet in the default pool")?;
    let end = start + default[start..].find([']', ',']).context("subnet list")?;
    let pushed = format!(
        "{}subnet-0badbadbadbad0000{}",
        &default[..start],
        &default[end..]
    );
    let parameter = world.stack.output("ConfigParameterName")?;
    ssm.put_parameter()
        .name(parameter)
        .value(&pushed)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await?;
    let failed = only_failure(&world, "ec2.subnets").await?;
    ensure!(failed["message"]
        .as_str()
        .is_some_and(|m| m.contains("subnet-0badbadbadbad0000")));
    let (_, report) = doctor(&world).await?;
    let skipped: Vec<Value> = checks_with(&report, "skip");
    let skipped: Vec<&str> = skipped.iter().filter_map(|c| c["check"].as_str()).collect();
    ensure!(
        skipped == ["ec2.dry_run", "capacity.subnet_addresses"],
        "{skipped:#?}"
    );
    // The functions still run the stack's default until they read the pushed one.
    let behind = checks_with(&report, "warn")
        .into_iter()
        .filter(|c| c["check"] == "config.running")
        .count();
    ensure!(behind == 3, "{report:#}");
    ssm.delete_parameter().name(parameter).send().await?;
    expect_healthy(&world).await?;

    // The pool moves to a /28 (11 addresses after the 5 AWS keeps), two of them taken by
    // network interfaces: 9 runners fit of its max_runners 10, and they bind the burst.
    let small = small_subnet_with_interfaces(&world, 2).await?;
    let interfaces = aws_sdk_ec2::Client::new(&world.sdk)
        .describe_network_interfaces()
        .send()
        .await?
        .network_interfaces()
        .len();
    ssm.put_parameter()
        .name(parameter)
        .value(pushed.replace("subnet-0badbadbadbad0000", &small))
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await?;
    let (code, report) = doctor(&world).await?;
    ensure!(
        code == 0,
        "capacity only warns, exit code {code}: {report:#}"
    );
    let addresses = the_line(&report, "capacity.subnet_addresses")?;
    ensure!(
        addresses["status"] == "warn"
            && addresses["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!(
                    "{small} 9: room for 9 runners, not the pool's max_runners 10"
                ))),
        "{addresses:#}"
    );
    let burst = the_line(&report, "capacity.burst")?;
    ensure!(
        burst["status"] == "warn"
            && burst["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!(
                    "a burst of 9 runners at once, not the 10 the pools may run: the free \
                 addresses of {small} binds"
                ))),
        "{burst:#}"
    );
    let quota = the_line(&report, "capacity.network_interfaces")?;
    ensure!(
        quota["status"] == "pass"
            && quota["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!(
                    "Network interfaces per Region is 5000, {interfaces} in use"
                ))),
        "{quota:#}"
    );
    ssm.delete_parameter().name(parameter).send().await?;
    expect_healthy(&world).await?;

    // The webhook refused requests in the last hour (and another deployment's refusals
    // in the same account are not counted).
    put_rejections(
        &world,
        DEPLOYMENT,
        &[("bad_signature", 3.0), ("no_signature", 2.0)],
    )
    .await?;
    put_rejections(&world, "other", &[("too_large", 7.0)]).await?;
    let (code, report) = doctor(&world).await?;
    ensure!(
        code == 0,
        "refusals only warn, exit code {code}: {report:#}"
    );
    let refused: Vec<Value> = checks_with(&report, "warn")
        .into_iter()
        .filter(|c| c["check"] == "webhook.rejections")
        .collect();
    ensure!(refused.len() == 1, "{report:#}");
    ensure!(
        refused[0]["message"]
            == "the webhook refused 5 requests in the last hour: bad_signature 3, no_signature 2",
        "{refused:#?}"
    );
    ensure!(
        refused[0]["fix"]
            .as_str()
            .is_some_and(|f| f.contains("secret mismatch")
                && f.contains(&format!("{DEPLOYMENT}-webhook-bad-signatures"))),
        "{refused:#?}"
    );
    Ok(())
}

/// The one line of `check` in the report.
fn the_line(report: &Value, check: &str) -> anyhow::Result<Value> {
    let lines: Vec<&Value> = report["checks"]
        .as_array()
        .context("no checks")?
        .iter()
        .filter(|c| c["check"] == check)
        .collect();
    ensure!(lines.len() == 1, "{check}: {report:#}");
    Ok(lines[0].clone())
}

/// A /28 subnet in the default VPC with `interfaces` network interfaces in it; its id.
async fn small_subnet_with_interfaces(world: &World, interfaces: usize) -> anyhow::Result<String> {
    let ec2 = aws_sdk_ec2::Client::new(&world.sdk);
    let vpcs = ec2
        .describe_vpcs()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("is-default")
                .values("true")
                .build(),
        )
        .send()
        .await?;
    let vpc = vpcs
        .vpcs()
        .first()
        .and_then(|v| v.vpc_id())
        .context("no default VPC")?;
    let subnet = ec2
        .create_subnet()
        .vpc_id(vpc)
        .cidr_block("172.31.200.0/28")
        .send()
        .await?
        .subnet()
        .and_then(|s| s.subnet_id())
        .context("no subnet id")?
        .to_owned();
    for _ in 0..interfaces {
        ec2.create_network_interface()
            .subnet_id(&subnet)
            .send()
            .await?;
    }
    Ok(subnet)
}

/// Puts the datapoints CloudWatch makes of the webhook's `WebhookRejected` EMF lines:
/// `count` refusals for each reason, five minutes ago, under `deployment`.
async fn put_rejections(
    world: &World,
    deployment: &str,
    counts: &[(&str, f64)],
) -> anyhow::Result<()> {
    use aws_sdk_cloudwatch::types::{Dimension as CwDimension, MetricDatum};
    use ephemera_core::metrics::{Dimension, Metric, NAMESPACE};
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&world.sdk);
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(300);
    for (reason, count) in counts {
        let dimension = |name: Dimension, value: &str| {
            CwDimension::builder()
                .name(name.name())
                .value(value)
                .build()
        };
        cloudwatch
            .put_metric_data()
            .namespace(NAMESPACE)
            .metric_data(
                MetricDatum::builder()
                    .metric_name(Metric::WebhookRejected.name())
                    .dimensions(dimension(Dimension::Deployment, deployment))
                    .dimensions(dimension(Dimension::Reason, reason))
                    .value(*count)
                    .timestamp(aws_smithy_types::DateTime::from(when))
                    .build(),
            )
            .send()
            .await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_without_a_stack_is_a_usage_error_and_an_unknown_stack_one_failure(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let endpoint = moto.endpoint.clone();
    let (usage, unknown) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let usage = ephemera()?
            .args([
                "doctor",
                "--endpoint-url",
                &endpoint,
                "--region",
                "us-east-1",
            ])
            .output()?;
        let unknown = ephemera()?
            .args(["doctor", "--stack", "nope", "--endpoint-url", &endpoint])
            .args(["--region", "us-east-1"])
            .output()?;
        Ok((usage, unknown))
    })
    .await??;
    ensure!(usage.status.code() == Some(2), "{usage:?}");
    ensure!(String::from_utf8_lossy(&usage.stderr).contains("--stack"));
    ensure!(unknown.status.code() == Some(8), "{unknown:?}");
    let text = String::from_utf8_lossy(&unknown.stdout);
    let first = text.lines().next().unwrap_or_default();
    ensure!(first.starts_with("✖ stack.status"), "{text}");
    ensure!(text.contains("fix: check the name"), "{text}");
    ensure!(text.contains("nope: 0 passed, 1 failed"), "{text}");
    Ok(())
}

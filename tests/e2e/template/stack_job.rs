//! One job end to end on the stack template.yaml creates in moto: the handlers are wired
//! exactly as the Lambda functions wire them, from the environment the stack gives each
//! function (config parameter, table, queue, secrets), so a name that drifts between the
//! template and the code fails here.

use anyhow::{ensure, Context};
use aws_sdk_dynamodb::types::TimeToLiveStatus;
use aws_sdk_ec2::types::LaunchTemplateHttpTokensState;
use aws_sdk_sqs::types::QueueAttributeName;
use ephemera_aws::config_source::load_config_or_default;
use ephemera_aws::{provision::MAX_RECEIVE_COUNT, DynamoJitConfigs};
use ephemera_aws::{read_secret, AwsSettings, DynamoRunnerStore, Ec2Fleet, SqsJobQueue};
use ephemera_core::handlers::reaper::Reaper;
use ephemera_core::handlers::scaler::Scaler;
use ephemera_core::handlers::webhook::WebhookHandler;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::{Fleet, InstanceState, RunnerStore};
use ephemera_core::webhook::WebhookSecrets;
use ephemera_github::{GitHubApp, GitHubAppConfig};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::sim::{self, SimConfig};
use ephemera_tests::stack::{create_stack, template_path, Stack, StackSpec};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEPLOYMENT: &str = "tpl";
const APP_ID: u64 = 4343;
const WEBHOOK_SECRET: &str = "stack-webhook-secret";
/// The labels of the template's default pool (linux-arm64).
const LABELS: [&str; 3] = ["self-hosted", "linux", "ARM64"];
/// The variables functions/aws/src/lambda.rs reads.
const LAMBDA_ENV: [&str; 10] = [
    "EPHEMERA_CONFIG_PARAMETER",
    "EPHEMERA_DEFAULT_CONFIG_PARAMETER",
    "EPHEMERA_TABLE",
    "EPHEMERA_JIT_TABLE",
    "EPHEMERA_INSTANCE_ARN_PREFIX",
    "EPHEMERA_QUEUE_URL",
    "EPHEMERA_WEBHOOK_SECRET_ID",
    "EPHEMERA_GITHUB_KEY_SECRET_ID",
    "EPHEMERA_LAUNCH_TEMPLATE_VERSION",
    "EPHEMERA_SSM_LAUNCH_TEMPLATE_VERSION",
];

fn env<'a>(stack: &'a Stack, function: &str, name: &str) -> anyhow::Result<&'a str> {
    stack.function_env(function, name)
}

/// Every function gets what lambda.rs reads, and the same values the outputs show.
fn check_function_environment(stack: &Stack) -> anyhow::Result<()> {
    for function in ["WebhookFunction", "ScalerFunction", "ReaperFunction"] {
        for name in LAMBDA_ENV {
            ensure!(
                !env(stack, function, name)?.is_empty(),
                "{function}: {name} is empty"
            );
        }
        ensure!(env(stack, function, "EPHEMERA_TABLE")? == stack.output("TableName")?);
        ensure!(env(stack, function, "EPHEMERA_JIT_TABLE")? == stack.output("JitTableName")?);
        ensure!(env(stack, function, "EPHEMERA_QUEUE_URL")? == stack.output("QueueUrl")?);
        ensure!(
            env(stack, function, "EPHEMERA_CONFIG_PARAMETER")?
                == stack.output("ConfigParameterName")?
        );
        ensure!(
            env(stack, function, "EPHEMERA_DEFAULT_CONFIG_PARAMETER")?
                == stack.output("DefaultConfigParameterName")?
        );
    }
    Ok(())
}

/// The table, the queue and the launch template are what the code expects of them.
async fn check_resources(sdk: &aws_config::SdkConfig, stack: &Stack) -> anyhow::Result<()> {
    let table = stack.output("TableName")?;
    let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
    let described = dynamodb.describe_table().table_name(table).send().await?;
    let indexes = described
        .table()
        .map(|t| t.global_secondary_indexes())
        .unwrap_or_default();
    ensure!(
        indexes
            .iter()
            .any(|i| i.index_name() == Some(ephemera_aws::items::STATUS_INDEX)),
        "table {table} lacks the GSI the reaper queries: {indexes:?}"
    );
    let ttl = dynamodb
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await?;
    let ttl = ttl
        .time_to_live_description()
        .context("no TTL description")?;
    ensure!(ttl.attribute_name() == Some(ephemera_aws::items::TTL));
    ensure!(ttl.time_to_live_status() == Some(&TimeToLiveStatus::Enabled));
    check_jit_table(&dynamodb, stack.output("JitTableName")?).await?;

    let sqs = aws_sdk_sqs::Client::new(sdk);
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(stack.output("QueueUrl")?)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await?;
    let redrive = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy))
        .context("the jobs queue has no redrive policy")?;
    let redrive: serde_json::Value = serde_json::from_str(redrive)?;
    ensure!(redrive["maxReceiveCount"].as_u64() == Some(u64::from(MAX_RECEIVE_COUNT)));
    ensure!(redrive["deadLetterTargetArn"]
        .as_str()
        .is_some_and(|arn| arn.ends_with(&format!(":{DEPLOYMENT}-jobs-dlq"))));

    let ec2 = aws_sdk_ec2::Client::new(sdk);
    let versions = ec2
        .describe_launch_template_versions()
        .launch_template_name(stack.output("LaunchTemplateName")?)
        .send()
        .await?;
    let data = versions
        .launch_template_versions()
        .first()
        .and_then(|v| v.launch_template_data())
        .context("the launch template has no data")?;
    let tokens = data.metadata_options().and_then(|m| m.http_tokens());
    ensure!(
        tokens == Some(&LaunchTemplateHttpTokensState::Required),
        "IMDSv2"
    );
    ensure!(
        data.iam_instance_profile().is_some(),
        "runner instance profile"
    );
    ensure!(data
        .block_device_mappings()
        .iter()
        .all(|m| m.ebs().and_then(|e| e.encrypted()) == Some(true)));
    Ok(())
}

/// The JIT table is keyed by the instance ARN, as the runner role's policy and
/// bootstrap.sh expect, and its items expire.
async fn check_jit_table(dynamodb: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<()> {
    let described = dynamodb.describe_table().table_name(table).send().await?;
    let keys: Vec<_> = described
        .table()
        .map(|t| t.key_schema())
        .unwrap_or_default()
        .iter()
        .map(|k| k.attribute_name().to_owned())
        .collect();
    ensure!(
        keys == [ephemera_aws::jit::INSTANCE_ARN],
        "JIT table key {keys:?}"
    );
    let ttl = dynamodb
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await?;
    let ttl = ttl
        .time_to_live_description()
        .context("no TTL description")?;
    ensure!(ttl.attribute_name() == Some(ephemera_aws::jit::TTL));
    ensure!(ttl.time_to_live_status() == Some(&TimeToLiveStatus::Enabled));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_on_the_stack_template_yaml_creates() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let public_key =
        std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pub.pem"))?;
    let private_key =
        std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pem"))?;
    let mut sim_config = SimConfig::new(APP_ID, public_key, WEBHOOK_SECRET, DEPLOYMENT);
    sim_config.aws_endpoint = Some(moto.endpoint.clone());
    sim_config.job_duration = Duration::from_millis(500);
    sim_config.pickup_delay = Duration::from_millis(200);
    let sim = sim::start(sim_config).await?;

    let spec = StackSpec {
        stack_name: "ephemera-e2e".into(),
        deployment: DEPLOYMENT.into(),
        app_id: APP_ID,
        github_api_url: sim.url.clone(),
        webhook_secret: WEBHOOK_SECRET.into(),
        app_key_pem: private_key,
        pools_config: None,
    };
    let started = Instant::now();
    let stack = create_stack(&moto, &template_path(), &spec).await?;
    eprintln!("stack created in {:?}", started.elapsed());
    for (logical_id, kind) in [
        ("Table", "AWS::DynamoDB::Table"),
        ("JitTable", "AWS::DynamoDB::Table"),
        ("JobsQueue", "AWS::SQS::Queue"),
        ("JobsDeadLetterQueue", "AWS::SQS::Queue"),
        ("ConfigParameter", "AWS::SSM::Parameter"),
        ("RunnerLaunchTemplate", "AWS::EC2::LaunchTemplate"),
        ("RunnerSsmLaunchTemplate", "AWS::EC2::LaunchTemplate"),
        ("RunnerSsmInstanceProfile", "AWS::IAM::InstanceProfile"),
    ] {
        ensure!(
            stack.has_resource(logical_id, kind),
            "{logical_id} not made by the stack"
        );
    }
    ensure!(
        stack.stripped_outputs == ["WebhookUrl"],
        "{:?}",
        stack.stripped_outputs
    );
    check_function_environment(&stack)?;
    check_resources(&sdk, &stack).await?;

    // Wired as the Lambda entry points wire them, from each function's environment, and
    // each part calling AWS as its function's role: the stack's own policies decide.
    let as_role = |role: &'static str| {
        let moto = &moto;
        async move {
            let settings = moto.role_settings(role, DEPLOYMENT).await?;
            anyhow::Ok(ephemera_aws::sdk_config(&settings).await)
        }
    };
    let (webhook_sdk, scaler_sdk, reaper_sdk) = (
        as_role("WebhookRole").await?,
        as_role("ScalerRole").await?,
        as_role("ReaperRole").await?,
    );
    let parameter = env(&stack, "ScalerFunction", "EPHEMERA_CONFIG_PARAMETER")?;
    let default = env(
        &stack,
        "ScalerFunction",
        "EPHEMERA_DEFAULT_CONFIG_PARAMETER",
    )?;
    // Nothing pushed: each function reads the stack's default configuration.
    let mut configs = Vec::new();
    for sdk in [&webhook_sdk, &scaler_sdk, &reaper_sdk] {
        let ssm = aws_sdk_ssm::Client::new(sdk);
        let loaded = load_config_or_default(&ssm, parameter, Some(default)).await?;
        ensure!(loaded.parameter == default, "{loaded:?}");
        configs.push(loaded.config);
    }
    let config = Arc::new(configs.remove(0));
    ensure!(config.deployment == DEPLOYMENT && config.github.app_id == APP_ID);
    let table = env(&stack, "ScalerFunction", "EPHEMERA_TABLE")?;
    let queue_url = env(&stack, "WebhookFunction", "EPHEMERA_QUEUE_URL")?;
    let store_as = |sdk: &aws_config::SdkConfig| {
        Arc::new(DynamoRunnerStore::new(
            aws_sdk_dynamodb::Client::new(sdk),
            table,
        ))
    };
    let queue_as = |sdk: &aws_config::SdkConfig| {
        Arc::new(SqsJobQueue::new(aws_sdk_sqs::Client::new(sdk), queue_url))
    };
    let fleet_as = |sdk: &aws_config::SdkConfig| -> anyhow::Result<Arc<Ec2Fleet>> {
        Ok(Arc::new(
            Ec2Fleet::new(aws_sdk_ec2::Client::new(sdk), &config.deployment)
                .with_stack_template_version(env(
                    &stack,
                    "ScalerFunction",
                    "EPHEMERA_LAUNCH_TEMPLATE_VERSION",
                )?)
                .with_ssm_template_version(env(
                    &stack,
                    "ScalerFunction",
                    "EPHEMERA_SSM_LAUNCH_TEMPLATE_VERSION",
                )?),
        ))
    };
    let jit_as = |sdk: &aws_config::SdkConfig| -> anyhow::Result<Arc<DynamoJitConfigs>> {
        Ok(Arc::new(
            DynamoJitConfigs::new(
                aws_sdk_dynamodb::Client::new(sdk),
                env(&stack, "ScalerFunction", "EPHEMERA_JIT_TABLE")?,
            )
            .with_instance_arn_prefix(env(
                &stack,
                "ScalerFunction",
                "EPHEMERA_INSTANCE_ARN_PREFIX",
            )?),
        ))
    };
    let key_id = env(&stack, "ScalerFunction", "EPHEMERA_GITHUB_KEY_SECRET_ID")?;
    let forge_as = |sdk: aws_config::SdkConfig| {
        let github = config.github.clone();
        async move {
            let secrets_manager = aws_sdk_secretsmanager::Client::new(&sdk);
            let key = read_secret(&secrets_manager, key_id).await?;
            anyhow::Ok(Arc::new(GitHubApp::new(GitHubAppConfig::of(&github, key))?))
        }
    };
    let hook_id = env(&stack, "WebhookFunction", "EPHEMERA_WEBHOOK_SECRET_ID")?;
    let secrets = WebhookSecrets {
        current: read_secret(&aws_sdk_secretsmanager::Client::new(&webhook_sdk), hook_id).await?,
        previous: None,
    };
    let handler = Arc::new(WebhookHandler::new(
        config.clone(),
        secrets,
        queue_as(&webhook_sdk),
        ephemera_core::handlers::webhook::WebhookCapabilities::none(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let webhook_url = format!("http://{}/webhook", listener.local_addr()?);
    let mut tasks = tokio::task::JoinSet::new();
    let router = ephemera_cli::cmd::local::webhook_router(handler);
    tasks.spawn(async move { Ok::<_, anyhow::Error>(axum::serve(listener, router).await?) });
    sim.set_webhook_url(&webhook_url);
    let scaler_queue = queue_as(&scaler_sdk);
    let scaler = Arc::new(Scaler::bare(
        config.clone(),
        store_as(&scaler_sdk),
        fleet_as(&scaler_sdk)?,
        forge_as(scaler_sdk.clone()).await?,
        jit_as(&scaler_sdk)?,
        scaler_queue.clone(),
    ));
    tasks.spawn(ephemera_cli::cmd::local::drain_queue(scaler, scaler_queue));
    let reaper = Arc::new(Reaper::bare(
        config.clone(),
        store_as(&reaper_sdk),
        fleet_as(&reaper_sdk)?,
        forge_as(reaper_sdk.clone()).await?,
        jit_as(&reaper_sdk)?,
        queue_as(&reaper_sdk),
    ));
    tasks.spawn(ephemera_cli::cmd::local::reap_every(
        reaper,
        Duration::from_millis(500),
    ));
    // The test's own view: the operator's.
    let store = store_as(&sdk);
    let fleet = fleet_as(&sdk)?;

    let job_id = sim.create_job("octo-org", "app", &LABELS, None).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let runner = loop {
        let record = match store.get_job(job_id).await?.and_then(|j| j.runner_name) {
            Some(name) => store.get_runner(&name).await?,
            None => None,
        };
        if let Some(record) = record.filter(|r| r.status == InstanceStatus::Deleted) {
            break record;
        }
        ensure!(
            Instant::now() < deadline,
            "job {job_id}: runner not deleted within 60 s"
        );
        ensure!(tasks.try_join_next().is_none(), "a pipeline part stopped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let instance_id = runner.instance_id.context("the runner had no instance")?;
    let instances = fleet.describe().await?;
    ensure!(instances.len() == 1, "one job, one instance: {instances:?}");
    ensure!(instances[0].id == instance_id && instances[0].state == InstanceState::Terminated);
    ensure!(
        runner.pool == "linux-arm64",
        "routed to the template's default pool"
    );
    let snapshot = sim.snapshot();
    ensure!(snapshot.jobs[&job_id].status == "completed");
    ensure!(snapshot.jobs[&job_id].runner_name.as_deref() == Some(runner.name.as_str()));
    ensure!(snapshot.counters.jobs_killed == 0 && snapshot.runners.is_empty());
    ensure!(
        store.get_pool("linux-arm64").await?.slots_used == 0,
        "slot released"
    );
    Ok(())
}

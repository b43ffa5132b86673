//! `ephemera destroy` on a whole deployment in the strict emulator: the image stack and
//! two AMIs "baked" for the deployment (with their snapshots and the parameters a bake
//! writes), the main stack from template.yaml, a pushed configuration and a runner left
//! running. After it, nothing of the deployment is left: no stack, AMI, snapshot, live
//! instance, table, queue, log group, launch template or parameter; what it keeps (the
//! secrets given by ARN) it names.

use super::{ephemera, stderr_of, stdout_of};
use anyhow::{ensure, Context};
use aws_sdk_ec2::types::{Filter, InstanceType, ResourceType, Tag, TagSpecification};
use aws_sdk_ssm::types::ParameterType;
use ephemera_aws::{sdk_config, AwsSettings};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::stack::{create_stack_with, template_path, StackSpec};

const DEPLOYMENT: &str = "gone";
const STACK: &str = "gone";
const IMAGE_STACK: &str = "gone-image";

fn deployment_tag(kind: ResourceType) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .tags(
            Tag::builder()
                .key("ephemera:deployment")
                .value(DEPLOYMENT)
                .build(),
        )
        .build()
}

fn tagged() -> Filter {
    Filter::builder()
        .name("tag:ephemera:deployment")
        .values(DEPLOYMENT)
        .build()
}

async fn create_image_stack(cfn: &aws_sdk_cloudformation::Client) -> anyhow::Result<()> {
    let bucket = format!("{STACK}-runnerbucket-given");
    ephemera_tests::stack::create_image_stack(cfn, IMAGE_STACK, DEPLOYMENT, &bucket).await
}

/// What a bake leaves: an AMI tagged by the distribution (made here from an instance, so
/// it has a snapshot), and its id in the bake's parameter.
async fn bake(
    ec2: &aws_sdk_ec2::Client,
    ssm: &aws_sdk_ssm::Client,
    arch: &str,
) -> anyhow::Result<(String, Vec<String>)> {
    let base = ec2.describe_images().owners("amazon").send().await?;
    let base = base
        .images()
        .iter()
        .find(|i| i.architecture().map(|a| a.as_str()) == Some("x86_64"))
        .and_then(|i| i.image_id())
        .context("moto ships an x86_64 image")?;
    let build = ec2
        .run_instances()
        .image_id(base)
        .instance_type(InstanceType::T3Micro)
        .min_count(1)
        .max_count(1)
        .send()
        .await?;
    let build = build
        .instances()
        .first()
        .and_then(|i| i.instance_id())
        .context("a build instance")?;
    let image = ec2
        .create_image()
        .instance_id(build)
        .name(format!("{DEPLOYMENT}-runner-al2023-{arch}-1"))
        .tag_specifications(deployment_tag(ResourceType::Image))
        .send()
        .await?;
    let id = image.image_id().context("an AMI")?.to_owned();
    ec2.terminate_instances().instance_ids(build).send().await?;
    let described = ec2.describe_images().image_ids(&id).send().await?;
    let snapshots: Vec<String> = described
        .images()
        .iter()
        .flat_map(|i| i.block_device_mappings())
        .filter_map(|m| m.ebs()?.snapshot_id().map(str::to_owned))
        .collect();
    ensure!(!snapshots.is_empty(), "the AMI {id} has a snapshot");
    ssm.put_parameter()
        .name(format!("/ephemera/{DEPLOYMENT}/runner-image/{arch}"))
        .value(&id)
        .r#type(ParameterType::String)
        .overwrite(true)
        .send()
        .await?;
    Ok((id, snapshots))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_leaves_nothing_of_the_deployment_and_names_what_it_keeps() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let cfn = aws_sdk_cloudformation::Client::new(&sdk);
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    create_image_stack(&cfn).await?;
    let (x86, x86_snapshots) = bake(&ec2, &ssm, "x86_64").await?;
    let (arm, arm_snapshots) = bake(&ec2, &ssm, "arm64").await?;
    let spec = StackSpec {
        stack_name: STACK.into(),
        deployment: DEPLOYMENT.into(),
        app_id: 4242,
        github_api_url: "http://127.0.0.1:9".into(),
        webhook_secret: "destroy-webhook-secret".into(),
        app_key_pem: std::fs::read_to_string(workspace_path(
            "tests/fixtures/github-app-test-key.pem",
        ))?,
        pools_config: None,
    };
    let parameter = format!("/ephemera/{DEPLOYMENT}/runner-image/x86_64");
    let stack =
        create_stack_with(&moto, &template_path(), &spec, &[("RunnerAmi", &parameter)]).await?;
    let table = stack.output("TableName")?.to_owned();
    ssm.put_parameter()
        .name(format!("/ephemera/{DEPLOYMENT}/config"))
        .value(format!("deployment: {DEPLOYMENT}\n"))
        .r#type(ParameterType::String)
        .send()
        .await?;
    let runner = ec2
        .run_instances()
        .image_id(&x86)
        .instance_type(InstanceType::T3Micro)
        .min_count(1)
        .max_count(1)
        .tag_specifications(deployment_tag(ResourceType::Instance))
        .send()
        .await?;
    let runner = runner
        .instances()
        .first()
        .and_then(|i| i.instance_id())
        .context("a runner")?
        .to_owned();

    let destroy = |extra: &[&str]| -> anyhow::Result<assert_cmd::Command> {
        let mut command = ephemera()?;
        command
            .args(["destroy", "--stack", STACK, "--image-stack", IMAGE_STACK])
            .args(["--endpoint-url", &moto.endpoint, "--region", "us-east-1"])
            .args(extra);
        Ok(command)
    };
    // Without --yes and no terminal to ask on: it names everything, deletes nothing.
    let refused = destroy(&[])?.write_stdin("").assert().code(2);
    let plan = stdout_of(refused.get_output());
    ensure!(stderr_of(refused.get_output()).contains("pass --yes"));
    for named in [
        &table,
        &x86,
        &arm,
        &runner,
        &x86_snapshots[0],
        &arm_snapshots[0],
    ] {
        ensure!(
            plan.contains(named.as_str()),
            "the plan names {named}:\n{plan}"
        );
    }
    ensure!(plan.contains(&format!("/ephemera/{DEPLOYMENT}/config")));
    ensure!(
        plan.contains(&format!("/aws/lambda/{DEPLOYMENT}-scaler")),
        "{plan}"
    );
    let still = cfn.describe_stacks().stack_name(STACK).send().await?;
    ensure!(
        still.stacks().len() == 1,
        "nothing deleted without confirmation"
    );

    // A --deployment that is not the stack's: refused before anything is looked at.
    let other = destroy(&["--deployment", "other", "--yes"])?
        .assert()
        .code(2);
    ensure!(stderr_of(other.get_output()).contains("the stack's DeploymentName is gone"));
    ensure!(cfn.describe_stacks().stack_name(STACK).send().await.is_ok());

    // The stack's runner bucket holds a runner copy, as the reaper leaves it.
    let s3 = ephemera_aws::runner_bucket::s3_client(&sdk);
    let listed = s3.list_buckets().send().await?;
    let runner_bucket = listed
        .buckets()
        .iter()
        .filter_map(|b| b.name())
        .find(|name| name.contains("runnerbucket"))
        .context("the stack made its runner bucket")?
        .to_owned();
    s3.put_object()
        .bucket(&runner_bucket)
        .key("runner/latest-x64")
        .body(format!("2.340.0 {}\n", "0".repeat(64)).into_bytes().into())
        .send()
        .await?;

    let done = destroy(&["--yes"])?.assert().success();
    let report = stdout_of(done.get_output());
    let steps = stderr_of(done.get_output());
    ensure!(
        report.contains(&format!("deployment {DEPLOYMENT} deleted")),
        "{report}"
    );
    let kept = report
        .split("kept:")
        .nth(1)
        .context("the report says what it keeps")?;
    ensure!(kept.contains(&format!("{STACK}/github-app-key")), "{kept}");
    ensure!(kept.contains("GitHub App"), "{kept}");
    ensure!(
        steps.contains(&format!(
            "deleted bucket {runner_bucket} (objects deleted first: 1)"
        )),
        "{steps}"
    );

    assert_nothing_left(
        &sdk,
        &[&x86, &arm],
        &[x86_snapshots, arm_snapshots].concat(),
    )
    .await?;
    // Run again: nothing to do, and it says so.
    let again = destroy(&["--deployment", DEPLOYMENT, "--yes"])?
        .assert()
        .success();
    ensure!(stdout_of(again.get_output()).contains("nothing to delete"));
    moto.stop().await;
    Ok(())
}

async fn assert_nothing_left(
    sdk: &aws_config::SdkConfig,
    images: &[&str],
    snapshots: &[String],
) -> anyhow::Result<()> {
    let cfn = aws_sdk_cloudformation::Client::new(sdk);
    for name in [STACK, IMAGE_STACK] {
        let described = cfn.describe_stacks().stack_name(name).send().await;
        ensure!(described.is_err(), "stack {name} is left: {described:?}");
    }
    let ec2 = aws_sdk_ec2::Client::new(sdk);
    let left = ec2
        .describe_images()
        .owners("self")
        .filters(tagged())
        .send()
        .await?;
    ensure!(left.images().is_empty(), "AMIs left: {:?}", left.images());
    for image in images {
        let found = ec2.describe_images().image_ids(*image).send().await;
        ensure!(
            found.map(|f| f.images().is_empty()).unwrap_or(true),
            "AMI {image} is left"
        );
    }
    let all = ec2.describe_snapshots().owner_ids("self").send().await?;
    for snapshot in snapshots {
        ensure!(
            !all.snapshots()
                .iter()
                .any(|s| s.snapshot_id() == Some(snapshot.as_str())),
            "snapshot {snapshot} is left"
        );
    }
    let live = Filter::builder()
        .name("instance-state-name")
        .values("pending")
        .values("running")
        .values("stopping")
        .values("stopped")
        .build();
    let instances = ec2
        .describe_instances()
        .filters(tagged())
        .filters(live)
        .send()
        .await?;
    ensure!(
        instances.reservations().is_empty(),
        "instances left: {instances:?}"
    );
    let templates = ec2.describe_launch_templates().send().await?;
    let ours: Vec<_> = templates
        .launch_templates()
        .iter()
        .filter_map(|t| t.launch_template_name())
        .filter(|n| n.starts_with(DEPLOYMENT))
        .collect();
    ensure!(ours.is_empty(), "launch templates left: {ours:?}");
    let tables = aws_sdk_dynamodb::Client::new(sdk)
        .list_tables()
        .send()
        .await?;
    let ours: Vec<_> = tables
        .table_names()
        .iter()
        .filter(|t| t.starts_with(DEPLOYMENT))
        .collect();
    ensure!(ours.is_empty(), "tables left: {ours:?}");
    let queues = aws_sdk_sqs::Client::new(sdk).list_queues().send().await?;
    let ours: Vec<_> = queues
        .queue_urls()
        .iter()
        .filter(|q| q.contains(DEPLOYMENT))
        .collect();
    ensure!(ours.is_empty(), "queues left: {ours:?}");
    let logs = aws_sdk_cloudwatchlogs::Client::new(sdk);
    for prefix in [
        format!("/ephemera/{DEPLOYMENT}/"),
        format!("/aws/lambda/{DEPLOYMENT}-"),
    ] {
        let groups = logs
            .describe_log_groups()
            .log_group_name_prefix(&prefix)
            .send()
            .await?;
        ensure!(
            groups.log_groups().is_empty(),
            "log groups left: {:?}",
            groups.log_groups()
        );
    }
    // The stack's runner bucket, retained by the stack, is deleted with its objects.
    let buckets = aws_sdk_s3::Client::new(sdk).list_buckets().send().await?;
    let ours: Vec<_> = buckets
        .buckets()
        .iter()
        .filter_map(|b| b.name())
        .filter(|name| name.contains("runnerbucket"))
        .collect();
    ensure!(ours.is_empty(), "buckets left: {ours:?}");
    let parameters = aws_sdk_ssm::Client::new(sdk)
        .get_parameters_by_path()
        .path(format!("/ephemera/{DEPLOYMENT}"))
        .recursive(true)
        .send()
        .await?;
    ensure!(
        parameters.parameters().is_empty(),
        "parameters left: {:?}",
        parameters.parameters()
    );
    Ok(())
}

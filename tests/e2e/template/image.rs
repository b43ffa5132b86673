//! The baked runner image (infra/image/template.yaml) and how template.yaml takes it: the
//! install component carries bootstrap.sh as it is, the launch template names its image
//! as `resolve:ssm:RunnerAmi` with the scaler allowed to resolve it, each pipeline
//! publishes as an execution role allowed to write its own parameter, and, as far as moto
//! carries the image stack, a new AMI id in the stack's parameter reaches the next launch
//! with no stack update and no new template version.
//!
//! Where moto stops: it has no Image Builder (its API answers 404 "Not yet implemented")
//! and its CloudFormation creates the AWS::ImageBuilder::* resources as empty
//! placeholders, with no physical id. So the image stack's roles and outputs are real in
//! moto; the bake is not, and the test writes the AMI id to the parameter as the
//! pipeline's distribution (SsmParameterConfigurations) would. The strict layer
//! (strict_moto/image_params.py) resolves `resolve:ssm:` at launch as EC2 does.

use anyhow::{ensure, Context};
use aws_sdk_ec2::types::Filter;
use aws_sdk_ssm::types::{ParameterTier, ParameterType};
use ephemera_aws::{sdk_config, AwsSettings, Ec2Fleet};
use ephemera_core::names::launch_template_name;
use ephemera_core::ports::{Fleet, FleetRequest, Launcher, Market, TemplateVersion};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::stack::{create_stack_with, template_path, translate_template, StackSpec};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const DEPLOYMENT: &str = "img";
const IMAGE_STACK: &str = "ephemera-image";
/// Image Builder resource types, which moto's CloudFormation creates without a service.
const IMAGE_BUILDER_TYPES: [&str; 6] = [
    "AWS::ImageBuilder::Component",
    "AWS::ImageBuilder::ImageRecipe",
    "AWS::ImageBuilder::InfrastructureConfiguration",
    "AWS::ImageBuilder::DistributionConfiguration",
    "AWS::ImageBuilder::ImagePipeline",
    "AWS::ImageBuilder::LifecyclePolicy",
];

fn image_template() -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(workspace_path(
        "infra/image/template.yaml",
    ))?)
}

#[test]
fn the_install_component_carries_bootstrap_sh_as_it_is() -> anyhow::Result<()> {
    let script = std::fs::read(workspace_path("infra/runner/bootstrap.sh"))?;
    let digest = hex::encode(Sha256::digest(&script));
    let patch = u64::from_str_radix(&digest[..7], 16)?;
    let template = image_template()?;
    let fix = "run `make image-component` after changing infra/runner/bootstrap.sh";
    ensure!(
        template.contains(&format!(
            "echo '{digest}  /opt/ephemera/bootstrap.sh' | sha256sum -c -"
        )),
        "the component checks another script than infra/runner/bootstrap.sh: {fix}"
    );
    ensure!(
        template.contains(&format!("      Version: 1.0.{patch}\n")),
        "the component's version is not the script's (1.0.{patch}): {fix}"
    );
    ensure!(
        template.contains("/opt/ephemera/bootstrap.sh install"),
        "the component runs the install phase"
    );
    Ok(())
}

/// The statements of the role that launches (the one allowed ec2:CreateFleet).
fn launcher_statements(template: &Value) -> anyhow::Result<Vec<&Value>> {
    let resources = template["Resources"].as_object().context("resources")?;
    let mut launchers = resources
        .values()
        .filter(|r| r["Type"] == "AWS::IAM::Role")
        .map(|r| {
            r["Properties"]["Policies"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|p| {
                    p["PolicyDocument"]["Statement"]
                        .as_array()
                        .into_iter()
                        .flatten()
                })
                .collect::<Vec<&Value>>()
        })
        .filter(|statements| {
            statements
                .iter()
                .any(|s| s["Action"].to_string().contains("ec2:CreateFleet"))
        });
    let launcher = launchers.next().context("a role launches")?;
    ensure!(launchers.next().is_none(), "one role launches");
    Ok(launcher)
}

#[tokio::test]
async fn the_launch_template_reads_its_image_at_each_launch() -> anyhow::Result<()> {
    let template = translate_template(&template_path()).await?;
    ensure!(template["Parameters"]["RunnerAmi"]["Type"] == "String");
    let data = &template["Resources"]["RunnerLaunchTemplate"]["Properties"]["LaunchTemplateData"];
    ensure!(
        data["ImageId"] == json!({ "Fn::Sub": "resolve:ssm:${RunnerAmi}" }),
        "the image is resolved by EC2 at launch, not by CloudFormation at deploy: {}",
        data["ImageId"]
    );
    let statements = launcher_statements(&template)?;
    let resolve = statements
        .iter()
        .find(|s| s["Action"] == "ssm:GetParameters")
        .context("the launcher may ssm:GetParameters, which resolve:ssm needs")?;
    let resources = resolve["Resource"].to_string();
    ensure!(
        resources.contains(":${AWS::AccountId}:parameter${RunnerAmi}")
            && resources.contains("::parameter${RunnerAmi}")
            && resources.contains("parameter/ephemera/${DeploymentName}/runner-image/*"),
        "on the deployment's parameter, a public one and the image stack's: {resources}"
    );
    Ok(())
}

/// Each bake writes its AMI id to its pipeline's parameter as the pipeline's execution
/// role (Image Builder's service-linked role may write only `parameter/imagebuilder/*`):
/// trusted by Image Builder, with the managed execution policy, and allowed
/// ssm:PutParameter on exactly the parameter its distribution names, and
/// ec2:DescribeImages, which a parameter of data type aws:ec2:image needs. (make
/// lint-infra checks the same of any pipeline, infra/image/lint.py.)
#[tokio::test]
async fn each_pipeline_publishes_as_an_execution_role_allowed_only_its_own_parameter(
) -> anyhow::Result<()> {
    let template = translate_template(&workspace_path("infra/image/template.yaml")).await?;
    let resources = &template["Resources"];
    for (pipeline, arch) in [("PipelineX86", "x86_64"), ("PipelineArm64", "arm64")] {
        let pipeline = &resources[pipeline]["Properties"];
        let distribution = pipeline["DistributionConfigurationArn"]["Ref"]
            .as_str()
            .context("the pipeline names its distribution")?;
        let written = &resources[distribution]["Properties"]["Distributions"][0]
            ["SsmParameterConfigurations"][0];
        ensure!(
            written["ParameterName"]
                == json!({ "Fn::Sub": format!("/ephemera/${{DeploymentName}}/runner-image/{arch}") })
                && written["DataType"] == "aws:ec2:image",
            "{distribution} writes the {arch} parameter: {written}"
        );
        let role_id = pipeline["ExecutionRole"]["Fn::GetAtt"][0]
            .as_str()
            .with_context(|| format!("{distribution}'s pipeline has an execution role"))?;
        let role = &resources[role_id]["Properties"];
        ensure!(
            role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"]
                == "imagebuilder.amazonaws.com",
            "{role_id} is Image Builder's to assume"
        );
        ensure!(
            role["ManagedPolicyArns"]
                == json!([{ "Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/EC2ImageBuilderExecutionPolicy" }]),
            "{role_id} has the managed execution policy: {}",
            role["ManagedPolicyArns"]
        );
        let statements: Vec<&Value> = role["Policies"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|p| {
                p["PolicyDocument"]["Statement"]
                    .as_array()
                    .into_iter()
                    .flatten()
            })
            .collect();
        let parameter_arn = format!(
            "arn:${{AWS::Partition}}:ssm:${{AWS::Region}}:${{AWS::AccountId}}:parameter/ephemera/${{DeploymentName}}/runner-image/{arch}"
        );
        let granted: Vec<(String, String)> = statements
            .iter()
            .map(|s| (s["Action"].to_string(), s["Resource"].to_string()))
            .collect();
        let expected = vec![
            (
                json!("ssm:PutParameter").to_string(),
                json!({ "Fn::Sub": parameter_arn }).to_string(),
            ),
            (
                json!("ec2:DescribeImages").to_string(),
                json!("*").to_string(),
            ),
        ];
        ensure!(
            granted == expected,
            "{role_id} may write its own parameter and check AMI ids, nothing more: {granted:?}"
        );
    }
    Ok(())
}

/// Creates the image stack in moto and returns the arm64 parameter it names.
async fn create_image_stack(cfn: &aws_sdk_cloudformation::Client) -> anyhow::Result<String> {
    // The main stack's runner bucket, which each bake reads the runner from.
    let bucket = format!("{DEPLOYMENT}-runnerbucket-1q2w3e4r5t6y");
    ephemera_tests::stack::create_image_stack(cfn, IMAGE_STACK, DEPLOYMENT, &bucket).await?;
    let described = cfn.describe_stacks().stack_name(IMAGE_STACK).send().await?;
    let stack = described.stacks().first().context("the image stack")?;
    ensure!(
        stack.stack_status().map(|s| s.as_str()) == Some("CREATE_COMPLETE"),
        "{stack:?}"
    );
    let listed = cfn
        .list_stack_resources()
        .stack_name(IMAGE_STACK)
        .send()
        .await?;
    for kind in ["AWS::IAM::Role", "AWS::IAM::InstanceProfile"] {
        ensure!(
            listed.stack_resource_summaries().iter().any(|r| {
                r.resource_type() == Some(kind)
                    && !r.physical_resource_id().unwrap_or_default().is_empty()
            }),
            "moto makes the stack's {kind}"
        );
    }
    // Where moto stops: it makes none of the Image Builder resources (it lists them
    // without a type or an id). Should it make one, this test should bake as well.
    let made: Vec<_> = listed
        .stack_resource_summaries()
        .iter()
        .filter(|r| IMAGE_BUILDER_TYPES.contains(&r.resource_type().unwrap_or_default()))
        .filter(|r| !r.physical_resource_id().unwrap_or_default().is_empty())
        .collect();
    ensure!(
        made.is_empty(),
        "moto now makes Image Builder resources: {made:?}"
    );
    stack
        .outputs()
        .iter()
        .find(|o| o.output_key() == Some("Arm64ImageParameter"))
        .and_then(|o| o.output_value())
        .map(str::to_owned)
        .context("the image stack names its arm64 parameter")
}

/// What a bake's distribution does: the new AMI id into the parameter.
async fn publish(ssm: &aws_sdk_ssm::Client, name: &str, ami: &str) -> anyhow::Result<()> {
    ssm.put_parameter()
        .name(name)
        .value(ami)
        .r#type(ParameterType::String)
        .data_type("aws:ec2:image")
        .tier(ParameterTier::Standard)
        .overwrite(true)
        .send()
        .await?;
    Ok(())
}

async fn two_images(ec2: &aws_sdk_ec2::Client) -> anyhow::Result<(String, String)> {
    let filter = Filter::builder()
        .name("architecture")
        .values("arm64")
        .build();
    let images = ec2.describe_images().filters(filter).send().await?;
    let mut ids = images.images().iter().filter_map(|i| i.image_id());
    let first = ids.next().context("moto ships arm64 images")?;
    let second = ids.next().context("moto ships two arm64 images")?;
    Ok((first.to_owned(), second.to_owned()))
}

/// The image the instance was launched from.
pub(super) async fn image_of(ec2: &aws_sdk_ec2::Client, instance: &str) -> anyhow::Result<String> {
    let described = ec2
        .describe_instances()
        .instance_ids(instance)
        .send()
        .await?;
    described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.image_id())
        .map(str::to_owned)
        .context("the instance's image")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_bake_reaches_the_next_launch_without_a_stack_update() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let (ec2, ssm) = (
        aws_sdk_ec2::Client::new(&sdk),
        aws_sdk_ssm::Client::new(&sdk),
    );
    let parameter = create_image_stack(&aws_sdk_cloudformation::Client::new(&sdk)).await?;
    ensure!(parameter == format!("/ephemera/{DEPLOYMENT}/runner-image/arm64"));
    let (first, second) = two_images(&ec2).await?;
    publish(&ssm, &parameter, &first).await?;

    let spec = StackSpec {
        stack_name: "ephemera-image-runners".into(),
        deployment: DEPLOYMENT.into(),
        app_id: 4343,
        github_api_url: "http://127.0.0.1:9".into(),
        webhook_secret: "image-webhook-secret".into(),
        app_key_pem: std::fs::read_to_string(workspace_path(
            "tests/fixtures/github-app-test-key.pem",
        ))?,
        pools_config: None,
    };
    create_stack_with(&moto, &template_path(), &spec, &[("RunnerAmi", &parameter)]).await?;
    let fleet = Ec2Fleet::new(ec2.clone(), DEPLOYMENT);
    let request = FleetRequest {
        pool: "linux-arm64".to_owned(),
        count: 1,
        launch_template: launch_template_name(DEPLOYMENT),
        template_version: TemplateVersion::Stack,
        ami: None,
        instance_types: vec!["m7g.large".to_owned()],
        subnets: Vec::new(),
        market: Market::OnDemand,
        spot_allocation: Default::default(),
        shape: None,
        root_volume: None,
    };
    let launch = fleet.launch(&request).await?;
    let id = launch.instance_ids.first().context("a runner launched")?;
    ensure!(
        image_of(&ec2, id).await? == first,
        "after the first bake the runner boots its AMI {first}"
    );
    // The reaper reads the image the pool launches now, as its role, to replace a
    // stopped pool's instance of another image (docs/design.md, "Stopped pool").
    let reaper = sdk_config(&moto.role_settings("ReaperRole", DEPLOYMENT).await?).await;
    let reaper_fleet = Ec2Fleet::new(aws_sdk_ec2::Client::new(&reaper), DEPLOYMENT);
    let template = launch_template_name(DEPLOYMENT);
    let read = reaper_fleet
        .launch_image(&template, &TemplateVersion::Stack, None)
        .await?;
    ensure!(read.as_deref() == Some(first.as_str()), "{read:?}");
    let described = reaper_fleet.describe_live().await?;
    let seen = described
        .iter()
        .find(|i| &i.id == id)
        .context("described")?;
    ensure!(seen.image_id.as_deref() == Some(first.as_str()), "{seen:?}");
    publish(&ssm, &parameter, &second).await?;
    let read = reaper_fleet
        .launch_image(&template, &TemplateVersion::Stack, None)
        .await?;
    ensure!(
        read.as_deref() == Some(second.as_str()),
        "the reaper sees a bake at once: {read:?}"
    );
    let pool_ami = reaper_fleet
        .launch_image(&template, &TemplateVersion::Stack, Some("ami-pool"))
        .await?;
    ensure!(
        pool_ami.as_deref() == Some("ami-pool"),
        "a pool's ami: {pool_ami:?}"
    );
    // A warm scaler launches the image whose root device it read (crate::image's
    // ROOT_TTL) until that answer expires; a scaler started after the bake launches the
    // new image at once, through the same template version.
    let warm = fleet.launch(&request).await?;
    let id = warm.instance_ids.first().context("a runner launched")?;
    ensure!(
        image_of(&ec2, id).await? == first,
        "a warm scaler keeps the image it read the root device of"
    );
    let cold = Ec2Fleet::new(ec2.clone(), DEPLOYMENT);
    let launch = cold.launch(&request).await?;
    let id = launch.instance_ids.first().context("a runner launched")?;
    ensure!(
        image_of(&ec2, id).await? == second,
        "after the second bake the next scaler's runner boots its AMI {second}"
    );
    let templates = ec2
        .describe_launch_templates()
        .launch_template_names(launch_template_name(DEPLOYMENT))
        .send()
        .await?;
    let latest = templates
        .launch_templates()
        .first()
        .and_then(|t| t.latest_version_number());
    ensure!(
        latest == Some(1),
        "a bake adds no template version: {latest:?}"
    );
    moto.stop().await;
    Ok(())
}

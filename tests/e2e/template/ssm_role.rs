//! Session Manager's grants go only to the runners of pools with `ssm_access`. The
//! default runner role may use no `ssm:*`, `ssmmessages:*` or `ec2messages:*` action
//! (evaluated, not pattern-matched); the Session Manager role is the runner role's inline
//! policies plus AWS's AmazonSSMManagedInstanceCore and nothing else; its launch template
//! is the runner template but for the instance profile; only the scaler may pass a
//! role, only these two, only to EC2; and the baked image keeps the SSM agent.

use super::instance_role::{runner_statements, INSTANCE_ROLES};
use super::policy::{allows, context, Stack, ACCOUNT, REGION};
use anyhow::{ensure, Context};
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::stack::{template_path, translate_template};
use serde_json::{json, Value};

/// What the SSM agent and a Session Manager session call (the actions of
/// AmazonSSMManagedInstanceCore), and each service's wildcard.
const SESSION_ACTIONS: [&str; 11] = [
    "ssm:UpdateInstanceInformation",
    "ssm:DescribeInstanceInformation",
    "ssm:GetDocument",
    "ssm:ListInstanceAssociations",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
    "ec2messages:GetMessages",
    "ec2messages:AcknowledgeMessage",
    "ec2messages:SendReply",
];

fn properties<'a>(template: &'a Value, id: &str) -> &'a Value {
    &template["Resources"][id]["Properties"]
}

#[tokio::test]
async fn the_default_runner_role_has_no_session_manager_grant() -> anyhow::Result<()> {
    let template = translate_template(&template_path()).await?;
    let stack = Stack {
        template: &template,
    };
    let statements = runner_statements(&template, "RunnerRole")?;
    let instance = format!("arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0own");
    let on_instance = context(vec![("ec2:SourceInstanceARN", vec![instance.as_str()])]);
    for action in SESSION_ACTIONS {
        for resource in ["*", instance.as_str()] {
            ensure!(
                !allows(&stack, &statements, action, resource, &on_instance)?,
                "the runner role allows {action} on {resource}"
            );
        }
    }
    ensure!(properties(&template, "RunnerRole")
        .get("ManagedPolicyArns")
        .is_none());
    Ok(())
}

#[tokio::test]
async fn the_session_manager_role_is_the_runner_role_and_the_ssm_core_policy() -> anyhow::Result<()>
{
    let template = translate_template(&template_path()).await?;
    let (runner, ssm) = (
        properties(&template, INSTANCE_ROLES[0]),
        properties(&template, INSTANCE_ROLES[1]),
    );
    ensure!(
        ssm["ManagedPolicyArns"]
            == json!([{ "Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/AmazonSSMManagedInstanceCore" }]),
        "the SSM role's managed policies: {}",
        ssm["ManagedPolicyArns"]
    );
    ensure!(
        ssm["Policies"] == runner["Policies"],
        "other inline policies"
    );
    ensure!(ssm["AssumeRolePolicyDocument"] == runner["AssumeRolePolicyDocument"]);
    ensure!(ssm.get("PermissionsBoundary").is_none());

    let profile_of = |template_id: &str| -> anyhow::Result<Value> {
        let arn = &properties(&template, template_id)["LaunchTemplateData"]["IamInstanceProfile"]
            ["Arn"]["Fn::GetAtt"];
        let profile = arn[0]
            .as_str()
            .context("an instance profile of the stack")?;
        Ok(properties(&template, profile)["Roles"].clone())
    };
    ensure!(profile_of("RunnerLaunchTemplate")? == json!([{ "Ref": "RunnerRole" }]));
    ensure!(profile_of("RunnerSsmLaunchTemplate")? == json!([{ "Ref": "RunnerSsmRole" }]));

    let data = |id: &str| {
        let mut data = properties(&template, id)["LaunchTemplateData"].clone();
        data.as_object_mut().map(|d| d.remove("IamInstanceProfile"));
        data
    };
    ensure!(
        data("RunnerLaunchTemplate") == data("RunnerSsmLaunchTemplate"),
        "the two launch templates differ in more than the instance profile"
    );
    Ok(())
}

#[tokio::test]
async fn only_the_scaler_passes_roles_and_only_the_runner_roles_to_ec2() -> anyhow::Result<()> {
    let template = translate_template(&template_path()).await?;
    let resources = template["Resources"].as_object().context("no Resources")?;
    let mut passing = Vec::new();
    for (role, resource) in resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::IAM::Role")
    {
        let policies = resource["Properties"]["Policies"].as_array();
        for statement in
            policies
                .into_iter()
                .flatten()
                .flat_map(|p| match &p["PolicyDocument"]["Statement"] {
                    Value::Array(s) => s.clone(),
                    other => vec![other.clone()],
                })
        {
            let actions = statement["Action"].to_string();
            if actions.contains("iam:PassRole") || actions.contains("iam:*") {
                passing.push((role.clone(), statement));
            }
        }
    }
    ensure!(
        passing.len() == 1,
        "roles that may pass a role: {passing:#?}"
    );
    let (role, statement) = &passing[0];
    ensure!(role == "ScalerRole", "{role} may pass a role");
    ensure!(
        statement["Resource"]
            == json!([
                { "Fn::GetAtt": ["RunnerRole", "Arn"] },
                { "Fn::GetAtt": ["RunnerSsmRole", "Arn"] }
            ]),
        "the scaler may pass {}",
        statement["Resource"]
    );
    ensure!(
        statement["Condition"]
            == json!({ "StringEquals": { "iam:PassedToService": "ec2.amazonaws.com" } }),
        "{}",
        statement["Condition"]
    );
    Ok(())
}

/// The baked image keeps the SSM agent its parent image ships (Amazon Linux 2023 and
/// Ubuntu 24.04 both do), in both recipes.
#[test]
fn the_baked_image_keeps_the_ssm_agent() -> anyhow::Result<()> {
    let text = std::fs::read_to_string(workspace_path("infra/image/template.yaml"))?;
    let recipes = text.matches("Type: AWS::ImageBuilder::ImageRecipe").count();
    let kept = text
        .matches("SystemsManagerAgent:\n          UninstallAfterBuild: false")
        .count();
    ensure!(
        recipes == 2 && kept == recipes,
        "{kept} of {recipes} recipes keep the agent"
    );
    ensure!(!text.contains("UninstallAfterBuild: true"));
    Ok(())
}

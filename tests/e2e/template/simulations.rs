//! The requests `ephemera doctor` simulates for each role
//! (`ephemera_cli::cmd::doctor::iam::requests`) are ones template.yaml's own policies
//! allow, evaluated request by request with the translated template (`policy.rs`): a healthy
//! deployment passes `iam.simulate`, and a role that cannot make a call ephemera makes
//! fails it. The same evaluation refuses a request the stack does not grant, so the
//! check is not vacuous; it refuses the reaper a lease release by DeleteItem, which is why
//! the lease is given back with an UpdateItem.

use super::policy::{allows, context, Stack, ACCOUNT, REGION};
use anyhow::{ensure, Context};
use ephemera_cli::cmd::doctor::iam::{requests, Names, Role};
use ephemera_tests::stack::{template_path, translate_template};
use serde_json::{json, Value};

/// The statements of the role with logical id `role`.
fn statements<'t>(template: &'t Value, role: &str) -> anyhow::Result<Vec<&'t Value>> {
    let policies = template["Resources"][role]["Properties"]["Policies"]
        .as_array()
        .with_context(|| format!("{role} has no inline policies"))?;
    Ok(policies
        .iter()
        .flat_map(|p| match &p["PolicyDocument"]["Statement"] {
            Value::Array(s) => s.iter().collect(),
            other => vec![other],
        })
        .filter_map(super::policy::unconditional)
        .collect())
}

/// The key secret of a further App, as the stack's parameter and the configuration name it.
const MORE_APP_KEY: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:eph/app-43-AbCdEf";

/// The part of `arn` after its last `separator`.
fn tail(arn: &str, separator: char) -> String {
    arn.rsplit(separator).next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn every_request_doctor_simulates_is_one_the_templates_policies_allow() -> anyhow::Result<()>
{
    let mut template = translate_template(&template_path()).await?;
    // A stack listing one more App's key, as `MoreAppKeySecretArns` does.
    template["Parameters"]["MoreAppKeySecretArns"]["Default"] = json!(MORE_APP_KEY);
    let template = template;
    let stack = Stack {
        template: &template,
    };
    let deployment = stack
        .resolve(&json!({"Ref": "DeploymentName"}))
        .context("DeploymentName")?;
    let names = Names {
        partition: "aws".into(),
        region: REGION.to_owned(),
        account: ACCOUNT.to_owned(),
        deployment: deployment.clone(),
        table: tail(&stack.arn_of("Table")?, '/'),
        jit_table: tail(&stack.arn_of("JitTable")?, '/'),
        queue_name: tail(&stack.arn_of("JobsQueue")?, ':'),
        config_parameter: format!("/ephemera/{deployment}/config"),
        default_config_parameter: format!("/ephemera/{deployment}/config-default"),
        app_key_secret_arn: stack.arn_of("AppKeySecret")?,
        more_app_key_secret_arns: vec![MORE_APP_KEY.to_owned()],
        webhook_secret_arn: stack.arn_of("WebhookSecret")?,
        runner_role_arn: stack.arn_of("RunnerRole")?,
    };
    let mut asked = 0;
    for role in Role::ALL {
        let statements = statements(&template, role.logical_id())?;
        for request in requests(role, &names) {
            let pairs: Vec<(&str, Vec<&str>)> = request
                .context
                .iter()
                .map(|(key, values)| (*key, values.iter().map(String::as_str).collect()))
                .collect();
            ensure!(
                allows(
                    &stack,
                    &statements,
                    request.action,
                    &request.resource,
                    &context(pairs)
                )?,
                "{}: template.yaml does not allow {request:?}",
                role.logical_id()
            );
            asked += 1;
        }
    }
    ensure!(asked > 40, "only {asked} requests");
    // Not vacuous: what one role is granted, another is refused.
    let webhook = statements(&template, Role::Webhook.logical_id())?;
    let launch = requests(Role::Scaler, &names)
        .into_iter()
        .find(|r| r.action == "ec2:CreateFleet")
        .context("no launch")?;
    ensure!(!allows(
        &stack,
        &webhook,
        launch.action,
        &launch.resource,
        &context(vec![])
    )?);
    // The reaper's lease release is asked, as the call it makes (an UpdateItem); a
    // release by DeleteItem on the runners table would be refused, as the reaper's role
    // deletes no item there.
    let reaper = statements(&template, Role::Reaper.logical_id())?;
    let release = requests(Role::Reaper, &names)
        .into_iter()
        .find(|r| r.purpose == Some("the reaper lease's release"))
        .context("the lease's release is not simulated")?;
    ensure!(release.action == "dynamodb:UpdateItem", "{release:?}");
    ensure!(!allows(
        &stack,
        &reaper,
        "dynamodb:DeleteItem",
        &release.resource,
        &context(vec![])
    )?);
    Ok(())
}

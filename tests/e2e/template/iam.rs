//! The IAM posture of template.yaml, read from the CloudFormation that aws-sam-translator
//! makes of it (so the permissions and Function URL that SAM generates are seen too):
//! no wildcard actions, EC2 mutations only on this deployment's tagged resources, the
//! webhook the only public entry point (writing only unrouted-job items to the table),
//! and the user data exactly infra/runner/bootstrap.sh (the runner instance role is
//! evaluated request by request in `instance_role`).

use anyhow::{ensure, Context};
use ephemera_tests::pipeline::workspace_path;
use ephemera_tests::stack::{template_path, translate_template};
use serde_json::Value;

/// EC2 actions that create, change or destroy instances or their tags.
const EC2_MUTATIONS: [&str; 4] = [
    "ec2:RunInstances",
    "ec2:CreateFleet",
    "ec2:TerminateInstances",
    "ec2:CreateTags",
];

/// Resource types a launch uses, or makes only as part of an instance: a statement naming
/// only these cannot start an instance by itself (that also needs `instance/*` and the
/// launch template, which are conditioned on the deployment tag).
const USED_BY_A_LAUNCH: [&str; 7] = [
    ":image/",
    ":subnet/",
    ":security-group/",
    ":network-interface/",
    ":volume/",
    ":spot-instances-request/",
    ":fleet/",
];

fn as_list(value: &Value) -> Vec<&Value> {
    match value {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// Every resource of type `kind`, as (logical id, properties).
fn resources<'a>(template: &'a Value, kind: &str) -> Vec<(&'a str, &'a Value)> {
    template["Resources"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, r)| r["Type"] == kind)
        .map(|(id, r)| (id.as_str(), &r["Properties"]))
        .collect()
}

/// (role logical id, statement) for every statement of every role's inline policies.
fn role_statements(template: &Value) -> Vec<(&str, &Value)> {
    resources(template, "AWS::IAM::Role")
        .into_iter()
        .flat_map(|(role, props)| {
            as_list(&props["Policies"])
                .into_iter()
                .flat_map(|p| as_list(&p["PolicyDocument"]["Statement"]))
                .filter_map(super::policy::unconditional)
                .map(move |s| (role, s))
        })
        .collect()
}

fn actions(statement: &Value) -> Vec<&str> {
    as_list(&statement["Action"])
        .into_iter()
        .filter_map(Value::as_str)
        .collect()
}

/// Whether `condition` requires the `ephemera:deployment` tag to be this deployment's.
fn requires_deployment_tag(condition: &Value) -> bool {
    condition
        .as_object()
        .into_iter()
        .flat_map(|operators| operators.values())
        .filter_map(Value::as_object)
        .flat_map(|keys| keys.iter())
        .any(|(key, value)| {
            key.ends_with("Tag/ephemera:deployment")
                && *value == serde_json::json!({ "Ref": "DeploymentName" })
        })
}

async fn translated() -> anyhow::Result<Value> {
    translate_template(&template_path()).await
}

#[tokio::test]
async fn template_posture_holds() -> anyhow::Result<()> {
    let template = translated().await?;
    no_action_is_a_wildcard(&template)?;
    ec2_mutations_need_the_deployment_tag(&template)?;
    webhook_is_the_only_public_entry_point(&template)?;
    each_function_has_its_own_role(&template)?;
    user_data_is_the_bootstrap_script(&template)?;
    webhook_writes_only_unrouted_items(&template)?;
    only_the_scaler_and_reaper_read_the_table(&template)?;
    only_the_scaler_and_reaper_read_the_more_app_keys(&template)?;
    Ok(())
}

/// The keys of `github.more_apps` (the `MoreAppKeySecretArns` parameter) are read by the
/// scaler and the reaper only, with `secretsmanager:GetSecretValue` on exactly those
/// ARNs, and only when some are listed (`HasMoreAppKeys`); no role reads every secret.
fn only_the_scaler_and_reaper_read_the_more_app_keys(template: &Value) -> anyhow::Result<()> {
    let mut readers = Vec::new();
    let written = resources(template, "AWS::IAM::Role")
        .into_iter()
        .flat_map(|(role, props)| {
            as_list(&props["Policies"])
                .into_iter()
                .flat_map(|p| as_list(&p["PolicyDocument"]["Statement"]))
                .map(move |s| (role, s))
        });
    for (role, statement) in written {
        let (condition, inner) = match statement["Fn::If"].as_array() {
            Some(branches) => (branches[0].as_str(), &branches[1]),
            None => (None, statement),
        };
        let names_them = inner.to_string().contains("MoreAppKeySecretArns");
        if names_them {
            ensure!(
                condition == Some("HasMoreAppKeys"),
                "{role} reads the more_apps keys without the HasMoreAppKeys condition"
            );
            ensure!(
                actions(inner) == ["secretsmanager:GetSecretValue"],
                "{role}: {inner}"
            );
            ensure!(
                inner["Resource"] == serde_json::json!({ "Ref": "MoreAppKeySecretArns" }),
                "{role} reads more than the listed secrets: {inner}"
            );
            readers.push(role);
        }
        let reads_secrets = actions(inner)
            .iter()
            .any(|a| a.eq_ignore_ascii_case("secretsmanager:GetSecretValue"));
        let everything = as_list(&inner["Resource"])
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains('*')));
        ensure!(
            !(reads_secrets && everything),
            "{role} reads secrets by wildcard: {inner}"
        );
    }
    readers.sort_unstable();
    ensure!(
        readers == ["ReaperRole", "ScalerRole"],
        "the more_apps keys are read by {readers:?}"
    );
    Ok(())
}

/// The runners table holds the shared installation token (`TOKEN#` items): no role of
/// the stack but the scaler's and the reaper's may read any item of it (a read action on
/// the table, its indexes, or any resource).
fn only_the_scaler_and_reaper_read_the_table(template: &Value) -> anyhow::Result<()> {
    const READS: [&str; 6] = [
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:Scan",
        "dynamodb:TransactGetItems",
        "dynamodb:PartiQLSelect",
    ];
    let mut readers = Vec::new();
    for (role, statement) in role_statements(template) {
        if statement["Effect"] != "Allow" {
            continue;
        }
        let reads = actions(statement)
            .iter()
            .any(|a| READS.contains(a) || a.ends_with(":*") || a.contains("Get*"));
        let resources = statement["Resource"].to_string();
        let on_table = resources.contains(r#"["Table","Arn"]"#)
            || resources.contains("${Table.Arn}")
            || resources.contains(r#""*""#);
        if reads && on_table {
            readers.push(role);
        }
    }
    readers.sort();
    readers.dedup();
    ensure!(
        readers == ["ReaperRole", "ScalerRole"],
        "roles that may read the runners table: {readers:?}"
    );
    Ok(())
}

/// The webhook's only table access: putting `UNROUTED#` items (jobs no pool takes) and
/// its own running-configuration item, `RUNNING#webhook`.
fn webhook_writes_only_unrouted_items(template: &Value) -> anyhow::Result<()> {
    let table: Vec<&Value> = role_statements(template)
        .into_iter()
        .filter(|(role, _)| *role == "WebhookRole")
        .map(|(_, statement)| statement)
        .filter(|s| actions(s).iter().any(|a| a.starts_with("dynamodb:")))
        .collect();
    ensure!(
        table.len() == 1,
        "one DynamoDB statement for the webhook: {table:?}"
    );
    ensure!(actions(table[0]) == ["dynamodb:PutItem"], "{}", table[0]);
    let keys = &table[0]["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"];
    ensure!(
        *keys == serde_json::json!(["UNROUTED#*", "RUNNING#webhook"]),
        "{}",
        table[0]
    );
    Ok(())
}

fn no_action_is_a_wildcard(template: &Value) -> anyhow::Result<()> {
    for (role, statement) in role_statements(template) {
        ensure!(
            statement["Effect"] == "Allow",
            "{role}: only Allow statements"
        );
        for action in actions(statement) {
            ensure!(
                action != "*" && !action.ends_with(":*"),
                "{role} allows {action}"
            );
        }
        ensure!(statement.get("NotAction").is_none(), "{role}: NotAction");
    }
    // The one managed policy, AWS's for the SSM agent on the runners of pools with
    // ssm_access, is checked apart (ssm_role.rs).
    for (role, props) in resources(template, "AWS::IAM::Role") {
        ensure!(
            props.get("ManagedPolicyArns").is_none() || role == "RunnerSsmRole",
            "{role} has managed policies, whose actions this test cannot see"
        );
    }
    ensure!(resources(template, "AWS::IAM::Policy").is_empty());
    ensure!(resources(template, "AWS::IAM::ManagedPolicy").is_empty());
    Ok(())
}

fn ec2_mutations_need_the_deployment_tag(template: &Value) -> anyhow::Result<()> {
    let mut conditioned = 0;
    for (role, statement) in role_statements(template) {
        let mutations: Vec<&str> = actions(statement)
            .into_iter()
            .filter(|a| EC2_MUTATIONS.contains(a))
            .collect();
        if mutations.is_empty() {
            continue;
        }
        if requires_deployment_tag(&statement["Condition"]) {
            conditioned += 1;
            continue;
        }
        // Not conditioned: only launching, only on what a launch uses.
        let sid = &statement["Sid"];
        ensure!(
            mutations
                .iter()
                .all(|a| *a == "ec2:RunInstances" || *a == "ec2:CreateFleet"),
            "{role} {sid}: {mutations:?} without the deployment tag condition"
        );
        for resource in as_list(&statement["Resource"]) {
            let text = resource.to_string();
            ensure!(
                USED_BY_A_LAUNCH.iter().any(|t| text.contains(t)),
                "{role} {sid}: {mutations:?} on {text} without the deployment tag condition"
            );
        }
    }
    ensure!(
        conditioned >= 4,
        "launch from the template, launch tagged instances, tag on launch, terminate (reaper)"
    );
    Ok(())
}

fn webhook_is_the_only_public_entry_point(template: &Value) -> anyhow::Result<()> {
    let kinds: Vec<&str> = template["Resources"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, r)| r["Type"].as_str())
        .collect();
    ensure!(
        !kinds.iter().any(|k| k.starts_with("AWS::ApiGateway")),
        "an API Gateway in {kinds:?}"
    );
    let urls = resources(template, "AWS::Lambda::Url");
    ensure!(urls.len() == 1, "{} Function URLs", urls.len());
    let (_, url) = urls[0];
    ensure!(url["AuthType"] == "NONE");
    ensure!(url["TargetFunctionArn"] == serde_json::json!({ "Ref": "WebhookFunction" }));
    for (id, permission) in resources(template, "AWS::Lambda::Permission") {
        let function = &permission["FunctionName"];
        match permission["Principal"].as_str() {
            Some("*") => {
                ensure!(
                    *function == serde_json::json!({ "Ref": "WebhookFunction" }),
                    "{id}"
                );
                // Only through the Function URL (the signature is its authentication).
                ensure!(
                    permission["FunctionUrlAuthType"] == "NONE"
                        || permission["InvokedViaFunctionUrl"] == true,
                    "{id} opens the webhook function beyond its Function URL"
                );
            }
            Some("events.amazonaws.com") => {
                ensure!(
                    *function == serde_json::json!({ "Ref": "ReaperFunction" }),
                    "{id}"
                );
                ensure!(
                    permission.get("SourceArn").is_some(),
                    "{id}: any rule could invoke"
                );
            }
            other => anyhow::bail!("{id}: unexpected principal {other:?}"),
        }
    }
    Ok(())
}

fn each_function_has_its_own_role(template: &Value) -> anyhow::Result<()> {
    let functions = resources(template, "AWS::Lambda::Function");
    ensure!(functions.len() == 3);
    let mut roles: Vec<String> = functions
        .iter()
        .map(|(_, p)| p["Role"].to_string())
        .collect();
    roles.sort();
    roles.dedup();
    ensure!(roles.len() == 3, "functions share a role: {roles:?}");
    Ok(())
}

/// The script as infra/user-data.sh puts it in the user data: every line but the comment
/// lines after the first (`#!`), and without the lines' indentation, which EC2's 16 KB has
/// no room for.
fn as_user_data(script: &str) -> String {
    script
        .split_inclusive('\n')
        .enumerate()
        .filter(|(i, line)| *i == 0 || !line.trim_start().starts_with('#'))
        .map(|(i, line)| {
            if i == 0 {
                line
            } else {
                line.trim_start_matches([' ', '\t'])
            }
        })
        .collect()
}

fn user_data_is_the_bootstrap_script(template: &Value) -> anyhow::Result<()> {
    let script = as_user_data(&std::fs::read_to_string(workspace_path(
        "infra/runner/bootstrap.sh",
    ))?);
    let templates = resources(template, "AWS::EC2::LaunchTemplate");
    ensure!(!templates.is_empty(), "no launch template");
    for (id, template_props) in templates {
        let join = &template_props["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1];
        let embedded = join
            .as_array()
            .and_then(|parts| parts.last())
            .and_then(Value::as_str)
            .with_context(|| format!("{id}'s user data is not a Fn::Join ending in the script"))?;
        ensure!(
            embedded == script,
            "{id}'s user data in template.yaml differs from infra/runner/bootstrap.sh (less \
             its comment lines and indentation): run `make user-data` after editing the script"
        );
    }
    // EC2 takes at most 16 KB of user data before base64: the script as above, and the
    // line of settings before it (under 600 bytes with the longest names and both sums;
    // tests/bootstrap checks that case to the byte).
    ensure!(
        script.len() + 600 <= 16 * 1024,
        "infra/runner/bootstrap.sh as user data is {} bytes: the user data would pass EC2's 16 KB",
        script.len()
    );
    Ok(())
}

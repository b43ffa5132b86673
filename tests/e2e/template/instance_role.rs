//! What a runner instance's credentials may do, evaluated rather than pattern-matched:
//! the runner role's policies from the translated template are asked about every action
//! that touches the stack's resources. Exactly two requests are allowed — GetItem of the
//! JIT table item whose key is the calling instance's own ARN, and UpdateItem of that
//! item touching only `instance_arn`, `jit_config`, `jit_read_at` and the runner it ran
//! (`runner_version`, `runner_image_version`, `runner_swap_ms`) and asking nothing back
//! (the bootstrap's `REMOVE jit_config SET jit_read_at, runner_version = ...`) — and everything else is
//! refused: another instance's item, several items at once, a Query or Scan, a delete,
//! any other write, the runners table, the queue, the secrets, the configuration. (Its
//! writes to the runners' log streams are evaluated in [`super::log_stream`].)

use super::policy::{allows, context, Stack, ACCOUNT, REGION};
use anyhow::{ensure, Context};
use ephemera_tests::stack::{template_path, translate_template};
use serde_json::Value;

/// Every action a role could use on what the stack holds.
const ACTIONS: [&str; 31] = [
    "dynamodb:GetItem",
    "dynamodb:DeleteItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:BatchGetItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:TransactGetItems",
    "dynamodb:TransactWriteItems",
    "dynamodb:ConditionCheckItem",
    "dynamodb:PartiQLSelect",
    "dynamodb:PartiQLDelete",
    "dynamodb:DescribeTable",
    "dynamodb:ExportTableToPointInTime",
    "dynamodb:DeleteTable",
    "dynamodb:UpdateTimeToLive",
    "sqs:SendMessage",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "ssm:GetParameter",
    "ssm:PutParameter",
    "ssm:DeleteParameter",
    "secretsmanager:GetSecretValue",
    "ec2:RunInstances",
    "ec2:TerminateInstances",
    "ec2:CreateTags",
    "ec2:DescribeInstances",
    "iam:PassRole",
    "lambda:InvokeFunction",
    "logs:PutLogEvents",
];

pub(super) fn own_arn() -> String {
    format!("arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0own")
}

fn other_arn() -> String {
    format!("arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0other")
}

/// The roles EC2 instances assume: the runner role, and the Session Manager role of
/// pools with `ssm_access`, whose inline policies are the same (see `ssm_role`).
pub(super) const INSTANCE_ROLES: [&str; 2] = ["RunnerRole", "RunnerSsmRole"];

/// The inline statements of `role`, after checking that the stack's roles EC2 instances
/// assume are exactly [`INSTANCE_ROLES`].
pub(super) fn runner_statements<'a>(
    template: &'a Value,
    role: &str,
) -> anyhow::Result<Vec<&'a Value>> {
    let resources = template["Resources"].as_object().context("no Resources")?;
    let mut roles: Vec<&str> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::IAM::Role")
        .filter(|(_, r)| {
            r["Properties"]["AssumeRolePolicyDocument"]
                .to_string()
                .contains("ec2.amazonaws.com")
        })
        .map(|(id, _)| id.as_str())
        .collect();
    roles.sort();
    ensure!(
        roles == INSTANCE_ROLES,
        "roles for EC2 instances: {roles:?}"
    );
    let props = &resources[role]["Properties"];
    let policies = props["Policies"].as_array().context("no inline policies")?;
    Ok(policies
        .iter()
        .flat_map(|p| match &p["PolicyDocument"]["Statement"] {
            Value::Array(s) => s.iter().collect(),
            other => vec![other],
        })
        .collect())
}

/// Every resource of the stack an instance could aim at, with the JIT table's ARN first.
fn stack_resources(stack: &Stack) -> anyhow::Result<Vec<String>> {
    let jit = stack.arn_of("JitTable")?;
    let mut arns = vec![
        jit.clone(),
        format!("{jit}/index/by-status"),
        "*".to_owned(),
    ];
    for (id, resource) in stack.template["Resources"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if let Ok(arn) = stack.arn_of(id) {
            if resource["Type"] == "AWS::DynamoDB::Table" {
                arns.push(format!("{arn}/index/by-status"));
            }
            arns.push(arn);
        }
    }
    arns.extend([own_arn(), other_arn()]);
    let unique: std::collections::BTreeSet<String> = arns.into_iter().collect();
    Ok(unique.into_iter().collect())
}

#[tokio::test]
async fn an_instance_may_get_and_stamp_only_its_own_jit_item_and_nothing_else() -> anyhow::Result<()>
{
    let template = translate_template(&template_path()).await?;
    let stack = Stack {
        template: &template,
    };
    let runner_role = &template["Resources"]["RunnerRole"]["Properties"];
    ensure!(
        runner_role.get("ManagedPolicyArns").is_none(),
        "managed policies"
    );
    let statements = runner_statements(&template, "RunnerRole")?;
    let jit_table = stack.arn_of("JitTable")?;
    let (own, other) = (own_arn(), other_arn());
    let (own, other) = (own.as_str(), other.as_str());
    let on_instance = |keys: Vec<&str>| {
        context(vec![
            ("ec2:SourceInstanceARN", vec![own]),
            ("dynamodb:LeadingKeys", keys),
        ])
    };
    let foreign = "arn:aws:ec2:us-east-1:999999999999:instance/i-1";

    for action in ["dynamodb:GetItem", "dynamodb:UpdateItem"] {
        ensure!(
            allows(
                &stack,
                &statements,
                action,
                &jit_table,
                &on_instance(vec![own])
            )?,
            "{action} of its own item is refused"
        );
        for (why, request) in [
            ("another instance's item", on_instance(vec![other])),
            ("its own and another's", on_instance(vec![own, other])),
            (
                "credentials that name no instance",
                context(vec![("dynamodb:LeadingKeys", vec![own])]),
            ),
            (
                "an instance of another account",
                context(vec![
                    ("ec2:SourceInstanceARN", vec![foreign]),
                    ("dynamodb:LeadingKeys", vec![foreign]),
                ]),
            ),
        ] {
            ensure!(
                !allows(&stack, &statements, action, &jit_table, &request)?,
                "{action} allowed for {why}"
            );
        }
    }

    ensure!(
        !allows(
            &stack,
            &statements,
            "dynamodb:DeleteItem",
            &jit_table,
            &on_instance(vec![own])
        )?,
        "DeleteItem of its own item is allowed"
    );
    stamps_only_the_read(&stack, &statements, &jit_table)?;

    let best_chance = on_instance(vec![own]);
    let mut allowed = Vec::new();
    for action in ACTIONS {
        for resource in stack_resources(&stack)? {
            if allows(&stack, &statements, action, &resource, &best_chance)? {
                allowed.push(format!("{action} on {resource}"));
            }
        }
    }
    allowed.sort();
    let expected = [
        format!("dynamodb:GetItem on {jit_table}"),
        format!("dynamodb:UpdateItem on {jit_table}"),
    ];
    ensure!(allowed == expected, "the runner role allows {allowed:#?}");
    Ok(())
}

/// The UpdateItem of its own item is allowed as the bootstrap sends it, and refused once
/// it touches another attribute (the TTL, the runner, a new one) or asks the item back.
fn stamps_only_the_read(
    stack: &Stack,
    statements: &[&Value],
    jit_table: &str,
) -> anyhow::Result<()> {
    let own = own_arn();
    let update = |attributes: Vec<&str>, return_values: Option<&str>| {
        let mut pairs = vec![
            ("ec2:SourceInstanceARN", vec![own.as_str()]),
            ("dynamodb:LeadingKeys", vec![own.as_str()]),
            ("dynamodb:Attributes", attributes),
        ];
        pairs.extend(return_values.map(|r| ("dynamodb:ReturnValues", vec![r])));
        allows(
            stack,
            statements,
            "dynamodb:UpdateItem",
            jit_table,
            &context(pairs),
        )
    };
    let stamp = vec!["instance_arn", "jit_config", "jit_read_at"];
    ensure!(
        update(stamp.clone(), None)?,
        "the bootstrap's stamp is refused"
    );
    let reporting = [
        stamp.clone(),
        vec!["runner_version", "runner_image_version", "runner_swap_ms"],
    ]
    .concat();
    ensure!(
        update(reporting, Some("NONE"))?,
        "the bootstrap's stamp naming the runner it ran is refused"
    );
    ensure!(
        update(stamp.clone(), Some("NONE"))?,
        "ReturnValues NONE is refused"
    );
    for asked in ["ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"] {
        ensure!(
            !update(stamp.clone(), Some(asked))?,
            "ReturnValues {asked} is allowed"
        );
    }
    for other in ["ttl", "runner", "runner_id", "anything"] {
        let mut attributes = stamp.clone();
        attributes.push(other);
        ensure!(
            !update(attributes, None)?,
            "an update of {other} is allowed"
        );
    }
    Ok(())
}

//! infra/deployer-policy.json against what the operator's credentials do: `destroy`'s
//! calls ([`super::ACTIONS`]), every AWS call of the CLI (each made through
//! `crate::errors::aws` with the service and the operation), and the delete CloudFormation makes
//! for each resource type of the two templates when a stack is deleted.

use std::path::{Path, PathBuf};

fn workspace(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The actions the policy allows (it allows only, on `*` or named resources).
fn allowed() -> Vec<String> {
    let text = std::fs::read_to_string(workspace("infra/deployer-policy.json")).expect("policy");
    let policy: serde_json::Value = serde_json::from_str(&text).expect("the policy is JSON");
    assert_eq!(policy["Version"], "2012-10-17");
    let mut actions = Vec::new();
    for statement in policy["Statement"].as_array().expect("statements") {
        assert_eq!(statement["Effect"], "Allow", "{statement}");
        match &statement["Action"] {
            serde_json::Value::String(one) => actions.push(one.clone()),
            serde_json::Value::Array(many) => actions.extend(
                many.iter()
                    .map(|a| a.as_str().expect("an action").to_owned()),
            ),
            other => panic!("Action is {other}"),
        }
    }
    actions
}

fn covers(allowed: &[String], action: &str) -> bool {
    allowed.iter().any(|granted| {
        granted.eq_ignore_ascii_case(action)
            || granted
                .strip_suffix('*')
                .is_some_and(|prefix| action.to_lowercase().starts_with(&prefix.to_lowercase()))
    })
}

/// IAM's prefix for the service names `crate::errors::aws` is given.
fn prefix_of(service: &str) -> &'static str {
    match service {
        "CloudFormation" => "cloudformation",
        "CloudWatch Logs" => "logs",
        "CloudWatch" => "cloudwatch",
        "DynamoDB" => "dynamodb",
        "EC2" => "ec2",
        "IAM" => "iam",
        "SQS" => "sqs",
        "SSM" => "ssm",
        "Secrets Manager" => "secretsmanager",
        "Service Quotas" => "servicequotas",
        "S3" => "s3",
        other => panic!("no IAM prefix known for {other}: add it here"),
    }
}

/// The IAM action an operation needs: its own name, but where IAM names it otherwise
/// (S3's ListObjectsV2 needs s3:ListBucket, "Actions, resources, and condition keys for
/// Amazon S3", https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
fn action_of(prefix: &str, operation: &str) -> String {
    match (prefix, operation) {
        ("s3", "ListObjectsV2") => "s3:ListBucket".to_owned(),
        _ => format!("{prefix}:{operation}"),
    }
}

/// What CloudFormation calls to delete a resource of each type the templates declare.
const DELETE_OF: [(&str, &[&str]); 19] = [
    (
        "AWS::S3::Bucket",
        &["s3:ListBucket", "s3:DeleteObject", "s3:DeleteBucket"],
    ),
    ("AWS::CloudWatch::Alarm", &["cloudwatch:DeleteAlarms"]),
    (
        "AWS::CloudWatch::Dashboard",
        &["cloudwatch:DeleteDashboards"],
    ),
    (
        "AWS::DynamoDB::Table",
        &["dynamodb:DeleteTable", "dynamodb:DescribeTable"],
    ),
    ("AWS::EC2::LaunchTemplate", &["ec2:DeleteLaunchTemplate"]),
    (
        "AWS::IAM::InstanceProfile",
        &[
            "iam:DeleteInstanceProfile",
            "iam:RemoveRoleFromInstanceProfile",
        ],
    ),
    (
        "AWS::IAM::Role",
        &["iam:DeleteRole", "iam:DeleteRolePolicy"],
    ),
    (
        "AWS::ImageBuilder::Component",
        &["imagebuilder:DeleteComponent"],
    ),
    (
        "AWS::ImageBuilder::DistributionConfiguration",
        &["imagebuilder:DeleteDistributionConfiguration"],
    ),
    (
        "AWS::ImageBuilder::ImagePipeline",
        &["imagebuilder:DeleteImagePipeline"],
    ),
    (
        "AWS::ImageBuilder::ImageRecipe",
        &["imagebuilder:DeleteImageRecipe"],
    ),
    (
        "AWS::ImageBuilder::InfrastructureConfiguration",
        &["imagebuilder:DeleteInfrastructureConfiguration"],
    ),
    (
        "AWS::ImageBuilder::LifecyclePolicy",
        &["imagebuilder:DeleteLifecyclePolicy"],
    ),
    ("AWS::Logs::LogGroup", &["logs:DeleteLogGroup"]),
    ("AWS::SQS::Queue", &["sqs:DeleteQueue"]),
    ("AWS::SQS::QueuePolicy", &["sqs:SetQueueAttributes"]),
    ("AWS::SSM::Parameter", &["ssm:DeleteParameter"]),
    (
        "AWS::SecretsManager::Secret",
        &["secretsmanager:DeleteSecret"],
    ),
    (
        "AWS::Serverless::Function",
        &[
            "lambda:DeleteFunction",
            "lambda:DeleteFunctionUrlConfig",
            "lambda:DeleteEventSourceMapping",
            "lambda:RemovePermission",
            "events:DeleteRule",
            "events:RemoveTargets",
        ],
    ),
];

#[test]
fn the_deployer_policy_allows_every_call_destroy_makes() {
    let allowed = allowed();
    for action in super::ACTIONS {
        assert!(
            covers(&allowed, action),
            "infra/deployer-policy.json lacks {action}"
        );
    }
}

#[test]
fn the_deployer_policy_allows_every_aws_call_of_the_cli() {
    let allowed = allowed();
    let mut seen = 0;
    let mut pending = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("source dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source");
            for call in text.split("aws(\"").skip(1) {
                let mut parts = call.splitn(3, '"');
                let (Some(service), Some(_), Some(rest)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                let Some(operation) = rest.split('"').next() else {
                    continue;
                };
                if operation.is_empty() || !operation.chars().all(|c| c.is_ascii_alphanumeric()) {
                    continue;
                }
                let action = action_of(prefix_of(service), operation);
                assert!(
                    covers(&allowed, &action),
                    "{}: infra/deployer-policy.json lacks {action}",
                    path.display()
                );
                seen += 1;
            }
        }
    }
    assert!(
        seen > 20,
        "found only {seen} AWS calls in the CLI's sources"
    );
}

#[test]
fn the_deployer_policy_allows_deleting_every_resource_type_of_both_templates() {
    let allowed = allowed();
    for template in ["template.yaml", "infra/image/template.yaml"] {
        let text = std::fs::read_to_string(workspace(template)).expect("template");
        for line in text.lines() {
            let Some(kind) = line.trim().strip_prefix("Type: AWS::") else {
                continue;
            };
            let kind = format!("AWS::{}", kind.trim());
            let (_, deletes) = DELETE_OF
                .iter()
                .find(|(k, _)| *k == kind)
                .unwrap_or_else(|| panic!("{template}: {kind}: say what deletes it in DELETE_OF"));
            for action in *deletes {
                assert!(
                    covers(&allowed, action),
                    "{kind}: the policy lacks {action}"
                );
            }
        }
    }
}

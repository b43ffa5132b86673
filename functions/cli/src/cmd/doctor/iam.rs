//! `iam.simulate`: each function's role and the runner instances' role asked, through
//! IAM's policy simulator (`SimulatePrincipalPolicy`), whether it may make every call
//! ephemera makes with it, on the deployment's own resources and with the request
//! context those calls carry (the deployment tag on launched instances and launch
//! templates, the table's leading keys, the instance's own ARN, the service a role is
//! passed to). A role whose policy was edited, or that a permissions boundary or an
//! organization's SCP narrows, shows here as the call it cannot make instead of as a
//! function failing minutes later. `tests/e2e/template/simulations.rs` checks that every
//! request below is one template.yaml's policies allow.

use super::report::{Check, Report};
use crate::errors::describe;
use async_trait::async_trait;

/// A role of the stack: its logical id in template.yaml, and what it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Webhook,
    Scaler,
    Reaper,
    Runner,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Webhook, Role::Scaler, Role::Reaper, Role::Runner];

    /// The role's logical id in template.yaml.
    pub fn logical_id(self) -> &'static str {
        match self {
            Role::Webhook => "WebhookRole",
            Role::Scaler => "ScalerRole",
            Role::Reaper => "ReaperRole",
            Role::Runner => "RunnerRole",
        }
    }
}

/// The names the simulated requests aim at: the stack's resources as ARNs.
#[derive(Debug, Clone)]
pub struct Names {
    pub region: String,
    pub account: String,
    pub deployment: String,
    pub table: String,
    pub jit_table: String,
    pub queue_name: String,
    /// The pushed configuration's parameter and the stack's default (names, `/…`).
    pub config_parameter: String,
    pub default_config_parameter: String,
    pub app_key_secret_arn: String,
    /// The key secrets of `github.more_apps` named by ARN (a name has no ARN to ask
    /// about until Secrets Manager adds its suffix).
    pub more_app_key_secret_arns: Vec<String>,
    pub webhook_secret_arn: String,
    pub runner_role_arn: String,
}

/// One request to simulate: an action on a resource, with its context keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub action: &'static str,
    pub resource: String,
    pub context: Vec<(&'static str, Vec<String>)>,
}

fn request(action: &'static str, resource: impl Into<String>) -> Request {
    Request {
        action,
        resource: resource.into(),
        context: Vec::new(),
    }
}

impl Request {
    fn with(mut self, key: &'static str, values: &[&str]) -> Request {
        self.context
            .push((key, values.iter().map(|v| (*v).to_owned()).collect()));
        self
    }
}

/// What the simulator answered for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// No statement allows it (`implicitDeny`).
    ImplicitDeny,
    /// A statement denies it (`explicitDeny`): a boundary, an SCP or a Deny.
    ExplicitDeny,
}

/// The requests `role` must be allowed, as ephemera makes them.
pub fn requests(role: Role, names: &Names) -> Vec<Request> {
    let (region, account, deployment) = (&names.region, &names.account, &names.deployment);
    let arn = |service: &str, rest: &str| format!("arn:aws:{service}:{region}:{account}:{rest}");
    let table = arn("dynamodb", &format!("table/{}", names.table));
    let jit_table = arn("dynamodb", &format!("table/{}", names.jit_table));
    let queue = arn("sqs", &names.queue_name);
    let parameters = [
        arn("ssm", &format!("parameter{}", names.config_parameter)),
        arn(
            "ssm",
            &format!("parameter{}", names.default_config_parameter),
        ),
    ];
    let read_config = parameters
        .iter()
        .map(|p| request("ssm:GetParameter", p.clone()));
    let instance = arn("ec2", "instance/i-0ephemera");
    let tagged = [deployment.as_str()];
    let records = |requests: &mut Vec<Request>| {
        for action in [
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:TransactWriteItems",
        ] {
            requests.push(request(action, table.clone()));
        }
        requests.push(request(
            "dynamodb:Query",
            format!("{table}/index/by-status"),
        ));
    };
    let terminate = request("ec2:TerminateInstances", instance.clone())
        .with("aws:ResourceTag/ephemera:deployment", &tagged);
    let mut requests: Vec<Request> = Vec::new();
    match role {
        Role::Webhook => {
            requests.extend(read_config);
            requests.push(request(
                "secretsmanager:GetSecretValue",
                names.webhook_secret_arn.clone(),
            ));
            requests.push(request("sqs:SendMessage", queue));
            for key in ["UNROUTED#1", "RUNNING#webhook"] {
                requests.push(
                    request("dynamodb:PutItem", table.clone()).with("dynamodb:LeadingKeys", &[key]),
                );
            }
        }
        Role::Scaler => {
            requests.extend(read_config);
            requests.push(request(
                "secretsmanager:GetSecretValue",
                names.app_key_secret_arn.clone(),
            ));
            for secret in &names.more_app_key_secret_arns {
                requests.push(request("secretsmanager:GetSecretValue", secret.clone()));
            }
            for action in [
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:GetQueueAttributes",
                "sqs:SendMessage",
            ] {
                requests.push(request(action, queue.clone()));
            }
            records(&mut requests);
            for action in ["ec2:CreateFleet", "ec2:RunInstances"] {
                for resource in [
                    format!("arn:aws:ec2:{region}::image/ami-0ephemera"),
                    arn("ec2", "subnet/subnet-0ephemera"),
                    arn("ec2", "security-group/sg-0ephemera"),
                    arn("ec2", "network-interface/eni-0ephemera"),
                    arn("ec2", "volume/vol-0ephemera"),
                ] {
                    requests.push(request(action, resource));
                }
                requests.push(
                    request(action, arn("ec2", "launch-template/lt-0ephemera"))
                        .with("aws:ResourceTag/ephemera:deployment", &tagged),
                );
                requests.push(
                    request(action, instance.clone())
                        .with("aws:RequestTag/ephemera:deployment", &tagged),
                );
            }
            requests.push(request(
                "ec2:CreateFleet",
                arn("ec2", "fleet/fleet-0ephemera"),
            ));
            requests.push(
                request("ec2:CreateTags", instance.clone())
                    .with("ec2:CreateAction", &["CreateFleet"])
                    .with("aws:RequestTag/ephemera:deployment", &tagged),
            );
            requests.push(terminate);
            requests.push(
                request("iam:PassRole", names.runner_role_arn.clone())
                    .with("iam:PassedToService", &["ec2.amazonaws.com"]),
            );
            for action in [
                "ec2:DescribeInstances",
                "ec2:DescribeImages",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeLaunchTemplateVersions",
            ] {
                requests.push(request(action, "*"));
            }
            for action in ["dynamodb:PutItem", "dynamodb:GetItem"] {
                requests.push(request(action, jit_table.clone()));
            }
        }
        Role::Reaper => {
            requests.extend(read_config);
            requests.push(request(
                "secretsmanager:GetSecretValue",
                names.app_key_secret_arn.clone(),
            ));
            for secret in &names.more_app_key_secret_arns {
                requests.push(request("secretsmanager:GetSecretValue", secret.clone()));
            }
            records(&mut requests);
            requests.push(request("sqs:SendMessage", queue));
            requests.push(terminate);
            for action in [
                "ec2:DescribeInstances",
                "pricing:GetProducts",
                "ec2:DescribeSpotPriceHistory",
            ] {
                requests.push(request(action, "*"));
            }
            requests.push(request("dynamodb:DeleteItem", jit_table));
        }
        Role::Runner => {
            let own = arn("ec2", "instance/i-0ephemera");
            let on_own = |action| {
                request(action, jit_table.clone())
                    .with("ec2:SourceInstanceARN", &[own.as_str()])
                    .with("dynamodb:LeadingKeys", &[own.as_str()])
            };
            requests.push(on_own("dynamodb:GetItem"));
            // The bootstrap's stamp: REMOVE jit_config SET jit_read_at, nothing asked back.
            requests.push(
                on_own("dynamodb:UpdateItem")
                    .with(
                        "dynamodb:Attributes",
                        &["instance_arn", "jit_config", "jit_read_at"],
                    )
                    .with("dynamodb:ReturnValues", &["NONE"]),
            );
            // The bootstrap's logs, into the stream named by the instance id.
            let stream = arn(
                "logs",
                &format!("log-group:/ephemera/{deployment}/runners:log-stream:i-0ephemera"),
            );
            for action in ["logs:CreateLogStream", "logs:PutLogEvents"] {
                requests.push(
                    request(action, stream.clone()).with("ec2:SourceInstanceARN", &[own.as_str()]),
                );
            }
        }
    }
    requests
}

/// IAM, for the roles' simulation.
#[async_trait]
pub trait IamPort: Send + Sync {
    /// The ARN of the role named `role_name` (`GetRole`).
    async fn role_arn(&self, role_name: &str) -> anyhow::Result<String>;
    /// What IAM decides for `request` made by `principal_arn`.
    async fn simulate(&self, principal_arn: &str, request: &Request) -> anyhow::Result<Decision>;
}

/// The account id in an ARN (`arn:aws:iam::123456789012:role/…`).
pub fn account_of(arn: &str) -> Option<&str> {
    arn.split(':').nth(4).filter(|a| !a.is_empty())
}

/// `iam.simulate`, one line per role: `roles` maps each role's logical id to its name
/// (the stack's physical id); `names` without `runner_role_arn` and `account`, which
/// come from IAM.
pub async fn simulate_roles(
    roles: &std::collections::BTreeMap<String, String>,
    mut names: Names,
    iam: &dyn IamPort,
    report: &mut Report,
) {
    let mut arns = std::collections::BTreeMap::new();
    for role in Role::ALL {
        let Some(name) = roles.get(role.logical_id()) else {
            report.push(
                Check::fail(
                    "iam.simulate",
                    format!("the stack has no {}", role.logical_id()),
                    "deploy the stack again from this version's template.yaml: make deploy",
                )
                .on(role.logical_id()),
            );
            continue;
        };
        match iam.role_arn(name).await {
            Ok(arn) => {
                arns.insert(role.logical_id(), arn);
            }
            Err(err) => report.push(
                Check::warn(
                    "iam.simulate",
                    format!("cannot read role {name}: {}", describe(&err)),
                    "the credentials need iam:GetRole and iam:SimulatePrincipalPolicy",
                )
                .on(role.logical_id()),
            ),
        }
    }
    if let Some(runner) = arns.get(Role::Runner.logical_id()) {
        names.runner_role_arn = runner.clone();
    }
    if let Some(account) = arns.values().find_map(|arn| account_of(arn)) {
        names.account = account.to_owned();
    }
    // The simulator's first error stands for the other roles (the same credentials, the
    // same endpoint): each is reported, none asked again.
    let mut unavailable: Option<String> = None;
    for role in Role::ALL {
        let Some(principal) = arns.get(role.logical_id()) else {
            continue;
        };
        let check = match &unavailable {
            Some(why) => unsimulated(why),
            None => match simulate_role(role, principal, &names, iam).await {
                Ok(check) => check,
                Err(why) => {
                    let check = unsimulated(&why);
                    unavailable = Some(why);
                    check
                }
            },
        };
        report.push(check.on(role.logical_id()));
    }
}

fn unsimulated(why: &str) -> Check {
    Check::warn(
        "iam.simulate",
        format!("cannot simulate the role's policies: {why}"),
        "the credentials need iam:SimulatePrincipalPolicy; or check the role's policies in \
         the IAM console against template.yaml",
    )
}

/// The role's check; `Err` with why when the simulator cannot answer.
async fn simulate_role(
    role: Role,
    principal: &str,
    names: &Names,
    iam: &dyn IamPort,
) -> Result<Check, String> {
    let requests = requests(role, names);
    let mut refused = Vec::new();
    let mut explicit = false;
    for request in &requests {
        match iam.simulate(principal, request).await {
            Ok(Decision::Allowed) => {}
            Ok(decision) => {
                explicit |= decision == Decision::ExplicitDeny;
                let how = if decision == Decision::ExplicitDeny {
                    "explicitly denied"
                } else {
                    "not allowed"
                };
                refused.push(format!(
                    "{} on {} ({how})",
                    request.action, request.resource
                ));
            }
            Err(err) => return Err(describe(&err)),
        }
    }
    if refused.is_empty() {
        return Ok(Check::pass(
            "iam.simulate",
            format!("{} requests allowed", requests.len()),
        ));
    }
    let fix = if explicit {
        "a Deny overrides the stack's policy: look for a permissions boundary on the role, an \
         organization SCP or a Deny statement, and exempt these actions"
    } else {
        "the role's policy no longer grants them: deploy the stack again (make deploy) to \
         restore template.yaml's policy"
    };
    Ok(Check::fail(
        "iam.simulate",
        format!("the role may not make {}", refused.join("; ")),
        fix,
    ))
}

//! `iam.simulate`: each function's role and the runner instances' role asked, through
//! IAM's policy simulator (`SimulatePrincipalPolicy`), whether it may make every call
//! ephemera makes with it, on the deployment's own resources and with the request
//! context those calls carry (the deployment tag on launched instances and launch
//! templates, the table's leading keys, the instance's own ARN, the service a role is
//! passed to). A role whose policy was edited, or that a permissions boundary or an
//! organization's SCP narrows, shows here as the call it cannot make instead of as a
//! function failing minutes later. `tests/e2e/template/simulations.rs` checks that every
//! request below is one template.yaml's policies allow. The requests are here; asking
//! the simulator and judging its answers is [`simulate`].

mod simulate;

use async_trait::async_trait;
pub use simulate::simulate_roles;

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
    /// The partition of the roles' ARNs (`aws`, `aws-cn`, `aws-us-gov`).
    pub partition: String,
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
    /// What ephemera does with the call, where the action alone does not say.
    pub purpose: Option<&'static str>,
}

fn request(action: &'static str, resource: impl Into<String>) -> Request {
    Request {
        action,
        resource: resource.into(),
        context: Vec::new(),
        purpose: None,
    }
}

impl Request {
    fn with(mut self, key: &'static str, values: &[&str]) -> Request {
        self.context
            .push((key, values.iter().map(|v| (*v).to_owned()).collect()));
        self
    }

    fn for_(mut self, purpose: &'static str) -> Request {
        self.purpose = Some(purpose);
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
    /// `implicitDeny` for want of the condition keys `keys`, which the simulator listed
    /// as missing context values: it could not judge the conditions that would allow it.
    Undecided {
        keys: Vec<String>,
    },
}

/// The requests `role` must be allowed, as ephemera makes them.
pub fn requests(role: Role, names: &Names) -> Vec<Request> {
    let (partition, region, account) = (&names.partition, &names.region, &names.account);
    let deployment = &names.deployment;
    let arn =
        |service: &str, rest: &str| format!("arn:{partition}:{service}:{region}:{account}:{rest}");
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
    // A transaction is authorized per item, by these actions ("Using IAM with DynamoDB
    // transactions"): IAM has no action of its own for TransactWriteItems.
    let records = |requests: &mut Vec<Request>| {
        for action in [
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        ] {
            requests.push(request(action, table.clone()));
        }
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
                    format!("arn:{partition}:ec2:{region}::image/ami-0ephemera"),
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
            requests.push(
                request("iam:PassRole", names.runner_role_arn.clone())
                    .with("iam:PassedToService", &["ec2.amazonaws.com"]),
            );
            for action in [
                "ec2:DescribeImages",
                "ec2:DescribeInstanceTypes",
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
            requests.push(request(
                "dynamodb:Query",
                format!("{table}/index/by-status"),
            ));
            // The reaper gives its lease back with a conditional UpdateItem of the lease
            // item (functions/aws/src/dynamo/lease.rs); its role deletes no item here.
            requests.push(
                request("dynamodb:UpdateItem", table.clone()).for_("the reaper lease's release"),
            );
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
            // The bootstrap's stamp: REMOVE jit_config SET jit_read_at and the runner it
            // ran (runner_version, runner_image_version, runner_swap_ms), nothing asked back.
            requests.push(
                on_own("dynamodb:UpdateItem")
                    .with(
                        "dynamodb:Attributes",
                        &[
                            "instance_arn",
                            "jit_config",
                            "jit_read_at",
                            "runner_version",
                            "runner_image_version",
                            "runner_swap_ms",
                        ],
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

/// The partition of an ARN (`aws` in `arn:aws:iam::…`, `aws-cn`, `aws-us-gov`).
pub fn partition_of(arn: &str) -> Option<&str> {
    arn.strip_prefix("arn:")?
        .split(':')
        .next()
        .filter(|p| !p.is_empty())
}

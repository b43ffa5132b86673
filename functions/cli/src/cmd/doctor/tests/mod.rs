//! The checks' logic on fakes of every port: a healthy deployment passes everything,
//! and each broken setting fails exactly the check that names it. The fakes and the
//! healthy deployment are here; the tests of each area are in a file of that name.

mod account;
mod capacity;
mod ec2;
mod github;
mod more_apps;
mod rate_limit;
mod rejections;
mod runner_image;
mod runner_version;
mod simulator;
mod stack;

use super::checks::{diagnose, Ports, Request, APP_KEY_PLACEHOLDER};
use super::ports::*;
use super::report::{Report, Status};
use async_trait::async_trait;
use ephemera_aws::config_source::LoadedConfig;
use ephemera_core::config::Config;
use ephemera_core::ports::{ForgeError, HookDelivery};
use ephemera_github::AppDescription;
use std::collections::{BTreeMap, BTreeSet};
use time::OffsetDateTime;

const CONFIG: &str = "deployment: eph
github:
  app_id: 42
  api_url: https://api.github.com
pools:
  - name: linux-arm64
    labels: [self-hosted, linux, ARM64]
    max_runners: 4
    instance_types: [t4g.small]
    subnets: [subnet-1]
    launch_template: eph-runner
    warm_owner: acme
";

const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nfake\n-----END RSA PRIVATE KEY-----";

/// A whole deployment, healthy unless a test breaks a part of it.
#[derive(Clone)]
struct World {
    stack_status: String,
    outputs: BTreeMap<String, String>,
    config: Result<String, String>,
    secret: String,
    jwt_accepted: bool,
    permissions: BTreeMap<String, String>,
    events: Vec<String>,
    webhook_url: Option<String>,
    installed_on: BTreeSet<String>,
    deliveries: Vec<u16>,
    subnets: BTreeSet<String>,
    groups: BTreeSet<String>,
    template_groups: Vec<String>,
    image_arch: Option<String>,
    types: BTreeMap<String, Vec<String>>,
    dry_run: DryRunAnswer,
    parameters: BTreeMap<String, String>,
    /// Role ARN → (action → decision) the simulator gives other than Allowed;
    /// `simulation_fails` makes it answer with an error.
    denied: BTreeMap<String, BTreeMap<String, super::iam::Decision>>,
    simulation_fails: bool,
    /// Function → (parameter, version) it recorded running.
    running: BTreeMap<String, (String, i64)>,
    /// Service Quotas: `service/code` → value; a missing one is unknown there.
    quotas: BTreeMap<String, f64>,
    /// CloudWatch's sums of `WebhookRejected` by reason, or the error it answers.
    rejections: Result<BTreeMap<String, f64>, String>,
    /// `GET /rate_limit`'s buckets of every installation.
    rate_limits: BTreeMap<String, ephemera_github::RateBucket>,
    /// The App this world's GitHub port speaks as (42 unless connected as another).
    app_id: u64,
    /// The further Apps' key secrets: secret id → value.
    more_secrets: BTreeMap<String, String>,
    /// Where each further App is installed.
    more_installed: BTreeMap<u64, BTreeSet<String>>,
    /// Log group → its retention in days (`None`: forever).
    log_groups: BTreeMap<String, Option<i32>>,
    /// SSM parameters other than the configuration: name → value.
    ssm_parameters: BTreeMap<String, String>,
    /// The images EC2 describes (`DescribeImages`).
    images: BTreeMap<String, ImageFacts>,
    /// The runner bucket's `runner/latest-<arch>` lines: arch → line.
    runner_latest: BTreeMap<String, String>,
    /// The partition of the roles' ARNs; the simulator refuses a request for a resource
    /// of another partition.
    partition: String,
    /// The region's network interfaces (`DescribeNetworkInterfaces`).
    network_interfaces: u64,
    /// The free addresses of each subnet EC2 knows, and of the region's default subnets.
    free_addresses: BTreeMap<String, u64>,
    default_subnets: BTreeMap<String, u64>,
}

fn bucket(remaining: u64, limit: u64) -> ephemera_github::RateBucket {
    ephemera_github::RateBucket {
        limit,
        remaining,
        reset: time::OffsetDateTime::now_utc().unix_timestamp() + 1_800,
    }
}

fn healthy() -> World {
    let outputs = [
        ("TableName", "eph-runners"),
        ("QueueUrl", "https://sqs/eph-jobs"),
        ("ConfigParameterName", "/ephemera/eph/config"),
        ("DefaultConfigParameterName", "/ephemera/eph/config-default"),
        ("GitHubAppKeySecret", "arn:secret:key"),
        ("LaunchTemplateName", "eph-runner"),
        ("RunnerLogGroupName", "/ephemera/eph/runners"),
        ("WebhookUrl", "https://hook.lambda-url/"),
        ("RunnerBucketName", "eph-runner-bucket"),
    ];
    World {
        stack_status: "CREATE_COMPLETE".into(),
        outputs: outputs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        config: Ok(CONFIG.into()),
        secret: PEM.into(),
        jwt_accepted: true,
        permissions: [
            ("organization_self_hosted_runners", "write"),
            ("actions", "write"),
            ("metadata", "read"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        events: vec!["workflow_job".into()],
        webhook_url: Some("https://hook.lambda-url".into()),
        installed_on: ["acme".to_string()].into(),
        deliveries: vec![200, 200],
        subnets: ["subnet-1".to_string()].into(),
        groups: ["sg-1".to_string()].into(),
        template_groups: vec!["sg-1".into()],
        image_arch: Some("arm64".into()),
        types: [
            ("t4g.small".to_string(), vec!["arm64".to_string()]),
            (
                "t3.micro".to_string(),
                vec!["i386".to_string(), "x86_64".to_string()],
            ),
        ]
        .into(),
        dry_run: DryRunAnswer::WouldSucceed,
        parameters: [
            ("ScalerMaxConcurrency".to_string(), "5".to_string()),
            ("WebhookReservedConcurrency".to_string(), "50".to_string()),
            (
                "RunnerAmi".to_string(),
                "/ephemera/eph/runner-image/arm64".to_string(),
            ),
        ]
        .into(),
        denied: BTreeMap::new(),
        simulation_fails: false,
        running: ["webhook", "scaler", "reaper"]
            .iter()
            .map(|f| (f.to_string(), ("/ephemera/eph/config".to_string(), 3)))
            .collect(),
        quotas: [
            ("ec2/L-1216C47A".to_string(), 64.0),
            ("ec2/L-34B43A08".to_string(), 64.0),
            ("lambda/L-B99A9384".to_string(), 1000.0),
            ("vpc/L-DF5E4CA3".to_string(), 5000.0),
        ]
        .into(),
        rejections: Ok(BTreeMap::new()),
        rate_limits: BTreeMap::from([
            ("core".to_owned(), bucket(4_990, 5_000)),
            (
                "actions_runner_registration".to_owned(),
                bucket(10_000, 10_000),
            ),
        ]),
        app_id: 42,
        more_secrets: BTreeMap::new(),
        more_installed: BTreeMap::new(),
        log_groups: BTreeMap::from([("/ephemera/eph/runners".to_owned(), Some(30))]),
        ssm_parameters: BTreeMap::from([(
            "/ephemera/eph/runner-image/arm64".to_owned(),
            "ami-1".to_owned(),
        )]),
        images: BTreeMap::from([(
            "ami-1".to_owned(),
            ImageFacts {
                state: "available".into(),
                created: Some(OffsetDateTime::now_utc() - time::Duration::days(3)),
                runner_version: None,
                architecture: None,
            },
        )]),
        runner_latest: BTreeMap::from([(
            "arm64".to_owned(),
            format!("2.330.1 {}\n", "a".repeat(64)),
        )]),
        partition: "aws".into(),
        network_interfaces: 12,
        free_addresses: BTreeMap::from([("subnet-1".to_owned(), 251)]),
        default_subnets: BTreeMap::from([("subnet-d1".to_owned(), 4_091)]),
    }
}

#[async_trait]
impl super::iam::IamPort for World {
    async fn role_arn(&self, name: &str) -> anyhow::Result<String> {
        Ok(format!(
            "arn:{}:iam::123456789012:role/{name}",
            self.partition
        ))
    }
    async fn simulate(
        &self,
        principal: &str,
        request: &super::iam::Request,
    ) -> anyhow::Result<super::iam::Decision> {
        anyhow::ensure!(
            !self.simulation_fails,
            "IAM SimulatePrincipalPolicy: NotImplemented"
        );
        let own_partition = format!("arn:{}:", self.partition);
        let of_the_stack = [":dynamodb:", ":sqs:", ":ssm:", ":ec2:", ":logs:"]
            .iter()
            .any(|service| request.resource.contains(service));
        if of_the_stack && !request.resource.starts_with(&own_partition) {
            return Ok(super::iam::Decision::ImplicitDeny);
        }
        Ok(self
            .denied
            .get(principal)
            .and_then(|actions| actions.get(request.action))
            .cloned()
            .unwrap_or(super::iam::Decision::Allowed))
    }
}

#[async_trait]
impl QuotaPort for World {
    async fn quota(&self, service: &str, code: &str) -> anyhow::Result<Option<f64>> {
        Ok(self.quotas.get(&format!("{service}/{code}")).copied())
    }
}

#[async_trait]
impl StackPort for World {
    async fn describe_stack(&self, name: &str) -> anyhow::Result<StackFacts> {
        anyhow::ensure!(name == "eph", "Stack with id {name} does not exist");
        Ok(StackFacts {
            status: self.stack_status.clone(),
            outputs: self.outputs.clone(),
            parameters: self.parameters.clone(),
        })
    }
    async fn table_status(&self, _: &str) -> anyhow::Result<String> {
        Ok("ACTIVE".into())
    }
    async fn queue_reachable(&self, _: &str) -> anyhow::Result<()> {
        Ok(())
    }
    async fn log_group_retention(&self, name: &str) -> anyhow::Result<Option<Option<i32>>> {
        Ok(self.log_groups.get(name).copied())
    }
    async fn load_config(&self, parameter: &str, _: Option<&str>) -> anyhow::Result<LoadedConfig> {
        let text = self.config.clone().map_err(anyhow::Error::msg)?;
        Ok(LoadedConfig {
            config: Config::parse(parameter, &text)?,
            parameter: parameter.into(),
            version: 3,
        })
    }
    async fn secret_value(&self, id: &str) -> anyhow::Result<String> {
        if let Some(value) = self.more_secrets.get(id) {
            return Ok(value.clone());
        }
        if self.outputs.values().all(|output| output != id) {
            anyhow::bail!("ResourceNotFoundException: secret {id} not found");
        }
        Ok(self.secret.clone())
    }
    async fn ssm_parameter(&self, name: &str) -> anyhow::Result<Option<String>> {
        Ok(self.ssm_parameters.get(name).cloned())
    }
    async fn stack_resources(&self, _: &str) -> anyhow::Result<BTreeMap<String, String>> {
        Ok(["WebhookRole", "ScalerRole", "ReaperRole", "RunnerRole"]
            .iter()
            .map(|id| (id.to_string(), format!("eph-{id}")))
            .collect())
    }
    async fn runner_latest(&self, bucket: &str, arch: &str) -> anyhow::Result<Option<String>> {
        anyhow::ensure!(bucket == "eph-runner-bucket", "NoSuchBucket: {bucket}");
        Ok(self.runner_latest.get(arch).cloned())
    }
    fn region(&self) -> String {
        "us-east-1".into()
    }
    async fn running_config(
        &self,
        _: &str,
        function: &str,
    ) -> anyhow::Result<Option<ephemera_aws::running::RunningConfig>> {
        Ok(self.running.get(function).map(|(parameter, version)| {
            ephemera_aws::running::RunningConfig {
                function: function.into(),
                parameter: parameter.clone(),
                version: *version,
                at: OffsetDateTime::UNIX_EPOCH,
            }
        }))
    }
}

impl GitHubConnector for World {
    fn connect(&self, _: &str, app_id: u64, pem: &str) -> Result<Box<dyn GitHubPort>, String> {
        if !pem.starts_with("-----BEGIN") {
            return Err("not an RSA private key in PEM form".into());
        }
        let mut app = self.clone();
        if app_id != 42 {
            let installed = self.more_installed.get(&app_id);
            app.installed_on = installed.cloned().unwrap_or_default();
            app.app_id = app_id;
        }
        Ok(Box::new(app))
    }
}

#[async_trait]
impl GitHubPort for World {
    async fn describe_app(&self) -> Result<AppDescription, ForgeError> {
        if !self.jwt_accepted {
            return Err(ForgeError::Unauthorized);
        }
        Ok(AppDescription {
            id: self.app_id,
            slug: Some(match self.app_id {
                42 => "eph-app".to_owned(),
                other => format!("eph-app-{other}"),
            }),
            name: "eph app".into(),
            permissions: self.permissions.clone(),
            events: self.events.clone(),
        })
    }
    async fn webhook_url(&self) -> Result<Option<String>, ForgeError> {
        Ok(self.webhook_url.clone())
    }
    async fn installation(
        &self,
        owner: &str,
        repo: Option<&str>,
    ) -> Result<Option<u64>, ForgeError> {
        let account = match repo {
            Some(repo) => format!("{owner}/{repo}"),
            None => owner.to_owned(),
        };
        Ok(self.installed_on.contains(&account).then_some(7))
    }
    async fn rate_limits(
        &self,
        _installation_id: u64,
    ) -> Result<BTreeMap<String, ephemera_github::RateBucket>, ForgeError> {
        Ok(self.rate_limits.clone())
    }
    async fn recent_deliveries(&self) -> Result<Vec<HookDelivery>, ForgeError> {
        Ok(self
            .deliveries
            .iter()
            .enumerate()
            .map(|(i, &status_code)| HookDelivery {
                id: i as u64,
                guid: format!("g{i}"),
                event: "workflow_job".into(),
                action: Some("queued".into()),
                status_code,
                delivered_at: OffsetDateTime::UNIX_EPOCH,
                redelivery: false,
            })
            .collect())
    }
}

#[async_trait]
impl Ec2Port for World {
    async fn missing_subnets(&self, subnets: &[String]) -> anyhow::Result<Vec<String>> {
        Ok(subnets
            .iter()
            .filter(|s| !self.subnets.contains(*s))
            .cloned()
            .collect())
    }
    async fn missing_security_groups(&self, groups: &[String]) -> anyhow::Result<Vec<String>> {
        Ok(groups
            .iter()
            .filter(|g| !self.groups.contains(*g))
            .cloned()
            .collect())
    }
    async fn launch_template(
        &self,
        name: &str,
        _version: &str,
    ) -> anyhow::Result<Option<TemplateFacts>> {
        Ok((name == "eph-runner").then(|| TemplateFacts {
            image_id: Some("ami-1".into()),
            security_groups: self.template_groups.clone(),
        }))
    }
    async fn image_architecture(&self, image_id: &str) -> anyhow::Result<Option<String>> {
        Ok(self.image_arch.clone().filter(|_| image_id == "ami-1"))
    }
    async fn image(&self, image_id: &str) -> anyhow::Result<Option<ImageFacts>> {
        let architecture = self.image_architecture(image_id).await?;
        Ok(self.images.get(image_id).cloned().map(|facts| ImageFacts {
            architecture,
            ..facts
        }))
    }
    async fn instance_types(
        &self,
        types: &[String],
    ) -> anyhow::Result<BTreeMap<String, InstanceTypeFacts>> {
        Ok(types
            .iter()
            .filter_map(|t| {
                let architectures = self.types.get(t)?.clone();
                Some((
                    t.clone(),
                    InstanceTypeFacts {
                        architectures,
                        vcpus: if t.contains("xlarge") { 4 } else { 2 },
                    },
                ))
            })
            .collect())
    }
    async fn dry_run(&self, _: &DryRunLaunch) -> anyhow::Result<DryRunAnswer> {
        Ok(self.dry_run.clone())
    }
    async fn network_interfaces(&self) -> anyhow::Result<u64> {
        Ok(self.network_interfaces)
    }
    async fn free_addresses(&self, subnets: &[String]) -> anyhow::Result<BTreeMap<String, u64>> {
        if subnets.is_empty() {
            return Ok(self.default_subnets.clone());
        }
        Ok(subnets
            .iter()
            .filter(|s| self.subnets.contains(*s))
            .filter_map(|s| Some((s.clone(), *self.free_addresses.get(s)?)))
            .collect())
    }
}

async fn run(world: &World) -> Report {
    let request = Request {
        stack: "eph".into(),
        ..Request::default()
    };
    let ports = Ports {
        stack: world,
        github: world,
        ec2: world,
        quotas: world,
        iam: world,
        metrics: world,
    };
    diagnose(&request, &ports).await
}

/// The one failed check, with its fix; panics unless exactly one failed.
fn only_failure(report: &Report) -> (&'static str, String, String) {
    let failed: Vec<_> = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .collect();
    assert_eq!(failed.len(), 1, "{}", report.text());
    let check = failed[0];
    (
        check.check,
        check.message.clone(),
        check.fix.clone().expect("a failure says what to do"),
    )
}

#[tokio::test]
async fn a_healthy_deployment_passes_every_check() {
    let report = run(&healthy()).await;
    assert!(report.ok(), "{}", report.text());
    let not_passed: Vec<_> = report
        .checks
        .iter()
        .filter(|c| c.status != Status::Pass)
        .collect();
    assert!(not_passed.is_empty(), "{}", report.text());
    for name in [
        "stack.status",
        "stack.outputs",
        "stack.table",
        "stack.queue",
        "stack.runner_image",
        "config.valid",
        "github.app_key",
        "github.app",
        "github.permissions",
        "github.events",
        "github.webhook_url",
        "github.installation",
        "github.deliveries",
        "ec2.launch_template",
        "ec2.subnets",
        "ec2.security_groups",
        "ec2.architecture",
        "ec2.dry_run",
        "quotas.vcpu",
        "capacity.network_interfaces",
        "capacity.subnet_addresses",
        "capacity.burst",
        "lambda.concurrency",
        "webhook.rejections",
    ] {
        assert_eq!(report.named(name).len(), 1, "{name}: {}", report.text());
    }
    assert_eq!(report.named("config.running").len(), 3, "{}", report.text());
    assert_eq!(report.named("iam.simulate").len(), 4, "{}", report.text());
}

//! The checks' logic on fakes of every port: a healthy deployment passes everything,
//! and each broken setting fails exactly the check that names it.

use super::checks::{diagnose, Ports, Request, APP_KEY_PLACEHOLDER};
use super::ports::*;
use super::report::{Report, Status};
use async_trait::async_trait;
use ephemera_aws::lambda::LoadedConfig;
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
}

fn healthy() -> World {
    let outputs = [
        ("TableName", "eph-runners"),
        ("QueueUrl", "https://sqs/eph-jobs"),
        ("ConfigParameterName", "/ephemera/eph/config"),
        ("DefaultConfigParameterName", "/ephemera/eph/config-default"),
        ("GitHubAppKeySecret", "arn:secret:key"),
        ("LaunchTemplateName", "eph-runner"),
        ("WebhookUrl", "https://hook.lambda-url/"),
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
            ("actions", "read"),
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
        ]
        .into(),
    }
}

#[async_trait]
impl super::iam::IamPort for World {
    async fn role_arn(&self, name: &str) -> anyhow::Result<String> {
        Ok(format!("arn:aws:iam::123456789012:role/{name}"))
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
    async fn load_config(&self, parameter: &str, _: Option<&str>) -> anyhow::Result<LoadedConfig> {
        let text = self.config.clone().map_err(anyhow::Error::msg)?;
        Ok(LoadedConfig {
            config: Config::parse(parameter, &text)?,
            parameter: parameter.into(),
            version: 3,
        })
    }
    async fn secret_value(&self, _: &str) -> anyhow::Result<String> {
        Ok(self.secret.clone())
    }
    async fn stack_resources(&self, _: &str) -> anyhow::Result<BTreeMap<String, String>> {
        Ok(["WebhookRole", "ScalerRole", "ReaperRole", "RunnerRole"]
            .iter()
            .map(|id| (id.to_string(), format!("eph-{id}")))
            .collect())
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
        assert_eq!(app_id, 42);
        Ok(Box::new(self.clone()))
    }
}

#[async_trait]
impl GitHubPort for World {
    async fn describe_app(&self) -> Result<AppDescription, ForgeError> {
        if !self.jwt_accepted {
            return Err(ForgeError::Unauthorized);
        }
        Ok(AppDescription {
            id: 42,
            slug: Some("eph-app".into()),
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
    async fn launch_template(&self, name: &str) -> anyhow::Result<Option<TemplateFacts>> {
        Ok((name == "eph-runner").then(|| TemplateFacts {
            image_id: Some("ami-1".into()),
            security_groups: self.template_groups.clone(),
        }))
    }
    async fn image_architecture(&self, image_id: &str) -> anyhow::Result<Option<String>> {
        Ok(self.image_arch.clone().filter(|_| image_id == "ami-1"))
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
        "lambda.concurrency",
    ] {
        assert_eq!(report.named(name).len(), 1, "{name}: {}", report.text());
    }
    assert_eq!(report.named("config.running").len(), 3, "{}", report.text());
    assert_eq!(report.named("iam.simulate").len(), 4, "{}", report.text());
}

#[tokio::test]
async fn the_placeholder_key_fails_the_key_check_and_skips_githubs() {
    let mut world = healthy();
    world.secret = APP_KEY_PLACEHOLDER.into();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "github.app_key");
    assert!(message.contains("placeholder"), "{message}");
    assert!(
        fix.contains("put-secret-value --secret-id arn:secret:key"),
        "{fix}"
    );
    assert_eq!(report.named("github.app")[0].status, Status::Skip);
    assert_eq!(report.named("ec2.dry_run")[0].status, Status::Pass);
}

#[tokio::test]
async fn a_key_that_is_not_a_key_fails_the_key_check() {
    let mut world = healthy();
    world.secret = "hello".into();
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "github.app_key");
    assert!(message.contains("not an RSA private key"), "{message}");
}

#[tokio::test]
async fn a_refused_jwt_fails_the_app_check() {
    let mut world = healthy();
    world.jwt_accepted = false;
    let report = run(&world).await;
    let (check, _, fix) = only_failure(&report);
    assert_eq!(check, "github.app");
    assert!(fix.contains("App 42"), "{fix}");
    assert_eq!(report.named("github.webhook_url")[0].status, Status::Skip);
}

#[tokio::test]
async fn a_missing_permission_fails_the_permissions_check() {
    let mut world = healthy();
    world
        .permissions
        .insert("organization_self_hosted_runners".into(), "read".into());
    let (check, message, fix) = only_failure(&run(&world).await);
    assert_eq!(check, "github.permissions");
    assert!(
        message.contains("organization_self_hosted_runners: write (has read)"),
        "{message}"
    );
    assert!(
        fix.contains("https://github.com/settings/apps/eph-app"),
        "{fix}"
    );
}

#[tokio::test]
async fn repository_scope_needs_administration_instead() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("  api_url", "  scope: repo\n  api_url"));
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "github.permissions");
    assert!(
        message.contains("administration: write (has none)"),
        "{message}"
    );
}

#[tokio::test]
async fn no_workflow_job_event_fails_the_events_check() {
    let mut world = healthy();
    world.events = vec!["push".into()];
    let (check, message, fix) = only_failure(&run(&world).await);
    assert_eq!(check, "github.events");
    assert!(message.contains("it gets: push"), "{message}");
    assert!(fix.contains("Workflow job"), "{fix}");
}

#[tokio::test]
async fn a_wrong_webhook_url_fails_the_webhook_check_with_the_right_one() {
    let mut world = healthy();
    world.webhook_url = Some("https://old.example/webhook".into());
    let (check, message, fix) = only_failure(&run(&world).await);
    assert_eq!(check, "github.webhook_url");
    assert!(
        message.contains("is https://old.example/webhook"),
        "{message}"
    );
    assert!(fix.contains("https://hook.lambda-url/"), "{fix}");
    world.webhook_url = None;
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "github.webhook_url");
    assert!(message.contains("no webhook URL"), "{message}");
}

#[tokio::test]
async fn an_app_not_installed_fails_that_accounts_installation_check() {
    let mut world = healthy();
    world.installed_on.clear();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "github.installation");
    assert!(message.contains("not installed on acme"), "{message}");
    assert!(
        fix.contains("https://github.com/apps/eph-app/installations/new"),
        "{fix}"
    );
    assert_eq!(
        report.named("github.installation")[0].subject.as_deref(),
        Some("acme")
    );
}

#[tokio::test]
async fn without_accounts_to_check_the_installation_check_warns() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("    warm_owner: acme\n", ""));
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let check = report.named("github.installation")[0];
    assert_eq!(check.status, Status::Warn);
    assert!(check.fix.as_deref().unwrap_or_default().contains("--owner"));
}

#[tokio::test]
async fn failed_deliveries_are_counted_by_reason_as_a_warning() {
    let mut world = healthy();
    world.deliveries = vec![200, 503, 503, 0, 401];
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let check = report.named("github.deliveries")[0];
    assert_eq!(check.status, Status::Warn);
    assert!(
        check.message.starts_with("4 of 5 recent deliveries failed"),
        "{}",
        check.message
    );
    assert!(check.message.contains("2× HTTP 503"), "{}", check.message);
    assert!(check.message.contains("1× no answer"), "{}", check.message);
    assert!(
        check.message.contains("webhook secret mismatch"),
        "{}",
        check.message
    );
}

#[tokio::test]
async fn a_subnet_ec2_does_not_know_fails_the_subnets_check_and_skips_the_dry_run() {
    let mut world = healthy();
    world.subnets.clear();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "ec2.subnets");
    assert!(message.contains("subnet-1"), "{message}");
    assert!(fix.contains("RunnerSubnets"), "{fix}");
    assert_eq!(report.named("ec2.dry_run")[0].status, Status::Skip);
}

#[tokio::test]
async fn a_missing_security_group_fails_its_check() {
    let mut world = healthy();
    world.template_groups = vec!["sg-gone".into()];
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "ec2.security_groups");
    assert!(message.contains("sg-gone"), "{message}");
}

#[tokio::test]
async fn types_that_cannot_run_the_image_fail_the_architecture_check() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("[t4g.small]", "[t4g.small, t3.micro]"));
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "ec2.architecture");
    assert!(
        message.contains("image ami-1 is arm64; t3.micro (i386, x86_64) cannot run it"),
        "{message}"
    );
    world.config = Ok(CONFIG.replace("[t4g.small]", "[t9z.huge]"));
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "ec2.architecture");
    assert!(message.contains("no instance type t9z.huge"), "{message}");
}

#[tokio::test]
async fn a_refused_dry_run_fails_with_ec2s_reason() {
    let mut world = healthy();
    world.dry_run = DryRunAnswer::Refused {
        code: "UnauthorizedOperation".into(),
        message: "You are not authorized to perform this operation.".into(),
    };
    let (check, _, fix) = only_failure(&run(&world).await);
    assert_eq!(check, "ec2.dry_run");
    assert!(fix.contains("ec2:RunInstances"), "{fix}");
}

#[tokio::test]
async fn an_invalid_configuration_fails_its_check_and_skips_what_needs_it() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("max_runners: 4", "max_runners: 0"));
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "config.valid");
    assert!(message.contains("max_runners"), "{message}");
    assert!(
        fix.contains("ephemera config push FILE --stack eph"),
        "{fix}"
    );
    assert_eq!(report.named("ec2.pools")[0].status, Status::Skip);
}

#[tokio::test]
async fn a_stack_that_cannot_be_read_is_one_failure_and_nothing_else() {
    let request = Request {
        stack: "nope".into(),
        ..Request::default()
    };
    let world = healthy();
    let ports = Ports {
        stack: &world,
        github: &world,
        ec2: &world,
        quotas: &world,
        iam: &world,
    };
    let report = diagnose(&request, &ports).await;
    assert_eq!(report.checks.len(), 1, "{}", report.text());
    assert_eq!(report.checks[0].status, Status::Fail);
}

#[tokio::test]
async fn a_missing_output_fails_the_outputs_check() {
    let mut world = healthy();
    world.outputs.remove("GitHubAppKeySecret");
    let report = run(&world).await;
    let (check, message, _) = only_failure(&report);
    assert_eq!(check, "stack.outputs");
    assert!(message.contains("GitHubAppKeySecret"), "{message}");
    assert_eq!(report.named("github.app_key")[0].status, Status::Skip);
}

#[tokio::test]
async fn an_on_demand_vcpu_quota_too_low_fails_the_vcpu_check_naming_the_quota() {
    let mut world = healthy();
    // 4 runners of 2 vCPUs need 8.
    world.quotas.insert("ec2/L-1216C47A".into(), 5.0);
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "quotas.vcpu");
    assert!(message.contains("Running On-Demand Standard"), "{message}");
    assert!(message.contains("need 8"), "{message}");
    assert!(fix.contains("L-1216C47A"), "{fix}");
    assert!(fix.contains("max_runners of pool linux-arm64"), "{fix}");
}

#[tokio::test]
async fn a_spot_pool_counts_against_the_spot_quota_and_on_demand_its_fallback() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("max_runners: 4", "max_runners: 4\n    spot: true"));
    world.quotas.insert("ec2/L-34B43A08".into(), 6.0);
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "quotas.vcpu");
    assert!(message.contains("Spot Instance Requests"), "{message}");
    assert!(fix.contains("L-34B43A08"), "{fix}");
    // The on-demand quota is checked too (spot falls back to it), and suffices.
    let on_demand = report.named("quotas.vcpu");
    assert_eq!(on_demand.len(), 2, "{}", report.text());
}

#[tokio::test]
async fn a_gpu_type_counts_against_the_g_quota_not_the_standard_one() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("t4g.small", "g5g.xlarge"));
    world
        .types
        .insert("g5g.xlarge".into(), vec!["arm64".into()]);
    world.quotas.insert("ec2/L-DB2E81BA".into(), 8.0);
    let report = run(&world).await;
    // 4 runners of 4 vCPUs: 16 against G's 8; the Standard quota is not asked.
    let (check, message, _) = only_failure(&report);
    assert_eq!(check, "quotas.vcpu");
    assert!(message.contains("G and VT"), "{message}");
    assert!(message.contains("need 16"), "{message}");
    assert_eq!(report.named("quotas.vcpu").len(), 1, "{}", report.text());
}

#[tokio::test]
async fn a_quota_service_quotas_does_not_know_is_a_warning() {
    let mut world = healthy();
    world.quotas.clear();
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    for check in ["quotas.vcpu", "lambda.concurrency"] {
        let lines = report.named(check);
        assert_eq!(lines.len(), 1, "{}", report.text());
        assert_eq!(lines[0].status, Status::Warn, "{}", report.text());
    }
}

#[tokio::test]
async fn lambda_concurrency_below_the_scalers_fails_the_lambda_check() {
    let mut world = healthy();
    // A new account's 10 against ScalerMaxConcurrency 10 and the other functions' 3.
    world.quotas.insert("lambda/L-B99A9384".into(), 10.0);
    world
        .parameters
        .insert("ScalerMaxConcurrency".into(), "10".into());
    // Deployed as such an account must be, reserving nothing for the webhook.
    world
        .parameters
        .insert("WebhookReservedConcurrency".into(), "0".into());
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "lambda.concurrency");
    assert!(message.contains("needs 13"), "{message}");
    assert!(fix.contains("L-B99A9384"), "{fix}");
    assert!(fix.contains("ScalerMaxConcurrency (at most 7)"), "{fix}");
}

#[test]
fn instance_families_map_to_their_vcpu_quotas() {
    use super::quotas::{vcpu_quota, Purchase};
    let code = |t: &str, p| vcpu_quota(t, p).map(|q| q.code);
    assert_eq!(code("m7i.large", Purchase::OnDemand), Some("L-1216C47A"));
    assert_eq!(code("c7gn.medium", Purchase::Spot), Some("L-34B43A08"));
    assert_eq!(code("t4g.small", Purchase::OnDemand), Some("L-1216C47A"));
    assert_eq!(code("g5.xlarge", Purchase::OnDemand), Some("L-DB2E81BA"));
    assert_eq!(code("vt1.3xlarge", Purchase::Spot), Some("L-3819A6DF"));
    assert_eq!(code("p4d.24xlarge", Purchase::OnDemand), Some("L-417A185B"));
    assert_eq!(code("inf2.xlarge", Purchase::OnDemand), Some("L-1945791B"));
    assert_eq!(code("dl1.24xlarge", Purchase::Spot), Some("L-85EED4F7"));
    assert_eq!(code("trn1.2xlarge", Purchase::OnDemand), Some("L-2C3B7624"));
    assert_eq!(code("x2gd.large", Purchase::OnDemand), Some("L-7295265B"));
    assert_eq!(code("u-6tb1.metal", Purchase::OnDemand), Some("L-43DA4232"));
    assert_eq!(code("hpc7g.4xlarge", Purchase::OnDemand), None);
}

#[tokio::test]
async fn a_function_on_an_older_configuration_version_is_a_warning_naming_it() {
    let mut world = healthy();
    world
        .running
        .insert("scaler".into(), ("/ephemera/eph/config".into(), 2));
    world.running.remove("reaper");
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let lines = report.named("config.running");
    let by = |subject: &str| {
        lines
            .iter()
            .find(|c| c.subject.as_deref() == Some(subject))
            .unwrap_or_else(|| panic!("no line for {subject}: {}", report.text()))
    };
    assert_eq!(by("webhook").status, Status::Pass);
    assert_eq!(by("scaler").status, Status::Warn);
    assert!(
        by("scaler").message.contains("runs version 2"),
        "{}",
        report.text()
    );
    assert_eq!(by("reaper").status, Status::Warn);
    assert!(
        by("reaper").message.contains("has not run yet"),
        "{}",
        report.text()
    );
}

fn deny(world: &mut World, role: &str, action: &str, decision: super::iam::Decision) {
    world
        .denied
        .entry(format!("arn:aws:iam::123456789012:role/eph-{role}"))
        .or_default()
        .insert(action.into(), decision);
}

#[tokio::test]
async fn a_role_without_an_action_fails_its_simulation_naming_the_action() {
    let mut world = healthy();
    deny(
        &mut world,
        "ScalerRole",
        "iam:PassRole",
        super::iam::Decision::ImplicitDeny,
    );
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "iam.simulate");
    assert!(
        message.contains("iam:PassRole on arn:aws:iam::123456789012:role/eph-RunnerRole"),
        "{message}"
    );
    assert!(message.contains("not allowed"), "{message}");
    assert!(fix.contains("make deploy"), "{fix}");
    let failed = report
        .named("iam.simulate")
        .into_iter()
        .find(|c| c.status == Status::Fail)
        .expect("failed line");
    assert_eq!(failed.subject.as_deref(), Some("ScalerRole"));
}

#[tokio::test]
async fn an_explicit_deny_names_boundaries_and_scps() {
    let mut world = healthy();
    deny(
        &mut world,
        "RunnerRole",
        "dynamodb:GetItem",
        super::iam::Decision::ExplicitDeny,
    );
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "iam.simulate");
    assert!(message.contains("explicitly denied"), "{message}");
    assert!(fix.contains("permissions boundary"), "{fix}");
}

#[tokio::test]
async fn a_simulator_that_cannot_answer_is_a_warning_per_role() {
    let mut world = healthy();
    world.simulation_fails = true;
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let lines = report.named("iam.simulate");
    assert_eq!(lines.len(), 4, "{}", report.text());
    assert!(
        lines.iter().all(|c| c.status == Status::Warn),
        "{}",
        report.text()
    );
    assert!(
        lines[0].message.contains("cannot simulate"),
        "{}",
        report.text()
    );
}

#[test]
fn every_role_asks_for_the_calls_ephemera_makes_with_it() {
    use super::iam::{requests, Names, Role};
    let names = Names {
        region: "us-east-1".into(),
        account: "123456789012".into(),
        deployment: "eph".into(),
        table: "eph-runners".into(),
        jit_table: "eph-jit".into(),
        queue_name: "eph-jobs".into(),
        config_parameter: "/ephemera/eph/config".into(),
        default_config_parameter: "/ephemera/eph/config-default".into(),
        app_key_secret_arn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:key".into(),
        webhook_secret_arn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook".into(),
        runner_role_arn: "arn:aws:iam::123456789012:role/eph-RunnerRole".into(),
    };
    let actions = |role| -> Vec<&str> { requests(role, &names).iter().map(|r| r.action).collect() };
    assert!(actions(Role::Webhook).contains(&"sqs:SendMessage"));
    assert!(!actions(Role::Webhook).contains(&"ec2:CreateFleet"));
    for needed in [
        "ec2:CreateFleet",
        "iam:PassRole",
        "dynamodb:TransactWriteItems",
        "ec2:CreateTags",
    ] {
        assert!(actions(Role::Scaler).contains(&needed), "{needed}");
    }
    assert!(actions(Role::Reaper).contains(&"ec2:TerminateInstances"));
    assert_eq!(
        actions(Role::Runner),
        ["dynamodb:GetItem", "dynamodb:DeleteItem"]
    );
    let launch = requests(Role::Scaler, &names)
        .into_iter()
        .find(|r| r.action == "ec2:RunInstances" && r.resource.contains(":instance/"))
        .expect("a launch of an instance");
    assert_eq!(
        launch.context,
        [(
            "aws:RequestTag/ephemera:deployment",
            vec!["eph".to_string()]
        )]
    );
}

//! The checks of `ephemera doctor`, in the order a deployment depends on them: the
//! stack and its resources, the configuration (and the version each function runs),
//! the App key, GitHub's view of the App (JWT, permissions, events, webhook URL,
//! installations, recent deliveries) and of each further App ([`more_apps`]), each pool's EC2 launch
//! and its image's runner version against the newest release ([`runner_version`]), then the account's quotas,
//! what the webhook refused in the last hour, and the roles' simulated permissions. A
//! check whose input failed is not run (`-`), so one broken setting is reported by
//! exactly one ✖: the check that names it.
//!
//! This module runs them in that order ([`diagnose`]); each area has its file:
//! [`stack`], [`config`], [`app_key`], [`github`] (the App as GitHub sees it), [`ec2`]
//! (per pool) and [`account`] (quotas and the roles' permissions); the webhook's
//! refusals are [`super::rejections`].

mod account;
mod app_key;
mod config;
mod ec2;
mod github;
mod more_apps;
mod rate_limit;
mod runner_image;
mod runner_version;
mod stack;

use account::{iam_checks, quota_checks};
use app_key::app_key_check;
use config::{config_check, running_checks};
use ec2::pool_checks;
use github::github_checks;
pub use github::{accounts_to_check, needed_permissions};
use more_apps::more_apps_checks;
pub use rate_limit::judge as judge_rate_limits;
use runner_image::runner_image_check;
use runner_version::runner_version_check;
use stack::stack_checks;

use super::iam::IamPort;
use super::ports::{Ec2Port, GitHubConnector, MetricsPort, QuotaPort, StackPort};
use super::rejections::webhook_rejections_check;
use super::report::{Check, Report, Status};
use ephemera_aws::stack::{
    APP_KEY_SECRET, CONFIG_PARAMETER_NAME, DEFAULT_CONFIG_PARAMETER_NAME, LAUNCH_TEMPLATE_NAME,
    QUEUE_URL, TABLE_NAME,
};

/// The stack's output naming the runner bucket (template.yaml's `RunnerBucket`).
const RUNNER_BUCKET_OUTPUT: &str = "RunnerBucketName";

/// What template.yaml puts into the App key secret it creates.
pub use ephemera_aws::stack::APP_KEY_PLACEHOLDER;

/// The outputs every other check reads.
const REQUIRED_OUTPUTS: [&str; 6] = [
    TABLE_NAME,
    QUEUE_URL,
    CONFIG_PARAMETER_NAME,
    DEFAULT_CONFIG_PARAMETER_NAME,
    APP_KEY_SECRET,
    LAUNCH_TEMPLATE_NAME,
];

/// What the operator asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub stack: String,
    /// The webhook URL the App must have, instead of the stack's `WebhookUrl` output.
    pub webhook_url: Option<String>,
    /// The GitHub API URL, instead of the configuration's `github.api_url`.
    pub github_api_url: Option<String>,
    /// More organizations (`ORG`) or repositories (`OWNER/REPO`) the App must be
    /// installed on, beyond those the pools name.
    pub accounts: Vec<String>,
    /// The AWS endpoint when it is not AWS's own (an emulator, e.g. `make up`'s moto):
    /// what an emulator cannot answer is said to be that, not a fault.
    pub emulator: Option<String>,
}

/// The checks whose calls an emulator does not answer as AWS does: Service Quotas
/// (moto knows no quota codes) and IAM's SimulatePrincipalPolicy (moto answers it with
/// an empty body).
pub const EMULATOR_CANNOT_ANSWER: [&str; 4] = [
    "quotas.vcpu",
    "lambda.concurrency",
    "webhook.concurrency",
    "iam.simulate",
];

/// On an emulator, the warnings of [`EMULATOR_CANNOT_ANSWER`] said to be what the
/// emulator cannot answer (their own message kept after it), with nothing to do
/// locally.
pub fn as_emulated(report: &mut Report, endpoint: &str) {
    for check in &mut report.checks {
        if check.status == Status::Warn && EMULATOR_CANNOT_ANSWER.contains(&check.check) {
            check.message = format!(
                "the emulator at {endpoint} cannot answer this, not checked ({})",
                check.message
            );
            check.fix = Some(format!(
                "nothing to do locally; on AWS: {}",
                check.fix.as_deref().unwrap_or("run ephemera doctor again")
            ));
        }
    }
}

/// The ports the checks read through.
pub struct Ports<'a> {
    pub stack: &'a dyn StackPort,
    pub github: &'a dyn GitHubConnector,
    pub ec2: &'a dyn Ec2Port,
    pub quotas: &'a dyn QuotaPort,
    pub iam: &'a dyn IamPort,
    pub metrics: &'a dyn MetricsPort,
}

/// Runs every check; never fails itself (a failed call is a failed check).
pub async fn diagnose(request: &Request, ports: &Ports<'_>) -> Report {
    let mut report = Report {
        stack: request.stack.clone(),
        checks: Vec::new(),
    };
    let Some((outputs, parameters)) = stack_checks(request, ports.stack, &mut report).await else {
        return report;
    };
    let now = time::OffsetDateTime::now_utc();
    runner_image_check(&parameters, ports.stack, ports.ec2, now, &mut report).await;
    let loaded = config_check(request, &outputs, ports.stack, &mut report).await;
    running_checks(&outputs, loaded.as_ref(), ports.stack, &mut report).await;
    let config = loaded.map(|loaded| loaded.config);
    let github = app_key_check(request, &outputs, config.as_ref(), ports, &mut report).await;
    github_checks(
        request,
        &outputs,
        config.as_ref(),
        github.as_deref(),
        &mut report,
    )
    .await;
    more_apps_checks(request, config.as_ref(), ports, &mut report).await;
    match &config {
        Some(config) => {
            for pool in &config.pools {
                let image = pool_checks(config, pool, &outputs, ports.ec2, &mut report).await;
                runner_version_check(
                    pool,
                    image.as_deref(),
                    outputs.get(RUNNER_BUCKET_OUTPUT).map(String::as_str),
                    request.emulator.as_deref(),
                    ports.stack,
                    ports.ec2,
                    &mut report,
                )
                .await;
            }
        }
        None => report.push(Check::skip("ec2.pools", "config.valid failed")),
    }
    quota_checks(config.as_ref(), &parameters, ports, &mut report).await;
    let deployment = config.as_ref().map(|config| config.deployment.as_str());
    webhook_rejections_check(deployment, ports.metrics, &mut report).await;
    iam_checks(request, &outputs, config.as_ref(), ports, &mut report).await;
    if let Some(endpoint) = &request.emulator {
        as_emulated(&mut report, endpoint);
    }
    report
}

//! `ephemera doctor --stack NAME`: checks a deployment before its first job, one line
//! per check (✔ passed, ✖ failed with what to do, ! a warning, - not run because a check
//! it needs failed), or the same as JSON with `--json`. Exits 8 when a check failed.
//!
//! Layout: [`checks`] is the logic, over the [`ports`]; [`aws`] and [`github`] are the
//! ports on the AWS SDK and the GitHub App client; [`report`] the lines and the JSON.
//! The operator's own credentials make every call, so `ec2.dry_run` says whether they
//! may launch; [`iam`] simulates the functions' and the runners' roles; [`quotas`]
//! checks the account's EC2 vCPU and Lambda concurrency quotas (Service Quotas),
//! [`capacity`] the network interfaces and subnet addresses left and the burst of
//! runners the account can take, and [`flood`] what the webhook may reserve of Lambda's; [`rejections`] reads what the
//! webhook refused in the last hour (CloudWatch).

pub mod aws;
pub mod capacity;
pub mod checks;
pub mod flood;
pub mod github;
pub mod iam;
pub mod ports;
pub mod quotas;
pub mod rejections;
pub mod report;
#[cfg(test)]
mod tests;

use crate::exit::{Failure, Outcome, CHECK_FAILED, USAGE};
use crate::target::{Deployment, DeploymentCommand, StackArgs, TargetArgs};
use crate::views::print_json;
use checks::{diagnose, Ports, Request};
use clap::Args;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// JSON on stdout: `{"stack", "ok", "passed", "failed", "warnings", "skipped",
    /// "checks": [{"check", "subject", "status", "message", "fix"}]}`.
    #[arg(long)]
    json: bool,
    /// The webhook URL the App must send to (default: the stack's `WebhookUrl` output;
    /// `make up` sets EPHEMERA_WEBHOOK_URL to its local listener, as moto makes no
    /// Function URL).
    #[arg(long, env = "EPHEMERA_WEBHOOK_URL", value_name = "URL")]
    webhook_url: Option<String>,
    /// GitHub API base URL; overrides `github.api_url` of the configuration.
    #[arg(long, value_name = "URL")]
    github_api_url: Option<String>,
    /// An organization (`ORG`) or repository (`OWNER/REPO`) the App must be installed
    /// on, besides those the pools name (`warm_owner`); repeat for more
    /// (EPHEMERA_OWNERS: comma-separated).
    #[arg(
        long = "owner",
        env = "EPHEMERA_OWNERS",
        value_delimiter = ',',
        value_name = "ORG|OWNER/REPO"
    )]
    owners: Vec<String>,
    #[command(flatten)]
    stack: StackArgs,
}

impl DeploymentCommand for DoctorArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        doctor(deployment, self).await
    }
}

/// Runs every check and prints the report; `CHECK_FAILED` when one failed.
pub async fn doctor(deployment: &mut Deployment, args: DoctorArgs) -> Outcome {
    let stack = deployment
        .target
        .stack
        .clone()
        .ok_or_else(|| Failure::msg(USAGE, "which deployment? give --stack NAME"))?;
    let request = Request {
        stack: stack.clone(),
        webhook_url: args.webhook_url.clone(),
        github_api_url: args.github_api_url.clone(),
        accounts: args.owners.clone(),
        emulator: deployment.target.endpoint_url.clone(),
    };
    let aws = aws::AwsPorts::new(&deployment.sdk);
    let ports = Ports {
        stack: &aws,
        github: &github::AppConnector,
        ec2: &aws,
        quotas: &aws,
        iam: &aws,
        metrics: &aws,
    };
    deployment.progress.wait(format!("checking stack {stack}"));
    let report = diagnose(&request, &ports).await;
    deployment.progress.clear();
    if args.json {
        print_json(&report.json())?;
    } else {
        print!("{}", report.text());
    }
    if report.ok() {
        Ok(())
    } else {
        Err(Failure::msg(
            CHECK_FAILED,
            format!(
                "{} of the checks of stack {stack} failed",
                report.count(report::Status::Fail)
            ),
        ))
    }
}

//! The account around the stack: `quotas.vcpu` and `lambda.concurrency` (Service
//! Quotas against what the pools and the scaler may use), the `capacity.*` checks (the
//! network interfaces and subnet addresses left, and the burst the account can take),
//! and `iam.simulate` (the functions' and the runners' roles, simulated for the calls
//! they make).

use super::{Ports, Request};
use crate::cmd::doctor::iam::{simulate_roles, Names};
use crate::cmd::doctor::report::{Check, Report};
use crate::cmd::doctor::{capacity, quotas};
use crate::errors::describe;
use ephemera_aws::stack::{
    APP_KEY_SECRET, CONFIG_PARAMETER_NAME, DEFAULT_CONFIG_PARAMETER_NAME, JIT_TABLE_NAME,
    QUEUE_URL, TABLE_NAME, WEBHOOK_SECRET,
};
use ephemera_core::config::Config;
use std::collections::BTreeMap;

/// `iam.simulate`, per role of the stack.
pub(super) async fn iam_checks(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    config: Option<&Config>,
    ports: &Ports<'_>,
    report: &mut Report,
) {
    let Some(config) = config else {
        report.push(Check::skip("iam.simulate", "config.valid failed"));
        return;
    };
    let output = |key: &str| outputs.get(key).cloned().unwrap_or_default();
    let roles = match ports.stack.stack_resources(&request.stack).await {
        Ok(resources) => resources,
        Err(err) => {
            report.push(Check::warn(
                "iam.simulate",
                format!("cannot list the stack's resources: {}", describe(&err)),
                "the credentials need cloudformation:DescribeStackResources",
            ));
            return;
        }
    };
    let names = Names {
        // The roles' ARNs give the partition (simulate_roles); `aws` until then.
        partition: "aws".into(),
        region: ports.stack.region(),
        account: String::new(),
        deployment: config.deployment.clone(),
        table: output(TABLE_NAME),
        jit_table: output(JIT_TABLE_NAME),
        queue_name: output(QUEUE_URL)
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        config_parameter: output(CONFIG_PARAMETER_NAME),
        default_config_parameter: output(DEFAULT_CONFIG_PARAMETER_NAME),
        app_key_secret_arn: output(APP_KEY_SECRET),
        more_app_key_secret_arns: config
            .github
            .more_apps
            .iter()
            .filter(|app| app.key_secret.starts_with("arn:"))
            .map(|app| app.key_secret.clone())
            .collect(),
        webhook_secret_arn: output(WEBHOOK_SECRET),
        runner_role_arn: String::new(),
    };
    simulate_roles(&roles, names, ports.iam, report).await;
}

/// `quotas.vcpu` (per vCPU quota the pools count against), the `capacity.*` checks and
/// `lambda.concurrency`.
pub(super) async fn quota_checks(
    config: Option<&Config>,
    parameters: &BTreeMap<String, String>,
    ports: &Ports<'_>,
    report: &mut Report,
) {
    match config {
        Some(config) => {
            let mut types: Vec<String> = config
                .pools
                .iter()
                .flat_map(|pool| pool.instance_types.iter().cloned())
                .collect();
            types.sort();
            types.dedup();
            let facts = match ports.ec2.instance_types(&types).await {
                Ok(facts) => Some(facts),
                Err(err) => {
                    report.push(Check::fail(
                        "quotas.vcpu",
                        describe(&err),
                        "the credentials need ec2:DescribeInstanceTypes",
                    ));
                    None
                }
            };
            let values = match &facts {
                Some(facts) => quotas::vcpu_checks(config, facts, ports.quotas, report).await,
                None => Default::default(),
            };
            capacity::capacity_checks(
                config,
                facts.as_ref(),
                &values,
                ports.ec2,
                ports.quotas,
                report,
            )
            .await;
        }
        None => {
            report.push(Check::skip("quotas.vcpu", "config.valid failed"));
            report.push(Check::skip("capacity.burst", "config.valid failed"));
        }
    }
    let lambda = quotas::lambda_concurrency(ports.quotas).await;
    quotas::lambda_check(parameters, &lambda, report);
    crate::cmd::doctor::flood::webhook_concurrency_check(parameters, &lambda, report);
}

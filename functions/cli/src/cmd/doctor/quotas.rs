//! The account quotas a deployment runs into, checked against what it may ask for:
//! `quotas.vcpu`, EC2's running-instance vCPU quotas (per instance class, on-demand and
//! spot) against the pools' `max_runners` × their largest type's vCPUs (at most a pool's
//! `max_vcpus`, when it sets one), and
//! `lambda.concurrency`, the account's concurrent executions against the scaler's
//! `ScalerMaxConcurrency` and the webhook's and reaper's own.
//!
//! EC2 limits running instances by vCPUs per class of instance families, separately for
//! on-demand instances and for spot requests (EC2 User Guide, "Amazon EC2 service quotas"
//! and "On-Demand Instance quotas"; the codes are those the Service Quotas console lists
//! for `ec2`). A spot pool falls back to on-demand when spot has no capacity, so its
//! runners count against both. Lambda's "Concurrent executions" (L-B99A9384) is 1,000 by
//! default and can be as low as 10 on a new account (Lambda developer guide, "Lambda
//! quotas").

use super::ports::{InstanceTypeFacts, QuotaPort};
use super::report::{Check, Report};
use crate::errors::describe;
use ephemera_core::config::Config;
use std::collections::BTreeMap;

/// Service Quotas' code for EC2.
const EC2: &str = "ec2";
/// Service Quotas' code for Lambda, and its "Concurrent executions" quota.
const LAMBDA: &str = "lambda";
pub const LAMBDA_CONCURRENCY: &str = "L-B99A9384";
/// The stack parameter that caps the scaler's concurrent invocations.
pub const SCALER_MAX_CONCURRENCY: &str = "ScalerMaxConcurrency";
/// template.yaml's default for it.
const SCALER_MAX_CONCURRENCY_DEFAULT: u32 = 5;
/// Executions the other functions need at once besides the scaler's: the webhook's
/// (a burst's deliveries, a few at a time) and the reaper's one.
const OTHER_FUNCTIONS: u32 = 3;

/// How an instance is bought; each has its own vCPU quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Purchase {
    OnDemand,
    Spot,
}

/// One EC2 vCPU quota: its code and its name as Service Quotas shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct VcpuQuota {
    pub code: &'static str,
    pub name: &'static str,
}

/// The vCPU quota that limits instances of `instance_type` bought as `purchase`; `None`
/// for a family no quota here covers.
pub fn vcpu_quota(instance_type: &str, purchase: Purchase) -> Option<VcpuQuota> {
    let family = instance_type.split('.').next().unwrap_or(instance_type);
    let class: String = family
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_lowercase();
    let quota = |code, name| Some(VcpuQuota { code, name });
    use Purchase::*;
    match (class.as_str(), purchase) {
        ("u", OnDemand) => quota("L-43DA4232", "Running On-Demand High Memory instances"),
        ("inf", OnDemand) => quota("L-1945791B", "Running On-Demand Inf instances"),
        ("inf", Spot) => quota("L-B5D1601B", "All Inf Spot Instance Requests"),
        ("dl", OnDemand) => quota("L-6E869C2A", "Running On-Demand DL instances"),
        ("dl", Spot) => quota("L-85EED4F7", "All DL Spot Instance Requests"),
        ("trn", OnDemand) => quota("L-2C3B7624", "Running On-Demand Trn instances"),
        ("trn", Spot) => quota("L-6B0D517C", "All Trn Spot Instance Requests"),
        ("g" | "vt", OnDemand) => quota("L-DB2E81BA", "Running On-Demand G and VT instances"),
        ("g" | "vt", Spot) => quota("L-3819A6DF", "All G and VT Spot Instance Requests"),
        ("p", OnDemand) => quota("L-417A185B", "Running On-Demand P instances"),
        ("p", Spot) => quota("L-7212CCBC", "All P Spot Instance Requests"),
        ("f", OnDemand) => quota("L-74FC7D96", "Running On-Demand F instances"),
        ("f", Spot) => quota("L-88CF9481", "All F Spot Instance Requests"),
        ("x", OnDemand) => quota("L-7295265B", "Running On-Demand X instances"),
        ("x", Spot) => quota("L-E3A00192", "All X Spot Instance Requests"),
        (c, OnDemand) if is_standard(c) => quota(
            "L-1216C47A",
            "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
        ),
        (c, Spot) if is_standard(c) => quota(
            "L-34B43A08",
            "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
        ),
        _ => None,
    }
}

/// Families of the Standard class: A, C, D, H, I, M, R, T, Z (`c7gn`, `m7i`, `r6id`, …).
fn is_standard(class: &str) -> bool {
    matches!(
        class.chars().next(),
        Some('a' | 'c' | 'd' | 'h' | 'i' | 'm' | 'r' | 't' | 'z')
    ) && !matches!(class, "inf" | "dl" | "hpc")
}

/// Per vCPU quota: the vCPUs the pools may run at once, and the pools asking.
pub type VcpuDemand = BTreeMap<VcpuQuota, (u64, Vec<String>)>;

/// What the pools may run at once, per vCPU quota, and the instance types no quota here
/// covers.
pub fn vcpu_demand(
    config: &Config,
    types: &BTreeMap<String, InstanceTypeFacts>,
) -> (VcpuDemand, Vec<String>) {
    let mut demand = VcpuDemand::new();
    let mut uncovered = Vec::new();
    for pool in &config.pools {
        let purchases: &[Purchase] = if pool.spot {
            &[Purchase::Spot, Purchase::OnDemand]
        } else {
            &[Purchase::OnDemand]
        };
        for &purchase in purchases {
            // A fleet may launch any of the pool's types: the largest per quota binds.
            let mut largest: BTreeMap<VcpuQuota, u32> = BTreeMap::new();
            for instance_type in &pool.instance_types {
                let Some(facts) = types.get(instance_type) else {
                    continue;
                };
                match vcpu_quota(instance_type, purchase) {
                    Some(quota) => {
                        let vcpus = largest.entry(quota).or_default();
                        *vcpus = (*vcpus).max(facts.vcpus);
                    }
                    None if !uncovered.contains(instance_type) => {
                        uncovered.push(instance_type.clone())
                    }
                    None => {}
                }
            }
            for (quota, vcpus) in largest {
                let entry = demand.entry(quota).or_default();
                // The pool's `max_vcpus`, when set, caps what its runners hold together.
                let at_most = pool.max_vcpus.map_or(u64::MAX, u64::from);
                entry.0 += (u64::from(pool.max_runners) * u64::from(vcpus)).min(at_most);
                entry.1.push(pool.name.clone());
            }
        }
    }
    (demand, uncovered)
}

/// `quotas.vcpu`, one line per vCPU quota the pools' runners count against. Returns the
/// values read, for the burst those quotas allow ([`super::capacity`]).
pub async fn vcpu_checks(
    config: &Config,
    types: &BTreeMap<String, InstanceTypeFacts>,
    quotas: &dyn QuotaPort,
    report: &mut Report,
) -> BTreeMap<VcpuQuota, f64> {
    let mut values = BTreeMap::new();
    let (demand, uncovered) = vcpu_demand(config, types);
    for instance_type in uncovered {
        report.push(
            Check::warn(
                "quotas.vcpu",
                format!("no vCPU quota known for {instance_type}: not checked"),
                "compare max_runners × its vCPUs with its family's quota in the Service \
                 Quotas console (EC2)",
            )
            .on(instance_type),
        );
    }
    for (quota, (vcpus, pools)) in demand {
        let subject = quota.code;
        let increase = format!(
            "request an increase of {} ({}) to at least {vcpus} in the Service Quotas \
             console (aws service-quotas request-service-quota-increase --service-code ec2 \
             --quota-code {} --desired-value {vcpus}), or lower max_runners of pool {}",
            quota.code,
            quota.name,
            quota.code,
            pools.join(", ")
        );
        let value = quotas.quota(EC2, quota.code).await;
        if let Ok(Some(value)) = value {
            values.insert(quota, value);
        }
        let check = match value {
            Ok(Some(value)) if value >= vcpus as f64 => Check::pass(
                "quotas.vcpu",
                format!(
                    "{}: {value} vCPUs cover {vcpus} (pool {} at max_runners)",
                    quota.name,
                    pools.join(", ")
                ),
            ),
            Ok(Some(value)) => Check::fail(
                "quotas.vcpu",
                format!(
                    "{} is {value} vCPUs; pool {} at max_runners need {vcpus}",
                    quota.name,
                    pools.join(", ")
                ),
                increase,
            ),
            Ok(None) => Check::warn(
                "quotas.vcpu",
                format!(
                    "Service Quotas does not know {} ({}) here: {vcpus} vCPUs not checked",
                    quota.code, quota.name
                ),
                "check the quota in the Service Quotas console (EC2) for this region",
            ),
            Err(err) => Check::warn(
                "quotas.vcpu",
                format!("cannot read {}: {}", quota.code, describe(&err)),
                "the credentials need servicequotas:GetServiceQuota and \
                 servicequotas:GetAWSDefaultServiceQuota",
            ),
        };
        report.push(check.on(subject));
    }
    values
}

/// Lambda's Concurrent executions in this account and region, read once for the checks
/// that judge it ([`lambda_check`], [`super::flood::webhook_concurrency_check`]).
pub async fn lambda_concurrency(quotas: &dyn QuotaPort) -> anyhow::Result<Option<f64>> {
    quotas.quota(LAMBDA, LAMBDA_CONCURRENCY).await
}

/// `lambda.concurrency`: the account's concurrent executions (`quota`, as
/// [`lambda_concurrency`] read it) leave room for the scaler's maximum concurrency and
/// the other functions.
pub fn lambda_check(
    parameters: &BTreeMap<String, String>,
    quota: &anyhow::Result<Option<f64>>,
    report: &mut Report,
) {
    let scaler = parameters
        .get(SCALER_MAX_CONCURRENCY)
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(SCALER_MAX_CONCURRENCY_DEFAULT);
    let needed = scaler + OTHER_FUNCTIONS;
    let check = match quota {
        Ok(Some(value)) if *value >= f64::from(needed) => Check::pass(
            "lambda.concurrency",
            format!(
                "{value} concurrent executions cover {needed} ({SCALER_MAX_CONCURRENCY} \
                 {scaler}, the webhook and the reaper {OTHER_FUNCTIONS})"
            ),
        ),
        Ok(Some(value)) => Check::fail(
            "lambda.concurrency",
            format!(
                "the account allows {value} concurrent Lambda executions; ephemera needs \
                 {needed} ({SCALER_MAX_CONCURRENCY} {scaler}, the webhook and the reaper \
                 {OTHER_FUNCTIONS}): webhooks would be throttled in a burst"
            ),
            format!(
                "request an increase of Lambda's Concurrent executions ({LAMBDA_CONCURRENCY}) \
                 in the Service Quotas console, or deploy with a lower \
                 {SCALER_MAX_CONCURRENCY} (at most {})",
                (*value as u32).saturating_sub(OTHER_FUNCTIONS).max(2)
            ),
        ),
        Ok(None) => Check::warn(
            "lambda.concurrency",
            format!(
                "Service Quotas does not know Lambda's Concurrent executions \
                 ({LAMBDA_CONCURRENCY}) here: {needed} executions not checked"
            ),
            "check it in the Service Quotas console (AWS Lambda) or with aws lambda \
             get-account-settings",
        ),
        Err(err) => Check::warn(
            "lambda.concurrency",
            format!("cannot read {LAMBDA_CONCURRENCY}: {}", describe(err)),
            "the credentials need servicequotas:GetServiceQuota and \
             servicequotas:GetAWSDefaultServiceQuota",
        ),
    };
    report.push(check);
}

//! The account a burst assumes: every limit of AWS and GitHub that a burst of N jobs
//! meets, with its source, its default, what the burst needs of it, and what happens
//! past it: a wait (the burst is slower: its bound) or a failure (launches or
//! registrations refused). The model simulates the waits and the runner group's
//! refusals; the AWS account's preconditions (vCPUs, network interfaces, subnet
//! addresses) are assumed met, and this says to what they must be raised.

use crate::quotas::figures::thousands;
use crate::quotas::Quotas;
use crate::report::{bounds, Pattern};
use crate::start::{boots_refused_in_an_hour, GITHUB_UNAUTHENTICATED_PER_HOUR};
use serde_json::{json, Value};

/// The model's instance type (`m7i.large`): 2 vCPUs (EC2 User Guide, "Amazon EC2
/// instance types": general purpose, m7i.large 2 vCPUs, 8 GiB).
pub const VCPUS_PER_RUNNER: u32 = 2;

/// Addresses AWS keeps in every subnet: the first four and the last (Amazon VPC User
/// Guide, "Subnet CIDR blocks": "The first four IP addresses and the last IP address in
/// each subnet CIDR block are not available for your use").
pub const SUBNET_RESERVED: u32 = 5;

/// Usable addresses of a subnet of prefix length `prefix`.
pub fn usable_addresses(prefix: u32) -> u32 {
    (1u32 << (32 - prefix)) - SUBNET_RESERVED
}

/// One limit of the account: a JSON row of `bench/model.json`'s `account`.
#[allow(clippy::too_many_arguments)]
fn row(
    limit: &str,
    default: String,
    needed: String,
    assumed: String,
    past_it: &str,
    bound_s: Option<f64>,
    source: &str,
) -> Value {
    json!({
        "limit": limit,
        "default": default,
        "needed": needed,
        "assumed": assumed,
        "past_it": past_it,
        "bound_s": bound_s.map(|s| (s * 10.0).round() / 10.0),
        "source": source,
    })
}

/// The limits a burst of `jobs` jobs through one App meets, each a row; `core_per_job`
/// is the `core` calls a job cost in the simulated burst of that size.
pub fn preconditions(jobs: u32, quotas: &Quotas, core_per_job: f64) -> Vec<Value> {
    let all = bounds(jobs, 10, quotas, Pattern::Ephemera, 1, core_per_job);
    let bound = |name: &str| {
        all.iter()
            .find(|(n, _)| n.starts_with(name))
            .map(|(_, s)| *s)
    };
    let n = f64::from(jobs);
    let slash24 = usable_addresses(24);
    let prefix = (16..=28)
        .rev()
        .find(|&p| usable_addresses(p) >= jobs)
        .unwrap_or(16);
    vec![
        row(
            "On-Demand vCPUs (Service Quotas L-1216C47A, Running On-Demand Standard instances)",
            "per account; new accounts start far lower (terraform-aws-github-runner's guide: 5)".to_owned(),
            format!("{} ({} runners × {} vCPUs, m7i.large)", thousands(n * f64::from(VCPUS_PER_RUNNER)), thousands(n), VCPUS_PER_RUNNER),
            "raised to what the burst needs".to_owned(),
            "fails: EC2 refuses the launch (VcpuLimitExceeded); not simulated",
            None,
            "Service Quotas, EC2 \"Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances\", counted in vCPUs; `ephemera doctor` checks it",
        ),
        row(
            "Network interfaces per Region (L-DF5E4CA3)",
            "5,000".to_owned(),
            format!("{} (one per instance)", thousands(n)),
            "raised to what the burst needs".to_owned(),
            "fails: the launch is refused; not simulated",
            None,
            "Amazon VPC User Guide, \"Amazon VPC quotas\": network interfaces per Region 5,000, adjustable",
        ),
        row(
            "Free addresses in the runner subnets",
            format!("a /24 has {} ({} kept by AWS)", thousands(f64::from(slash24)), SUBNET_RESERVED),
            format!(
                "{} (one per instance): {} /24s, or one /{} ({})",
                thousands(n),
                jobs.div_ceil(slash24),
                prefix,
                thousands(f64::from(usable_addresses(prefix)))
            ),
            "subnets with that many free".to_owned(),
            "fails: the launch is refused (no free address); not simulated",
            None,
            "Amazon VPC User Guide, \"Subnet CIDR blocks\": the first four addresses and the last of each subnet are not available",
        ),
        row(
            "GitHub runners per runner group",
            thousands(f64::from(quotas.github_runners_per_group)),
            format!("{} (one per job, with no other runner in the group)", thousands(n)),
            "the group holds only the burst's runners".to_owned(),
            "fails: generate-jitconfig refused after the instance's launch, the creation failed, the job dead-lettered after maxReceiveCount, then sent again by the reaper (simulated: `runner_group_cap`)",
            None,
            "docs.github.com, \"Actions limits\": 10,000 runners registered at the same time per runner group, not raised by Support",
        ),
        row(
            "GitHub runner registrations per organization",
            "1,500 every 5 minutes".to_owned(),
            format!("{} registrations", thousands(n)),
            "as documented".to_owned(),
            "waits (simulated)",
            bound("GitHub runner registrations per organization"),
            "docs.github.com, \"Actions limits\": 1500 runners / 5 minutes / repository/org/enterprise (Support can raise it)",
        ),
        row(
            "GitHub `core` per installation",
            format!("{} calls an hour", thousands(f64::from(quotas.github_core_hourly))),
            format!("at least the {} calls it spent ({} a job: job lookups after hand-overs, the reaper's reads)", thousands(n * core_per_job), core_per_job),
            "as documented".to_owned(),
            "waits (simulated)",
            bound("GitHub core hourly budget"),
            "docs.github.com, \"Rate limits for the REST API\": 5,000 an hour per App installation",
        ),
        row(
            "GitHub unauthenticated requests (the stock host's release lookup, before the runner bucket)",
            format!("{} an hour per address (a NAT gateway's for private subnets)", GITHUB_UNAUTHENTICATED_PER_HOUR),
            format!(
                "none now; one a boot before: {} of {} boots in an hour refused",
                thousands(f64::from(boots_refused_in_an_hour(jobs, 1))),
                thousands(n)
            ),
            "no boot calls GitHub's API".to_owned(),
            "failed the boot (before the bucket); gone",
            None,
            "docs.github.com, \"Rate limits for the REST API\": 60 unauthenticated requests an hour per originating IP address",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slash_24_has_251_usable_addresses() {
        assert_eq!(usable_addresses(24), 251);
        assert_eq!(usable_addresses(18), 16_379);
    }

    #[test]
    fn the_10000_job_burst_needs_20000_vcpus_and_10000_interfaces() {
        let rows = preconditions(10_000, &Quotas::default(), 0.947);
        assert_eq!(rows.len(), 7);
        assert!(rows[0]["needed"].as_str().unwrap().starts_with("20,000"));
        assert!(rows[1]["needed"].as_str().unwrap().starts_with("10,000"));
        assert!(rows[2]["needed"]
            .as_str()
            .unwrap()
            .contains("40 /24s, or one /18"));
        for row in &rows {
            assert!(!row["source"].as_str().unwrap().is_empty(), "{row}");
        }
        // The org's registrations: 8,500 past the first 1,500 at 5 a second.
        assert_eq!(rows[4]["bound_s"], json!(1_700.0));
    }
}

//! The burst the account can take: how many runners may run at once before a limit of
//! the account refuses the next one, against what the pools may run (their
//! `max_runners` together). Each limit gives a bound in runners:
//!
//! - the EC2 vCPU quotas `quotas.vcpu` reads ([`super::quotas`]), each divided by the
//!   largest type's vCPUs of the pools that count against it;
//! - `capacity.network_interfaces`: Amazon VPC's "Network interfaces per Region"
//!   (`L-DF5E4CA3`, 5,000 by default; Amazon VPC User Guide, "Amazon VPC quotas",
//!   https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html) less the
//!   interfaces the region has: every instance has a primary network interface, and a
//!   runner has only that one (the launch templates add none), so each runner takes one;
//! - `capacity.subnet_addresses`: the free addresses of the subnets each pool launches
//!   into (its `subnets`, else the region's default subnets, where EC2 launches an
//!   instance given none): each runner takes one private IPv4 address. `DescribeSubnets`'
//!   `AvailableIpAddressCount` is "the number of unused private IPv4 addresses in the
//!   subnet" (EC2 API Reference, `Subnet`), after the five AWS keeps in every subnet: the
//!   first four and the last (Amazon VPC User Guide, "Subnet CIDR blocks",
//!   https://docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html), so a /28
//!   holds 11 runners and a /24 251;
//! - GitHub's runner groups: "a maximum of 10,000 self-hosted runners in one runner
//!   group" (GitHub Docs, "Usage limits for self-hosted runners", https://docs.github.com/en/actions/hosting-your-own-runners/managing-self-hosted-runners/usage-limits-for-self-hosted-runners);
//!   pools naming the same `runner_group` share it within an organization.
//!
//! `capacity.burst` is the smallest bound, naming the limit that gives it: a warning when
//! it is below what the pools may run, as the launches past it would fail. The
//! interfaces and addresses that runners running now hold count as used, so the figure
//! is the room a burst has on top of them.

mod bounds;

use super::ports::{Ec2Port, InstanceTypeFacts, QuotaPort};
use super::quotas::{vcpu_demand, VcpuQuota};
use super::report::{Check, Report};
use crate::errors::describe;
pub use bounds::{
    asked, runner_group_bounds, subnet_bound, vcpu_bounds, Bound, Limit, PoolSubnets,
    NETWORK_INTERFACES, NETWORK_INTERFACES_NAME, RUNNERS_PER_GROUP, VPC,
};
use ephemera_core::config::Config;
use std::collections::BTreeMap;

/// `capacity.network_interfaces`: the network interfaces the region has room for, one a
/// runner. Returns its bound when both figures could be read.
pub async fn network_interfaces_check(
    asked: u64,
    ec2: &dyn Ec2Port,
    quotas: &dyn QuotaPort,
    report: &mut Report,
) -> Option<Bound> {
    const CHECK: &str = "capacity.network_interfaces";
    let push = |report: &mut Report, check: Check| report.push(check.on(NETWORK_INTERFACES));
    let quota = match quotas.quota(VPC, NETWORK_INTERFACES).await {
        Ok(Some(value)) => value.max(0.0) as u64,
        Ok(None) => {
            push(
                report,
                Check::warn(
                    CHECK,
                    format!(
                        "Service Quotas does not know {NETWORK_INTERFACES} \
                         ({NETWORK_INTERFACES_NAME}) here: {asked} runners not checked"
                    ),
                    "check the quota in the Service Quotas console (Amazon Virtual Private \
                     Cloud) for this region",
                ),
            );
            return None;
        }
        Err(err) => {
            push(
                report,
                Check::warn(
                    CHECK,
                    format!("cannot read {NETWORK_INTERFACES}: {}", describe(&err)),
                    "the credentials need servicequotas:GetServiceQuota and \
                     servicequotas:GetAWSDefaultServiceQuota",
                ),
            );
            return None;
        }
    };
    let in_use = match ec2.network_interfaces().await {
        Ok(count) => count,
        Err(err) => {
            push(
                report,
                Check::warn(
                    CHECK,
                    format!(
                        "cannot count the region's network interfaces: {}",
                        describe(&err)
                    ),
                    "the credentials need ec2:DescribeNetworkInterfaces",
                ),
            );
            return None;
        }
    };
    let room = quota.saturating_sub(in_use);
    let found = format!(
        "{NETWORK_INTERFACES_NAME} is {quota}, {in_use} in use: room for {room} runners (one \
         interface each)"
    );
    let check = if room >= asked {
        Check::pass(CHECK, format!("{found}; the pools may run {asked}"))
    } else {
        let desired = in_use + asked;
        Check::warn(
            CHECK,
            format!("{found}, not the {asked} the pools may run"),
            format!(
                "request an increase of {NETWORK_INTERFACES} ({NETWORK_INTERFACES_NAME}) to at \
                 least {desired} in the Service Quotas console (aws service-quotas \
                 request-service-quota-increase --service-code {VPC} --quota-code \
                 {NETWORK_INTERFACES} --desired-value {desired}), or delete the interfaces \
                 nothing uses (aws ec2 describe-network-interfaces --filters \
                 Name=status,Values=available)"
            ),
        )
    };
    push(report, check);
    Some(Bound {
        limit: Limit::NetworkInterfaces,
        runners: room,
    })
}

/// `capacity.subnet_addresses`, per pool: its subnets' free addresses against its
/// `max_runners`. Returns the bound they give together, when every pool's could be read.
pub async fn subnet_checks(
    config: &Config,
    ec2: &dyn Ec2Port,
    report: &mut Report,
) -> Option<Bound> {
    let (named, defaults) = match free_addresses(config, ec2).await {
        Ok(free) => free,
        Err(err) => {
            report.push(Check::warn(
                SUBNET_ADDRESSES,
                format!(
                    "cannot read the subnets' free addresses: {}",
                    describe(&err)
                ),
                "the credentials need ec2:DescribeSubnets",
            ));
            return None;
        }
    };
    let mut pools = Vec::new();
    for pool in &config.pools {
        let free: BTreeMap<String, u64> = if pool.subnets.is_empty() {
            defaults.clone()
        } else {
            pool.subnets
                .iter()
                .filter_map(|subnet| Some((subnet.clone(), *named.get(subnet)?)))
                .collect()
        };
        let pool_subnets = PoolSubnets {
            pool: pool.name.clone(),
            max_runners: u64::from(pool.max_runners),
            free,
        };
        report.push(
            pool_line(&pool_subnets, pool.subnets.is_empty()).on(format!("pool {}", pool.name)),
        );
        pools.push(pool_subnets);
    }
    // A pool whose subnets are unknown has no room to count: the bound would be too low.
    if pools.iter().any(|pool| pool.free.is_empty()) {
        return None;
    }
    subnet_bound(&pools)
}

const SUBNET_ADDRESSES: &str = "capacity.subnet_addresses";

/// The free addresses of every subnet a pool names, and of the default subnets when a
/// pool names none.
async fn free_addresses(
    config: &Config,
    ec2: &dyn Ec2Port,
) -> anyhow::Result<(BTreeMap<String, u64>, BTreeMap<String, u64>)> {
    let mut named: Vec<String> = config
        .pools
        .iter()
        .flat_map(|pool| pool.subnets.iter().cloned())
        .collect();
    named.sort();
    named.dedup();
    let named = if named.is_empty() {
        BTreeMap::new()
    } else {
        ec2.free_addresses(&named).await?
    };
    let defaults = if config.pools.iter().any(|pool| pool.subnets.is_empty()) {
        ec2.free_addresses(&[]).await?
    } else {
        BTreeMap::new()
    };
    Ok((named, defaults))
}

/// One pool's `capacity.subnet_addresses` line; `defaults` when it names no subnet.
fn pool_line(pool: &PoolSubnets, defaults: bool) -> Check {
    if pool.free.is_empty() {
        return if defaults {
            Check::warn(
                SUBNET_ADDRESSES,
                "the region has no default subnet: a launch that names no subnet fails",
                "set the pool's subnets (RunnerSubnets for the stack's default pool)",
            )
        } else {
            Check::skip(SUBNET_ADDRESSES, "ec2.subnets failed")
        };
    }
    let (room, max_runners) = (pool.room(), pool.max_runners);
    let listed = pool
        .free
        .iter()
        .map(|(subnet, free)| format!("{subnet} {free}"))
        .collect::<Vec<_>>()
        .join(", ");
    let whose = if defaults {
        "the default subnets' free addresses"
    } else {
        "free addresses"
    };
    if room >= max_runners {
        return Check::pass(
            SUBNET_ADDRESSES,
            format!("{whose}: {listed}: room for {room} runners (max_runners {max_runners})"),
        );
    }
    Check::warn(
        SUBNET_ADDRESSES,
        format!(
            "{whose}: {listed}: room for {room} runners, not the pool's max_runners \
             {max_runners}"
        ),
        format!(
            "add subnets to the pool or use larger ones ({} more addresses; AWS keeps 5 of \
             every subnet, so a /24 holds 251 runners), or lower max_runners to {room}",
            max_runners - room
        ),
    )
}

/// `capacity.burst`: the smallest of `bounds`, against what the pools may run.
/// `not_counted` names the limits that could not be read.
pub fn burst_check(asked: u64, bounds: &[Bound], not_counted: &[String], report: &mut Report) {
    const CHECK: &str = "capacity.burst";
    let Some(tightest) = bounds.iter().min_by_key(|bound| bound.runners) else {
        report.push(Check::skip(CHECK, "no limit could be read"));
        return;
    };
    let unread = if not_counted.is_empty() {
        String::new()
    } else {
        format!(" (not counted: {})", not_counted.join(", "))
    };
    let check = if tightest.runners >= asked {
        Check::pass(
            CHECK,
            format!(
                "the account can take the {asked} runners the pools may run at once; the \
                 tightest limit is {}, with room for {}{unread}",
                tightest.limit.name(),
                tightest.runners
            ),
        )
    } else {
        let binding: Vec<&Bound> = {
            let mut short: Vec<&Bound> = bounds.iter().filter(|b| b.runners < asked).collect();
            short.sort_by_key(|bound| bound.runners);
            short
        };
        let then = binding[1..]
            .iter()
            .map(|bound| format!("then {} at {}", bound.limit.name(), bound.runners))
            .collect::<Vec<_>>();
        let then = if then.is_empty() {
            String::new()
        } else {
            format!("; {}", then.join("; "))
        };
        Check::warn(
            CHECK,
            format!(
                "the account can take a burst of {} runners at once, not the {asked} the pools \
                 may run: {} binds{then}{unread}",
                tightest.runners,
                tightest.limit.name()
            ),
            format!(
                "{}, or lower the pools' max_runners to {} together",
                binding
                    .iter()
                    .map(|bound| bound.limit.remedy())
                    .collect::<Vec<_>>()
                    .join("; "),
                tightest.runners
            ),
        )
    };
    report.push(check);
}

/// Every check of this module, after `quotas.vcpu` read `vcpu_values` (its quotas' values;
/// `types` `None` when the instance types could not be described).
pub async fn capacity_checks(
    config: &Config,
    types: Option<&BTreeMap<String, InstanceTypeFacts>>,
    vcpu_values: &BTreeMap<VcpuQuota, f64>,
    ec2: &dyn Ec2Port,
    quotas: &dyn QuotaPort,
    report: &mut Report,
) {
    let asked = asked(config);
    let mut bounds = Vec::new();
    let mut not_counted = Vec::new();
    match types {
        Some(types) => {
            let (demand, _) = vcpu_demand(config, types);
            let unknown: Vec<&str> = demand
                .keys()
                .filter(|quota| !vcpu_values.contains_key(*quota))
                .map(|quota| quota.code)
                .collect();
            if !unknown.is_empty() {
                not_counted.push(format!("the vCPU quota {}", unknown.join(", ")));
            }
            bounds.extend(vcpu_bounds(config, types, vcpu_values));
        }
        None => not_counted.push("the vCPU quotas".to_owned()),
    }
    match network_interfaces_check(asked, ec2, quotas, report).await {
        Some(bound) => bounds.push(bound),
        None => not_counted.push(NETWORK_INTERFACES.to_owned()),
    }
    match subnet_checks(config, ec2, report).await {
        Some(bound) => bounds.push(bound),
        None => not_counted.push("the subnets' addresses".to_owned()),
    }
    bounds.extend(runner_group_bounds(config));
    burst_check(asked, &bounds, &not_counted, report);
}

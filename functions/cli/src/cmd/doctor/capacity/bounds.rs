//! The bounds each limit of the account puts on the runners that may run at once, in
//! runners, from figures already read: pure, so that each is tested without I/O.

use crate::cmd::doctor::ports::InstanceTypeFacts;
use crate::cmd::doctor::quotas::{vcpu_demand, vcpu_quota, Purchase, VcpuQuota};
use ephemera_core::config::Config;
use std::collections::{BTreeMap, BTreeSet};

/// Service Quotas' code for Amazon VPC, and its "Network interfaces per Region".
pub const VPC: &str = "vpc";
pub const NETWORK_INTERFACES: &str = "L-DF5E4CA3";
pub const NETWORK_INTERFACES_NAME: &str = "Network interfaces per Region";
/// GitHub's most self-hosted runners in one runner group.
pub const RUNNERS_PER_GROUP: u64 = 10_000;

/// A limit of the account on the runners that may run at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    /// An EC2 vCPU quota.
    Vcpu(VcpuQuota),
    /// Amazon VPC's network interfaces per Region.
    NetworkInterfaces,
    /// The free addresses of these subnets.
    SubnetAddresses(Vec<String>),
    /// GitHub's runners per runner group, for the group of this name.
    RunnerGroup(String),
}

impl Limit {
    /// What the limit is, for a line of the report.
    pub fn name(&self) -> String {
        match self {
            Limit::Vcpu(quota) => format!("{} ({})", quota.name, quota.code),
            Limit::NetworkInterfaces => {
                format!("{NETWORK_INTERFACES_NAME} ({NETWORK_INTERFACES})")
            }
            Limit::SubnetAddresses(subnets) => {
                format!("the free addresses of {}", subnets.join(", "))
            }
            Limit::RunnerGroup(group) => format!(
                "GitHub's 10,000 runners per runner group (runner group {group}, in one \
                 organization)"
            ),
        }
    }

    /// How to raise it.
    pub fn remedy(&self) -> String {
        match self {
            Limit::Vcpu(quota) => format!("raise {} (quotas.vcpu says how)", quota.code),
            Limit::NetworkInterfaces => format!(
                "raise {NETWORK_INTERFACES} or free network interfaces \
                 (capacity.network_interfaces says how)"
            ),
            Limit::SubnetAddresses(_) => "give the pools more or larger subnets \
                                          (capacity.subnet_addresses says which)"
                .to_owned(),
            Limit::RunnerGroup(group) => {
                format!("spread the pools of runner group {group} over more groups (runner_group)")
            }
        }
    }
}

/// The runners that may run at once as far as one limit goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub limit: Limit,
    pub runners: u64,
}

/// What the pools may run at once: their `max_runners` together.
pub fn asked(config: &Config) -> u64 {
    config
        .pools
        .iter()
        .map(|pool| u64::from(pool.max_runners))
        .sum()
}

/// Per vCPU quota read (`values`), the runners the pools may run at once under it: the
/// others' `max_runners`, and as many of its pools' runners as fit, each of the largest
/// type that counts against it. At least what the pools ask when the quota covers their
/// demand (a pool's `max_vcpus` may cap it below `max_runners` × vCPUs).
pub fn vcpu_bounds(
    config: &Config,
    types: &BTreeMap<String, InstanceTypeFacts>,
    values: &BTreeMap<VcpuQuota, f64>,
) -> Vec<Bound> {
    let asked = asked(config);
    let (demand, _) = vcpu_demand(config, types);
    // Per quota: the runners of the pools that count against it, and the largest vCPUs.
    let mut runners: BTreeMap<VcpuQuota, (u64, u32)> = BTreeMap::new();
    for pool in &config.pools {
        let purchases: &[Purchase] = if pool.spot {
            &[Purchase::Spot, Purchase::OnDemand]
        } else {
            &[Purchase::OnDemand]
        };
        let mut largest: BTreeMap<VcpuQuota, u32> = BTreeMap::new();
        for &purchase in purchases {
            for instance_type in &pool.instance_types {
                let (Some(facts), Some(quota)) = (
                    types.get(instance_type),
                    vcpu_quota(instance_type, purchase),
                ) else {
                    continue;
                };
                let vcpus = largest.entry(quota).or_default();
                *vcpus = (*vcpus).max(facts.vcpus);
            }
        }
        for (quota, vcpus) in largest {
            let entry = runners.entry(quota).or_default();
            entry.0 += u64::from(pool.max_runners);
            entry.1 = entry.1.max(vcpus);
        }
    }
    let mut bounds = Vec::new();
    for (quota, (on_quota, largest)) in runners {
        let (Some(&value), Some((vcpus, _))) = (values.get(&quota), demand.get(&quota)) else {
            continue;
        };
        if largest == 0 {
            continue;
        }
        let fit = (value.max(0.0) / f64::from(largest)).floor() as u64;
        let mut bound = (asked - on_quota).saturating_add(fit);
        if value >= *vcpus as f64 {
            bound = bound.max(asked);
        }
        bounds.push(Bound {
            limit: Limit::Vcpu(quota),
            runners: bound,
        });
    }
    bounds
}

/// Per runner group the pools name, the runners that may run at once under GitHub's cap:
/// the other groups' `max_runners` and 10,000 in this one.
pub fn runner_group_bounds(config: &Config) -> Vec<Bound> {
    let asked = asked(config);
    let mut groups: BTreeMap<&str, u64> = BTreeMap::new();
    for pool in &config.pools {
        *groups.entry(pool.runner_group.as_str()).or_default() += u64::from(pool.max_runners);
    }
    groups
        .into_iter()
        .map(|(group, runners)| Bound {
            limit: Limit::RunnerGroup(group.to_owned()),
            runners: asked - runners + RUNNERS_PER_GROUP,
        })
        .collect()
}

/// One pool's subnets with their free addresses, and its `max_runners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSubnets {
    pub pool: String,
    pub max_runners: u64,
    pub free: BTreeMap<String, u64>,
}

impl PoolSubnets {
    pub fn room(&self) -> u64 {
        self.free.values().sum()
    }
}

/// The runners the subnets hold at once: each pool as many as its subnets' free
/// addresses (at most its `max_runners`), all of them at most the free addresses of every
/// subnet together (pools may share subnets). Its subnets: those of the pools short of
/// room, or all when together they bind. `None` without a subnet.
pub fn subnet_bound(pools: &[PoolSubnets]) -> Option<Bound> {
    let every: BTreeMap<&String, u64> = pools
        .iter()
        .flat_map(|pool| pool.free.iter().map(|(subnet, free)| (subnet, *free)))
        .collect();
    if every.is_empty() {
        return None;
    }
    let total: u64 = every.values().sum();
    let asked: u64 = pools.iter().map(|pool| pool.max_runners).sum();
    let held: u64 = pools
        .iter()
        .map(|pool| pool.room().min(pool.max_runners))
        .sum();
    let short: BTreeSet<&String> = pools
        .iter()
        .filter(|pool| pool.room() < pool.max_runners)
        .flat_map(|pool| pool.free.keys())
        .collect();
    let (runners, subnets): (u64, Vec<&String>) = if total < held.min(asked) || short.is_empty() {
        (total, every.keys().copied().collect())
    } else {
        (held.min(total), short.into_iter().collect())
    };
    Some(Bound {
        limit: Limit::SubnetAddresses(subnets.into_iter().cloned().collect()),
        runners,
    })
}

//! The burst the account can take: network interfaces, the subnets' free addresses, the
//! vCPU quotas and GitHub's runner groups, each binding in turn.

use super::*;
use crate::cmd::doctor::capacity::{runner_group_bounds, subnet_bound, Limit, PoolSubnets};

fn line<'a>(report: &'a Report, check: &str) -> &'a super::super::report::Check {
    let lines = report.named(check);
    assert_eq!(lines.len(), 1, "{check}: {}", report.text());
    lines[0]
}

#[tokio::test]
async fn a_roomy_account_takes_every_runner_and_names_its_tightest_limit() {
    let report = run(&healthy()).await;
    let burst = line(&report, "capacity.burst");
    assert_eq!(burst.status, Status::Pass, "{}", report.text());
    // 64 vCPUs of the Standard quota hold 32 runners of 2 vCPUs, fewer than the 251
    // addresses of subnet-1 and the 4,988 network interfaces left.
    assert!(
        burst
            .message
            .contains("can take the 4 runners the pools may run at once"),
        "{}",
        burst.message
    );
    assert!(burst.message.contains("L-1216C47A"), "{}", burst.message);
    assert!(burst.message.contains("room for 32"), "{}", burst.message);
    let interfaces = line(&report, "capacity.network_interfaces");
    assert_eq!(interfaces.status, Status::Pass);
    assert!(
        interfaces
            .message
            .contains("5000, 12 in use: room for 4988 runners"),
        "{}",
        interfaces.message
    );
    let subnets = line(&report, "capacity.subnet_addresses");
    assert_eq!(subnets.status, Status::Pass);
    assert_eq!(subnets.subject.as_deref(), Some("pool linux-arm64"));
    assert!(
        subnets.message.contains("subnet-1 251"),
        "{}",
        subnets.message
    );
}

#[tokio::test]
async fn network_interfaces_nearly_used_up_bind_the_burst() {
    let mut world = healthy();
    world.network_interfaces = 4_998;
    let report = run(&world).await;
    assert!(report.ok(), "warnings only: {}", report.text());
    let interfaces = line(&report, "capacity.network_interfaces");
    assert_eq!(interfaces.status, Status::Warn, "{}", report.text());
    assert!(
        interfaces
            .message
            .contains("room for 2 runners (one interface each), not the 4 the pools may run"),
        "{}",
        interfaces.message
    );
    let fix = interfaces.fix.as_deref().unwrap_or_default();
    assert!(
        fix.contains("--service-code vpc --quota-code L-DF5E4CA3"),
        "{fix}"
    );
    assert!(fix.contains("--desired-value 5002"), "{fix}");
    let burst = line(&report, "capacity.burst");
    assert_eq!(burst.status, Status::Warn);
    assert!(
        burst.message.contains(
            "a burst of 2 runners at once, not the 4 the pools may run: Network interfaces \
             per Region (L-DF5E4CA3) binds"
        ),
        "{}",
        burst.message
    );
    assert!(
        burst
            .fix
            .as_deref()
            .unwrap_or_default()
            .contains("raise L-DF5E4CA3"),
        "{burst:?}"
    );
}

#[tokio::test]
async fn a_small_subnet_binds_the_burst_naming_the_subnet() {
    let mut world = healthy();
    world.free_addresses.insert("subnet-1".into(), 3);
    let report = run(&world).await;
    assert!(report.ok(), "warnings only: {}", report.text());
    let subnets = line(&report, "capacity.subnet_addresses");
    assert_eq!(subnets.status, Status::Warn, "{}", report.text());
    assert!(
        subnets
            .message
            .contains("subnet-1 3: room for 3 runners, not the pool's max_runners 4"),
        "{}",
        subnets.message
    );
    let fix = subnets.fix.as_deref().unwrap_or_default();
    assert!(fix.contains("AWS keeps 5"), "{fix}");
    assert!(fix.contains("lower max_runners to 3"), "{fix}");
    let burst = line(&report, "capacity.burst");
    assert_eq!(burst.status, Status::Warn);
    assert!(
        burst
            .message
            .contains("a burst of 3 runners at once, not the 4 the pools may run: the free addresses of subnet-1 binds"),
        "{}",
        burst.message
    );
}

#[tokio::test]
async fn a_low_vcpu_quota_binds_the_burst_in_runners_of_the_largest_type() {
    let mut world = healthy();
    // 5 vCPUs hold 2 runners of 2 vCPUs; the quota check fails, the burst says so.
    world.quotas.insert("ec2/L-1216C47A".into(), 5.0);
    let report = run(&world).await;
    let (check, _, _) = only_failure(&report);
    assert_eq!(check, "quotas.vcpu");
    let burst = line(&report, "capacity.burst");
    assert_eq!(burst.status, Status::Warn);
    assert!(
        burst.message.contains("a burst of 2 runners")
            && burst.message.contains("(L-1216C47A) binds"),
        "{}",
        burst.message
    );
}

#[tokio::test]
async fn a_pool_without_subnets_counts_the_default_subnets() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("    subnets: [subnet-1]\n", ""));
    let report = run(&world).await;
    let subnets = line(&report, "capacity.subnet_addresses");
    assert_eq!(subnets.status, Status::Pass, "{}", report.text());
    assert!(
        subnets
            .message
            .contains("the default subnets' free addresses: subnet-d1 4091"),
        "{}",
        subnets.message
    );
    world.default_subnets.clear();
    let report = run(&world).await;
    let subnets = line(&report, "capacity.subnet_addresses");
    assert_eq!(subnets.status, Status::Warn, "{}", report.text());
    assert!(
        subnets.message.contains("no default subnet"),
        "{}",
        subnets.message
    );
}

#[tokio::test]
async fn a_network_interface_quota_not_known_is_a_warning_and_not_counted() {
    let mut world = healthy();
    world.quotas.remove("vpc/L-DF5E4CA3");
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let interfaces = line(&report, "capacity.network_interfaces");
    assert_eq!(interfaces.status, Status::Warn);
    assert!(
        interfaces.message.contains("not checked"),
        "{}",
        interfaces.message
    );
    let burst = line(&report, "capacity.burst");
    assert_eq!(burst.status, Status::Pass);
    assert!(
        burst.message.ends_with("(not counted: L-DF5E4CA3)"),
        "{}",
        burst.message
    );
}

#[test]
fn pools_sharing_a_subnet_are_bound_by_its_addresses_together() {
    let pool = |name: &str, max_runners| PoolSubnets {
        pool: name.into(),
        max_runners,
        free: BTreeMap::from([("subnet-a".to_owned(), 15)]),
    };
    // Each pool fits alone; together they need 20 of the 15.
    let bound = subnet_bound(&[pool("a", 10), pool("b", 10)]).expect("a bound");
    assert_eq!(bound.runners, 15);
    assert_eq!(bound.limit, Limit::SubnetAddresses(vec!["subnet-a".into()]));
    // A pool short of room holds what its subnets do; the roomy one all it asks.
    let short = PoolSubnets {
        pool: "c".into(),
        max_runners: 10,
        free: BTreeMap::from([("subnet-c".to_owned(), 4)]),
    };
    let roomy = PoolSubnets {
        pool: "d".into(),
        max_runners: 10,
        free: BTreeMap::from([("subnet-d".to_owned(), 500)]),
    };
    let bound = subnet_bound(&[short, roomy]).expect("a bound");
    assert_eq!(bound.runners, 14);
    assert_eq!(bound.limit, Limit::SubnetAddresses(vec!["subnet-c".into()]));
    assert_eq!(subnet_bound(&[]), None);
}

/// Two pools of 6,000 runners, the second with `second` added to its settings.
fn two_large_pools(second: &str) -> Config {
    let text = CONFIG
        .replace("max_runners: 4", "max_runners: 6000")
        .replace(
            "    warm_owner: acme\n",
            &format!(
            "    warm_owner: acme\n  - name: more\n    labels: [more]\n    max_runners: 6000\n    \
             instance_types: [t4g.small]\n    subnets: [subnet-1]\n    launch_template: \
             eph-runner\n{second}"
        ),
        );
    Config::parse("config.yaml", &text).expect("a valid configuration")
}

#[test]
fn pools_of_one_runner_group_share_githubs_ten_thousand() {
    let bounds = runner_group_bounds(&two_large_pools(""));
    assert_eq!(bounds.len(), 1);
    assert_eq!(bounds[0].runners, 10_000);
    assert_eq!(bounds[0].limit, Limit::RunnerGroup("Default".into()));
    // In groups of their own, each pool's 6,000 fit.
    let apart = runner_group_bounds(&two_large_pools("    runner_group: big\n"));
    assert_eq!(apart.len(), 2);
    assert!(
        apart.iter().all(|bound| bound.runners >= 12_000),
        "{apart:?}"
    );
}

#[tokio::test]
async fn a_pool_whose_subnet_is_unknown_leaves_the_subnets_out_of_the_burst() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace(
        "    warm_owner: acme\n",
        "    warm_owner: acme\n  - name: lost\n    labels: [lost]\n    max_runners: 4\n    \
         instance_types: [t4g.small]\n    subnets: [subnet-gone]\n    launch_template: eph-runner\n",
    ));
    let report = run(&world).await;
    let (check, _, _) = only_failure(&report);
    assert_eq!(check, "ec2.subnets");
    let lines = report.named("capacity.subnet_addresses");
    assert_eq!(lines.len(), 2, "{}", report.text());
    assert_eq!(lines[1].status, Status::Skip, "{}", report.text());
    // subnet-1's 251 addresses are not the bound of both pools' 8 runners: not counted.
    let burst = line(&report, "capacity.burst");
    assert_eq!(burst.status, Status::Pass, "{}", report.text());
    assert!(
        burst.message.contains("can take the 8 runners")
            && burst
                .message
                .ends_with("(not counted: the subnets' addresses)"),
        "{}",
        burst.message
    );
}

//! Routing a job to a pool by its labels.

use crate::config::PoolConfig;

/// The label every self-hosted runner carries; a pool need not list it.
pub const SELF_HOSTED: &str = "self-hosted";

/// The first pool whose labels contain every one of `job_labels`, ignoring case.
///
/// `self-hosted` is implied for every pool. A job that asks for no label at all is not
/// routed: it is meant for GitHub's hosted runners.
pub fn route<'a>(pools: &'a [PoolConfig], job_labels: &[String]) -> Option<&'a PoolConfig> {
    if job_labels.is_empty() {
        return None;
    }
    pools.iter().find(|pool| {
        job_labels.iter().all(|wanted| {
            wanted.eq_ignore_ascii_case(SELF_HOSTED)
                || pool
                    .labels
                    .iter()
                    .any(|have| have.eq_ignore_ascii_case(wanted))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn pools() -> Vec<PoolConfig> {
        let text = r#"
deployment: eph
github: { app_id: 1 }
pools:
  - { name: gpu, labels: [linux, x64, gpu], max_runners: 1, instance_types: [g5.xlarge], ami: ami-1 }
  - { name: linux, labels: [Linux, X64], max_runners: 1, instance_types: [m7i.large], ami: ami-1 }
  - { name: arm, labels: [linux, arm64], max_runners: 1, instance_types: [m7g.large], ami: ami-1 }
"#;
        Config::parse("t.yaml", text).expect("valid").pools
    }

    fn labels(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn first_pool_containing_all_labels_wins() {
        let pools = pools();
        let name = |l: &[&str]| route(&pools, &labels(l)).map(|p| p.name.as_str());
        assert_eq!(name(&["self-hosted", "linux", "x64"]), Some("gpu"));
        assert_eq!(name(&["self-hosted", "linux", "arm64"]), Some("arm"));
        assert_eq!(name(&["linux", "x64", "gpu"]), Some("gpu"));
    }

    #[test]
    fn labels_match_ignoring_case_and_self_hosted_is_implied() {
        let pools = &pools()[1..];
        let routed = route(pools, &labels(&["SELF-HOSTED", "LINUX", "x64"]));
        assert_eq!(routed.map(|p| p.name.as_str()), Some("linux"));
    }

    #[test]
    fn jobs_no_pool_can_take_are_not_routed() {
        let pools = pools();
        assert!(route(&pools, &labels(&["self-hosted", "windows"])).is_none());
        assert!(route(&pools, &labels(&["ubuntu-latest"])).is_none());
        assert!(route(&pools, &[]).is_none());
    }
}

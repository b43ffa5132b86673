//! Routing a job to a pool by its labels, and the labels a pool's runners register with.
//!
//! GitHub gives a job only to a runner whose labels include every label of the job, and
//! a just-in-time runner carries exactly the labels it was registered with: nothing is
//! implied, not even `self-hosted`. So routing and registration share one function,
//! [`registered_labels`]: a job is routed to a pool only when the runner the pool would
//! register could take it.
//!
//! A job's sizing labels ([`crate::sizing`]) are the exception: no pool lists them, so
//! they are matched against a pool's sizing policy instead of its labels, and routing
//! also says whether a job no pool takes is ours at all ([`Routing`]): a hosted job
//! (`ubuntu-latest`) must leave no trace.

use crate::config::PoolConfig;
use crate::sizing::{is_sizing, policy, SizingRequest};

/// The label every self-hosted runner carries; a pool need not list it.
pub const SELF_HOSTED: &str = "self-hosted";

/// The labels a runner of `pool` is registered with (generate-jitconfig): `self-hosted`,
/// then the pool's labels, trimmed, each once ignoring case (the first spelling wins;
/// a pool that lists `self-hosted` keeps its own place for it).
pub fn registered_labels(pool: &PoolConfig) -> Vec<String> {
    let listed = pool
        .labels
        .iter()
        .any(|l| l.trim().eq_ignore_ascii_case(SELF_HOSTED));
    let implied = (!listed).then_some(SELF_HOSTED);
    let mut labels: Vec<String> = Vec::with_capacity(pool.labels.len() + 1);
    for label in implied
        .into_iter()
        .chain(pool.labels.iter().map(|l| l.trim()))
    {
        if !labels.iter().any(|have| have.eq_ignore_ascii_case(label)) {
            labels.push(label.to_owned());
        }
    }
    labels
}

/// The labels a runner launched for a job of `job_labels` registers with: the pool's
/// ([`registered_labels`]) and, in a pool that accepts sizing, the job's sizing labels
/// as the job wrote them, so GitHub gives the job (and only jobs asking the same size)
/// to this runner.
pub fn runner_labels(pool: &PoolConfig, job_labels: &[String]) -> Vec<String> {
    let mut labels = registered_labels(pool);
    if pool.sizing.accept {
        for label in job_labels.iter().filter(|l| crate::sizing::is_sizing(l)) {
            let label = label.trim();
            if !labels.iter().any(|have| have.eq_ignore_ascii_case(label)) {
                labels.push(label.to_owned());
            }
        }
    }
    labels
}

/// Whether a runner registered with `registered` can take a job asking for `job_labels`:
/// every job label is among the runner's, ignoring case (GitHub's rule).
pub fn runner_takes(registered: &[String], job_labels: &[String]) -> bool {
    job_labels.iter().all(|wanted| {
        registered
            .iter()
            .any(|have| have.eq_ignore_ascii_case(wanted.trim()))
    })
}

/// Where a job's labels send it.
#[derive(Debug, Clone, PartialEq)]
pub enum Routing<'a> {
    /// The pool that takes the job, and what its sizing labels ask, if it has any.
    Routed {
        pool: &'a PoolConfig,
        sizing: Option<SizingRequest>,
    },
    /// A job meant for us (it names `self-hosted`, a pool's label or a sizing label)
    /// that no pool takes, and why: it is logged, counted and recorded.
    Unrouted { reason: String },
    /// A job for GitHub's hosted runners: it leaves no trace.
    NotOurs,
}

impl<'a> Routing<'a> {
    /// The pool that takes the job, if one does.
    pub fn pool(&self) -> Option<&'a PoolConfig> {
        match self {
            Routing::Routed { pool, .. } => Some(pool),
            _ => None,
        }
    }
}

/// Why a job that names our labels but that no pool has all of is unrouted.
pub const NO_POOL_HAS_ALL: &str = "no pool has all of its labels";

/// The first pool whose registered runners ([`registered_labels`]) can take a job with
/// `job_labels`. A job that asks for no label at all is not routed: it is meant for
/// GitHub's hosted runners. A job with sizing labels ([`crate::sizing`]) goes to the
/// first pool that has its other labels, accepts sizing, and whose policy allows what
/// they ask.
pub fn route_job<'a>(pools: &'a [PoolConfig], job_labels: &[String]) -> Routing<'a> {
    if job_labels.is_empty() {
        return Routing::NotOurs;
    }
    let sizing = match SizingRequest::from_labels(job_labels) {
        Ok(sizing) => sizing,
        Err(err) => {
            return Routing::Unrouted {
                reason: err.to_string(),
            }
        }
    };
    let Some(request) = sizing else {
        return match pools
            .iter()
            .find(|pool| runner_takes(&registered_labels(pool), job_labels))
        {
            Some(pool) => Routing::Routed { pool, sizing: None },
            None if names_ours(pools, job_labels) => Routing::Unrouted {
                reason: NO_POOL_HAS_ALL.to_owned(),
            },
            None => Routing::NotOurs,
        };
    };
    let plain: Vec<String> = job_labels
        .iter()
        .filter(|l| !is_sizing(l))
        .cloned()
        .collect();
    let mut refusals = Vec::new();
    for pool in pools
        .iter()
        .filter(|pool| runner_takes(&registered_labels(pool), &plain))
    {
        match policy::refusal(pool, &request) {
            None => {
                return Routing::Routed {
                    pool,
                    sizing: Some(request),
                }
            }
            Some(reason) => refusals.push(reason),
        }
    }
    let reason = match refusals.is_empty() {
        true => "no pool has all of its labels other than the sizing ones".to_owned(),
        false => refusals.join("; "),
    };
    Routing::Unrouted { reason }
}

/// [`route_job`]'s pool, for callers that need only where the job goes.
pub fn route<'a>(pools: &'a [PoolConfig], job_labels: &[String]) -> Option<&'a PoolConfig> {
    route_job(pools, job_labels).pool()
}

/// Whether a job's labels say it is meant for a self-hosted runner of ours: one is
/// `self-hosted`, a label some pool has, or a sizing label. A hosted job
/// (`ubuntu-latest`) names none of them.
pub fn names_ours(pools: &[PoolConfig], job_labels: &[String]) -> bool {
    job_labels.iter().any(|label| {
        let label = label.trim();
        label.eq_ignore_ascii_case(SELF_HOSTED)
            || is_sizing(label)
            || pools.iter().any(|pool| {
                pool.labels
                    .iter()
                    .any(|l| l.trim().eq_ignore_ascii_case(label))
            })
    })
}

#[cfg(test)]
#[path = "routing_sizing_tests.rs"]
mod sizing_tests;

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
    fn labels_match_ignoring_case_and_self_hosted_is_registered_by_every_pool() {
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

    fn pool(list: &[&str]) -> PoolConfig {
        let mut pool = pools().remove(1);
        pool.labels = labels(list);
        pool
    }

    #[test]
    fn registered_labels_add_self_hosted_first_when_the_pool_omits_it() {
        let registered = registered_labels(&pool(&["linux", "x64"]));
        assert_eq!(registered, labels(&["self-hosted", "linux", "x64"]));
    }

    #[test]
    fn registered_labels_keep_the_pools_own_self_hosted_where_it_is() {
        let registered = registered_labels(&pool(&["linux", "Self-Hosted", "x64"]));
        assert_eq!(registered, labels(&["linux", "Self-Hosted", "x64"]));
    }

    #[test]
    fn registered_labels_are_trimmed_and_once_each_ignoring_case() {
        let registered = registered_labels(&pool(&["Linux", " linux ", "X64", "x64", "gpu "]));
        assert_eq!(registered, labels(&["self-hosted", "Linux", "X64", "gpu"]));
    }

    #[test]
    fn a_job_is_routed_only_where_the_registered_runner_can_take_it() {
        let pools = pools();
        let jobs: [&[&str]; 6] = [
            &["self-hosted", "linux", "x64"],
            &["self-hosted"],
            &["SELF-HOSTED", "gpu"],
            &["linux", "arm64"],
            &["self-hosted", "windows"],
            &["x64", "arm64"],
        ];
        for job in jobs {
            let job = labels(job);
            let routed = route(&pools, &job);
            let takers: Vec<&str> = pools
                .iter()
                .filter(|p| runner_takes(&registered_labels(p), &job))
                .map(|p| p.name.as_str())
                .collect();
            assert_eq!(
                routed.map(|p| p.name.as_str()),
                takers.first().copied(),
                "{job:?}"
            );
        }
    }

    #[test]
    fn a_runner_takes_a_job_only_with_every_label_of_it() {
        let registered = labels(&["self-hosted", "linux"]);
        assert!(runner_takes(
            &registered,
            &labels(&["Self-Hosted", "LINUX"])
        ));
        assert!(!runner_takes(
            &registered,
            &labels(&["self-hosted", "linux", "x64"])
        ));
        assert!(!runner_takes(
            &labels(&["linux"]),
            &labels(&["self-hosted"])
        ));
    }
}

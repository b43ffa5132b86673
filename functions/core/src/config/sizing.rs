//! A pool's sizing policy (`sizing:`): whether its jobs may size their runner with
//! labels ([`crate::sizing`]), and the bounds the operator sets on what they may ask.
//! The defaults accept nothing, so a pool sizes its runners only when told to.

use super::{ranges, PoolConfig};
use crate::sizing::{image_name_rule, is_family, is_sizing, MAX_CPU, MAX_DISK_GIB, MAX_RAM_GIB};
use serde::Deserialize;
use std::collections::BTreeMap;

impl PoolConfig {
    /// The most runners the pool may have at once: `max_runners` and, in a pool that
    /// accepts sizing and sets `max_vcpus`, `max_vcpus / sizing.max_vcpus_per_runner`.
    /// A sized launch never offers a type above `max_vcpus_per_runner`, so that many
    /// runners never pass `max_vcpus`; and the cap is taken with the pool's slot in one
    /// transaction, so it holds under concurrent claims. A runner counts as the most it
    /// may have, not what it got: a cap that a small runner leaves unused is the price of
    /// a cap that cannot be passed. (Unsized jobs run on the pool's own `instance_types`,
    /// which the operator keeps at or below `max_vcpus_per_runner`.)
    pub fn runner_cap(&self) -> u32 {
        match self.max_vcpus {
            Some(max_vcpus) if self.sizing.accept => {
                let per_runner = self.sizing.max_vcpus_per_runner.max(1);
                self.max_runners.min(max_vcpus / per_runner)
            }
            _ => self.max_runners,
        }
    }
}

/// What the jobs of one pool may ask for with sizing labels.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SizingPolicy {
    /// Whether the pool takes jobs with sizing labels at all (off by default).
    #[serde(default)]
    pub accept: bool,
    /// The most vCPUs one runner may have.
    #[serde(default = "default_max_vcpus_per_runner")]
    pub max_vcpus_per_runner: u32,
    /// The most memory one runner may have, in GiB.
    #[serde(default = "default_max_memory_gib")]
    pub max_memory_gib: u32,
    /// The largest root volume a job may ask, in GiB.
    #[serde(default = "default_max_disk_gib")]
    pub max_disk_gib: u32,
    /// The instance families a job may name; empty: any family.
    #[serde(default)]
    pub families: Vec<String>,
    /// The images a job may name (`ephemera.image=<name>`): name → the AMI id (`ami-…`)
    /// it launches. The job gives only the name, never an id.
    #[serde(default)]
    pub images: BTreeMap<String, String>,
    /// The purchase options a job may ask with `ephemera.spot`: `true` (spot), `false`
    /// (on-demand), or both (the default).
    #[serde(default = "both")]
    pub spot: Vec<bool>,
}

impl Default for SizingPolicy {
    fn default() -> Self {
        SizingPolicy {
            accept: false,
            max_vcpus_per_runner: default_max_vcpus_per_runner(),
            max_memory_gib: default_max_memory_gib(),
            max_disk_gib: default_max_disk_gib(),
            families: Vec::new(),
            images: BTreeMap::new(),
            spot: both(),
        }
    }
}

fn default_max_vcpus_per_runner() -> u32 {
    16
}
fn default_max_memory_gib() -> u32 {
    64
}
fn default_max_disk_gib() -> u32 {
    200
}
fn both() -> Vec<bool> {
    vec![true, false]
}

/// Problems of a pool's sizing, as (field under the pool, message): its policy, its
/// `max_vcpus`, and a label of its own that would read as a sizing label.
pub(super) fn pool_problems(pool: &PoolConfig) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    if pool.labels.iter().any(|l| is_sizing(l)) {
        let message = format!(
            "a pool's label may not start with {:?}, the prefix of the labels a job sizes its \
             runner with",
            crate::sizing::PREFIX
        );
        problems.push(("labels".to_owned(), message));
    }
    let cap = pool.max_vcpus.map(u64::from);
    if let Some(problem) = cap.and_then(|cap| ranges::check_number(cap, ranges::MAX_VCPUS)) {
        problems.push(("max_vcpus".to_owned(), problem));
    }
    problems.extend(pool.sizing.problems(pool.max_vcpus));
    if pool.sizing.accept && pool.min_idle > 0 && pool.min_idle >= pool.runner_cap() {
        // Warm runners carry no sizing labels: kept in every slot, a sized job never runs.
        let message = format!(
            "{} warm runners would hold all of the pool's {} runners (max_runners, and \
             max_vcpus / sizing.max_vcpus_per_runner), and a warm runner cannot take a sized \
             job: keep min_idle below that",
            pool.min_idle,
            pool.runner_cap()
        );
        problems.push(("min_idle".to_owned(), message));
    }
    problems
}

impl SizingPolicy {
    /// Problems of the policy, as (field under the pool, message); `max_vcpus` is the
    /// pool's capacity cap, checked against the largest runner the policy allows.
    fn problems(&self, max_vcpus: Option<u32>) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        for (field, value, max) in [
            ("max_vcpus_per_runner", self.max_vcpus_per_runner, MAX_CPU),
            ("max_memory_gib", self.max_memory_gib, MAX_RAM_GIB),
            ("max_disk_gib", self.max_disk_gib, MAX_DISK_GIB),
        ] {
            if !(1..=max).contains(&value) {
                let message = format!("must be from 1 to {max}, not {value}");
                problems.push((format!("sizing.{field}"), message));
            }
        }
        for (i, family) in self.families.iter().enumerate() {
            if !is_family(family) {
                let message = format!(
                    "{family:?} is not an instance family (a lowercase letter, then letters, \
                     digits and '-', with a digit, such as m7i or m7i-flex)"
                );
                problems.push((format!("sizing.families[{i}]"), message));
            }
        }
        for (name, source) in &self.images {
            let field = format!("sizing.images.{name}");
            if let Some(rule) = image_name_rule(name) {
                problems.push((field.clone(), format!("the name {name:?} {rule}")));
            }
            if let Some(path) = source.strip_prefix("ssm:") {
                let message = format!(
                    "{source:?} names the SSM parameter {path:?}, which a sized launch cannot \
                     resolve: name the AMI id (ami-…) it holds"
                );
                problems.push((field, message));
            } else if !is_ami_id(source) {
                let message = format!("{source:?} is not an AMI id (ami- and hex digits)");
                problems.push((field, message));
            }
        }
        if self.spot.is_empty() {
            let message = "at least one of true (spot) and false (on-demand)".to_owned();
            problems.push(("sizing.spot".into(), message));
        }
        if let Some(cap) = max_vcpus.filter(|_| self.accept) {
            if cap < self.max_vcpus_per_runner {
                let message = format!(
                    "{cap} is below sizing.max_vcpus_per_runner ({}): a runner of the largest \
                     size the policy allows could never launch",
                    self.max_vcpus_per_runner
                );
                problems.push(("max_vcpus".into(), message));
            }
        }
        problems
    }
}

/// `ami-` and hex digits.
fn is_ami_id(source: &str) -> bool {
    source
        .strip_prefix("ami-")
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn check(pool_extra: &str) -> Vec<String> {
        let text = format!(
            "deployment: eph\ngithub: {{ app_id: 1 }}\npools:\n  - name: big\n    labels: [linux]\n    \
             max_runners: 4\n    instance_types: [m7i.large]\n    ami: ami-1\n{pool_extra}"
        );
        match Config::check("c.yaml", &text) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_pool_without_a_sizing_block_accepts_no_sizing_labels() {
        let text = check("");
        assert!(text.is_empty(), "{text:?}");
        let config = Config::parse(
            "c.yaml",
            "deployment: eph\ngithub: { app_id: 1 }\npools:\n  - { name: p, labels: [a], \
             max_runners: 1, instance_types: [m7i.large], ami: ami-1 }\n",
        )
        .expect("valid");
        let policy = &config.pools[0].sizing;
        assert!(!policy.accept);
        assert_eq!(
            (policy.max_vcpus_per_runner, policy.max_memory_gib),
            (16, 64)
        );
        assert_eq!(
            (policy.max_disk_gib, policy.spot.clone()),
            (200, vec![true, false])
        );
        assert_eq!(config.pools[0].max_vcpus, None);
    }

    #[test]
    fn a_policy_breaking_its_rules_is_refused_naming_each_field() {
        let errors = check(
            "    max_vcpus: 8\n    sizing:\n      accept: true\n      max_vcpus_per_runner: 0\n      \
             max_disk_gib: 99999999\n      families: [m7i, M7A]\n      images:\n        \
             ami-123: ami-0abc\n        ubuntu: ubuntu\n        noble: ssm:/aws/noble\n      \
             spot: []\n",
        );
        let expect = [
            "pools[0].sizing.max_vcpus_per_runner: must be from 1 to 1024, not 0",
            "pools[0].sizing.max_disk_gib: must be from 1 to 16384",
            "pools[0].sizing.families[1]: \"M7A\" is not an instance family",
            "pools[0].sizing.images.ami-123: the name \"ami-123\" names an AMI id",
            "pools[0].sizing.images.ubuntu: \"ubuntu\" is not an AMI id",
            "pools[0].sizing.images.noble: \"ssm:/aws/noble\" names the SSM parameter",
            "pools[0].sizing.spot: at least one",
        ];
        for expected in expect {
            assert!(
                errors.iter().any(|e| e.contains(expected)),
                "{expected} not in {errors:#?}"
            );
        }
        assert_eq!(errors.len(), expect.len(), "{errors:#?}");
    }

    #[test]
    fn a_vcpu_cap_below_one_runner_of_the_largest_size_is_refused() {
        let errors = check("    max_vcpus: 8\n    sizing: { accept: true }\n");
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].contains("pools[0].max_vcpus: 8 is below sizing.max_vcpus_per_runner (16)"),
            "{errors:#?}"
        );
        assert!(check("    max_vcpus: 64\n    sizing: { accept: true }\n").is_empty());
        assert!(check("    max_vcpus: 0\n")
            .iter()
            .any(|e| e.contains("max_vcpus")));
    }

    #[test]
    fn a_pool_label_with_the_sizing_prefix_is_refused() {
        let text = "deployment: eph\ngithub: { app_id: 1 }\npools:\n  - { name: p, labels: \
                    [linux, Ephemera.cpu=4], max_runners: 1, instance_types: [m7i.large], \
                    ami: ami-1 }\n";
        let err = Config::parse("c.yaml", text).expect_err("a sizing label");
        assert_eq!(err.field, "pools[0].labels");
        assert!(err.message.contains("\"ephemera.\""), "{err}");
    }

    #[test]
    fn an_unknown_policy_field_is_named() {
        let errors = check("    sizing: { accept: true, max_cpu: 4 }\n");
        assert!(
            errors
                .iter()
                .any(|e| e.contains("pools[0].sizing") && e.contains("max_cpu")),
            "{errors:#?}"
        );
    }

    fn pool_of(extra: &str) -> crate::config::PoolConfig {
        let text = format!(
            "deployment: eph\ngithub: {{ app_id: 1 }}\npools:\n  - name: p\n    labels: [a]\n    \
             max_runners: 4\n    instance_types: [m7i.large]\n    ami: ami-1\n{extra}"
        );
        Config::parse("c.yaml", &text).expect("valid").pools[0].clone()
    }

    #[test]
    fn max_vcpus_caps_a_sizing_pool_in_runners_of_the_largest_size() {
        let sized = "    sizing: { accept: true, max_vcpus_per_runner: 16 }\n";
        assert_eq!(
            pool_of(&format!("    max_vcpus: 40\n{sized}")).runner_cap(),
            2
        );
        assert_eq!(
            pool_of(&format!("    max_vcpus: 640\n{sized}")).runner_cap(),
            4
        );
        assert_eq!(pool_of(sized).runner_cap(), 4, "no max_vcpus: max_runners");
        assert_eq!(
            pool_of("    max_vcpus: 16\n").runner_cap(),
            4,
            "a pool without sizing: max_vcpus caps only the doctor's count"
        );
    }

    #[test]
    fn a_sizing_pool_keeps_min_idle_below_its_runner_cap() {
        let errors = check(
            "    max_vcpus: 32\n    min_idle: 2\n    warm_owner: o\n    \
             sizing: { accept: true, max_vcpus_per_runner: 16 }\n",
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("pools[0].min_idle: 2 warm runners")),
            "{errors:?}"
        );
        let fits = check(
            "    max_vcpus: 48\n    min_idle: 2\n    warm_owner: o\n    \
             sizing: { accept: true, max_vcpus_per_runner: 16 }\n",
        );
        assert!(fits.is_empty(), "{fits:?}");
    }
}

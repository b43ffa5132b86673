//! The configuration checked against what GitHub accepts when a runner registers
//! (generate-jitconfig): a name of at most 64 characters and 1 to 100 labels.
//!
//! Both follow from the file alone (the runner name is `<deployment>-<pool>-<random>`,
//! the labels are the pool's plus `self-hosted`), so a pool whose runners GitHub would
//! refuse is an error here rather than a registration failing for every job.

use super::Config;
use crate::names::{runner_name_len, GITHUB_NAME_LIMIT};
use crate::routing::registered_labels;

/// The most labels generate-jitconfig takes.
pub const GITHUB_LABEL_LIMIT: usize = 100;

/// Problems of pool `i`, as (field within the pool, message).
pub fn pool_problems(config: &Config, i: usize) -> Vec<(&'static str, String)> {
    let pool = &config.pools[i];
    let mut problems = Vec::new();
    let len = runner_name_len(&config.deployment, &pool.name);
    if len > GITHUB_NAME_LIMIT {
        let room = pool.name.len() - (len - GITHUB_NAME_LIMIT);
        let message = format!(
            "runner names of this pool (\"{}-{}-\" and 10 random characters) would be {len} \
             characters and GitHub takes at most {GITHUB_NAME_LIMIT}: shorten the pool name \
             to {room} characters or the deployment name",
            config.deployment, pool.name
        );
        problems.push(("name", message));
    }
    let labels = registered_labels(pool).len();
    if labels > GITHUB_LABEL_LIMIT {
        let message = format!(
            "runners would register with {labels} labels (self-hosted included) and GitHub \
             takes at most {GITHUB_LABEL_LIMIT}"
        );
        problems.push(("labels", message));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(deployment: &str, pool: &str, labels: &str) -> String {
        format!(
            "deployment: {deployment}\ngithub: {{ app_id: 1 }}\npools:\n  - name: {pool}\n    \
             labels: [{labels}]\n    max_runners: 1\n    instance_types: [m7i.large]\n    \
             launch_template: lt\n"
        )
    }

    #[test]
    fn names_of_exactly_64_characters_pass() {
        let (deployment, pool) = ("d".repeat(32), "p".repeat(20));
        assert_eq!(runner_name_len(&deployment, &pool), GITHUB_NAME_LIMIT);
        let text = config(&deployment, &pool, "linux");
        assert!(Config::parse("c.yaml", &text).is_ok());
    }

    #[test]
    fn a_name_over_64_characters_is_refused_at_the_pool_name_with_room_left() {
        let (deployment, pool) = ("d".repeat(32), "p".repeat(21));
        let text = config(&deployment, &pool, "linux");
        let errors = Config::check("c.yaml", &text).expect_err("too long");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "pools[0].name");
        assert_eq!(errors[0].line, Some(4));
        assert!(
            errors[0].message.contains("would be 65 characters"),
            "{errors:?}"
        );
        assert!(errors[0].message.contains("to 20 characters"), "{errors:?}");
        assert!(
            Config::parse("c.yaml", &text).is_err(),
            "the functions refuse it too"
        );
    }

    #[test]
    fn more_than_100_registered_labels_are_refused() {
        let labels: Vec<String> = (0..100).map(|i| format!("l{i}")).collect();
        let text = config("eph", "big", &labels.join(", "));
        let errors = Config::check("c.yaml", &text).expect_err("101 with self-hosted");
        assert_eq!(errors[0].field, "pools[0].labels");
        assert!(errors[0].message.contains("101 labels"), "{errors:?}");
        let text = config(
            "eph",
            "big",
            &format!("self-hosted, {}", labels[1..].join(", ")),
        );
        assert!(Config::check("c.yaml", &text).is_ok());
    }
}

//! Runner names: `<prefix>-<pool>-<random>`.
//!
//! The prefix identifies the deployment, so the orphan sweeps can tell our runners and
//! instances from anyone else's by name alone. GitHub refuses a runner name longer than
//! [`GITHUB_NAME_LIMIT`] characters; `ephemera config validate` checks the deployment and
//! pool names against it with [`runner_name_len`].

use rand::Rng;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const SUFFIX_LEN: usize = 10;

/// The longest runner name GitHub registers.
pub const GITHUB_NAME_LIMIT: usize = 64;

/// How long every runner name of `pool` in the deployment `prefix` is.
pub fn runner_name_len(prefix: &str, pool: &str) -> usize {
    prefix.len() + 1 + pool.len() + 1 + SUFFIX_LEN
}

/// A fresh runner name for `pool` in the deployment `prefix`.
pub fn runner_name(prefix: &str, pool: &str) -> String {
    let mut rng = rand::rng();
    runner_name_drawn(prefix, pool, || rng.random::<f64>())
}

/// [`runner_name`] with its characters chosen by `unit`, a draw in `[0, 1)`.
pub fn runner_name_drawn(prefix: &str, pool: &str, mut unit: impl FnMut() -> f64) -> String {
    let suffix: String = (0..SUFFIX_LEN)
        .map(|_| {
            let index = ((unit() * ALPHABET.len() as f64) as usize).min(ALPHABET.len() - 1);
            ALPHABET[index] as char
        })
        .collect();
    format!("{prefix}-{pool}-{suffix}")
}

/// The deployment's runner launch template (made by the stack, or by `ephemera local
/// --bootstrap`), which pools that name only an image launch through.
pub fn launch_template_name(deployment: &str) -> String {
    format!("{deployment}-runner")
}

/// The deployment's Session Manager launch template: the runner template with an
/// instance profile that adds the SSM agent's grants, which pools with `ssm_access`
/// launch through.
pub fn ssm_launch_template_name(deployment: &str) -> String {
    format!("{deployment}-runner-ssm")
}

/// Whether `name` was made by [`runner_name`] for the deployment `prefix`.
pub fn is_ours(prefix: &str, name: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|rest| rest.contains('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_prefix_and_pool_and_differ() {
        let a = runner_name("eph", "linux");
        let b = runner_name("eph", "linux");
        assert!(a.starts_with("eph-linux-"));
        assert_eq!(a.len(), "eph-linux-".len() + SUFFIX_LEN);
        assert_eq!(a.len(), runner_name_len("eph", "linux"));
        assert_ne!(a, b);
        assert!(is_ours("eph", &a));
    }

    #[test]
    fn names_of_other_deployments_are_not_ours() {
        assert!(!is_ours("eph", "ephemeral-linux-abc"));
        assert!(!is_ours("eph", "other-linux-abc"));
        assert!(!is_ours("eph", "eph"));
    }
}

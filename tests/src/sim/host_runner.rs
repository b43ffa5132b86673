//! What the simulated hosts say of the runner they run, in the JIT tombstone, as
//! bootstrap.sh writes it: `runner_version` always, `runner_image_version` from a baked
//! image, `runner_swap_ms` when the start phase replaced the image's runner because it was
//! behind. A test sets what the hosts' image bakes and which version is the newest, or
//! names the deployment's runner bucket, whose `runner/latest-x64` then says the newest as
//! it does to bootstrap.sh (read as the instance's RunnerRole; the simulated hosts are x64).

use ephemera_aws::jit::{bootstrap_read_reporting, BOOTSTRAP_READ};
use std::time::Duration;

/// The runner version the simulated hosts run unless a test says otherwise: the pinned
/// release the image stack bakes (`RunnerVersion` in infra/image).
pub const DEFAULT_RUNNER_VERSION: &str = "2.336.0";

/// What every simulated host reports; switchable with
/// [`super::SimHandle::set_host_runner`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRunnerPlay {
    /// The newest runner the host's start phase knows of, which it runs.
    pub runner_version: String,
    /// The version baked in the pool's image; `None`: a stock image (no runner baked).
    pub image_version: Option<String>,
    /// How long replacing a runner that is behind takes (download, sum, unpack).
    pub swap: Duration,
    /// `false` plays a host of an earlier bootstrap, which stamps only the read.
    pub reports: bool,
    /// The runner bucket whose `runner/latest-x64` names the newest runner at each boot
    /// (then it replaces `runner_version`); `None`: `runner_version` as set.
    pub bucket: Option<String>,
}

impl Default for HostRunnerPlay {
    fn default() -> Self {
        HostRunnerPlay {
            runner_version: DEFAULT_RUNNER_VERSION.to_owned(),
            image_version: None,
            swap: Duration::from_millis(4_200),
            reports: true,
            bucket: None,
        }
    }
}

impl HostRunnerPlay {
    /// Hosts booting an image that baked `version`.
    pub fn baked(version: &str) -> HostRunnerPlay {
        HostRunnerPlay {
            image_version: Some(version.to_owned()),
            ..HostRunnerPlay::default()
        }
    }

    /// The newest runner is `version`.
    pub fn newest(mut self, version: &str) -> HostRunnerPlay {
        self.runner_version = version.to_owned();
        self
    }

    /// The newest runner is the one `bucket`'s `runner/latest-x64` names at each boot.
    pub fn from_bucket(mut self, bucket: &str) -> HostRunnerPlay {
        self.bucket = Some(bucket.to_owned());
        self
    }

    /// The newest runner of a `latest-<arch>` pointer ("VERSION SHA256\n"), if well formed.
    pub fn version_of_pointer(pointer: &str) -> Option<String> {
        let version = pointer.split_whitespace().next()?;
        let parts: Vec<&str> = version.split('.').collect();
        let numeric = parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok());
        numeric.then(|| version.to_owned())
    }

    /// The swap's milliseconds: only a baked image behind the newest swaps.
    pub fn swap_ms(&self) -> Option<u64> {
        let baked = self.image_version.as_deref()?;
        (baked != self.runner_version).then_some(self.swap.as_millis() as u64)
    }

    /// The tombstone's update expression and the values beyond `:now`.
    pub fn tombstone(&self) -> (String, Vec<(&'static str, Tombstoned)>) {
        if !self.reports {
            return (BOOTSTRAP_READ.to_owned(), Vec::new());
        }
        let swap = self.swap_ms();
        let expression = bootstrap_read_reporting(self.image_version.is_some(), swap.is_some());
        let mut values = vec![(":v", Tombstoned::Text(self.runner_version.clone()))];
        if let Some(baked) = &self.image_version {
            values.push((":i", Tombstoned::Text(baked.clone())));
        }
        if let Some(ms) = swap {
            values.push((":w", Tombstoned::Number(ms)));
        }
        (expression, values)
    }
}

/// One value the tombstone writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tombstoned {
    Text(String),
    Number(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_baked_image_behind_swaps_and_says_so_and_a_stock_one_names_only_its_runner() {
        let (stock, values) = HostRunnerPlay::default().tombstone();
        assert_eq!(
            stock,
            "REMOVE jit_config SET jit_read_at = :now, runner_version = :v"
        );
        assert_eq!(values.len(), 1);
        let behind = HostRunnerPlay::baked("2.336.0").newest("2.337.0");
        assert_eq!(behind.swap_ms(), Some(4_200));
        let (expression, values) = behind.tombstone();
        assert!(expression.ends_with("runner_image_version = :i, runner_swap_ms = :w"));
        assert_eq!(values.len(), 3);
        assert_eq!(HostRunnerPlay::baked("2.336.0").swap_ms(), None, "current");
        let earlier = HostRunnerPlay {
            reports: false,
            ..HostRunnerPlay::default()
        };
        assert_eq!(earlier.tombstone().0, BOOTSTRAP_READ);
    }

    #[test]
    fn a_pointer_names_its_version_and_a_malformed_one_nothing() {
        let sum = "a".repeat(64);
        assert_eq!(
            HostRunnerPlay::version_of_pointer(&format!("2.340.0 {sum}\n")).as_deref(),
            Some("2.340.0")
        );
        assert_eq!(HostRunnerPlay::version_of_pointer("latest x"), None);
        assert_eq!(HostRunnerPlay::version_of_pointer(""), None);
    }
}

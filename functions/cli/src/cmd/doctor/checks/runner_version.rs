//! `runner.version`, per pool: the runner version of the image the pool launches, against
//! the newest release the deployment keeps in its runner bucket (`runner/latest-<arch>`,
//! written by the reaper's runner release step; docs/design.md, "The runner copy").
//!
//! The image's version is its `ephemera:runner-version` tag (infra/image/template.yaml
//! tags its images with its `RunnerVersion`): a pinned `2.x.y` behind the newest means
//! every boot swaps its runner from the bucket, and without that swap GitHub's runner
//! "automatically updates itself when a job is assigned to the runner"
//! (<https://docs.github.com/en/actions/hosting-your-own-runners/managing-self-hosted-runners/about-self-hosted-runners#communication-between-self-hosted-runners-and-github>);
//! `latest` cannot say which release the bake took (the image's marker does, and each
//! boot compares it, docs/deploying.md "Runner versions"); an image with no tag is a
//! stock image, whose hosts take the bucket's runner at boot.

use crate::cmd::doctor::ports::{Ec2Port, StackPort};
use crate::cmd::doctor::report::{Check, Report};
use crate::errors::describe;
use ephemera_core::config::PoolConfig;
use ephemera_core::releases::LatestRunner;

const NAME: &str = "runner.version";

/// What the check concludes from the image's tag and the bucket's newest version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The pinned version is the newest (or newer than the bucket's).
    Current,
    /// The pinned version is behind the newest.
    Behind { pinned: String, newest: String },
    /// The bake took the newest release at bake time (`latest`).
    BakedLatest,
    /// No tag: a stock image, the runner comes from the bucket at boot.
    Stock,
    /// The bucket holds no `latest-<arch>` yet.
    NoNewest,
    /// The tag is neither `latest` nor a version this check can compare.
    Unreadable(String),
}

/// A `2.x.y` as numbers, to compare; `None` if it is not dotted numbers.
fn version_numbers(version: &str) -> Option<Vec<u64>> {
    let version = version.strip_prefix('v').unwrap_or(version);
    version.split('.').map(|part| part.parse().ok()).collect()
}

/// The decision, from the image's `ephemera:runner-version` tag and the bucket's newest
/// version of the image's architecture.
pub fn judge(tag: Option<&str>, newest: Option<&str>) -> Verdict {
    let Some(tag) = tag.map(str::trim).filter(|tag| !tag.is_empty()) else {
        return Verdict::Stock;
    };
    if tag.eq_ignore_ascii_case("latest") {
        return Verdict::BakedLatest;
    }
    let Some(pinned) = version_numbers(tag) else {
        return Verdict::Unreadable(tag.to_owned());
    };
    let Some(newest) = newest else {
        return Verdict::NoNewest;
    };
    match version_numbers(newest) {
        Some(latest) if pinned < latest => Verdict::Behind {
            pinned: tag.to_owned(),
            newest: newest.to_owned(),
        },
        Some(_) => Verdict::Current,
        None => Verdict::Unreadable(newest.to_owned()),
    }
}

/// The runner's name of an EC2 architecture (`x86_64` → `x64`), as the bucket keys it.
pub fn runner_arch(ec2_arch: &str) -> Option<&'static str> {
    match ec2_arch {
        "x86_64" => Some("x64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

/// `runner.version` for `pool`, whose launches use `image` (`None`: none named).
pub(super) async fn runner_version_check(
    pool: &PoolConfig,
    image: Option<&str>,
    bucket: Option<&str>,
    emulator: Option<&str>,
    stack: &dyn StackPort,
    ec2: &dyn Ec2Port,
    report: &mut Report,
) {
    let check = pool_check(image, bucket, emulator, stack, ec2).await;
    report.push(check.on(format!("pool {}", pool.name)));
}

async fn pool_check(
    image: Option<&str>,
    bucket: Option<&str>,
    emulator: Option<&str>,
    stack: &dyn StackPort,
    ec2: &dyn Ec2Port,
) -> Check {
    let Some(image) = image else {
        return Check::skip(NAME, "the pool launches no image named (ec2.architecture)");
    };
    let Some(bucket) = bucket else {
        return Check::skip(
            NAME,
            "the stack has no RunnerBucketName output (deployed before the runner copy)",
        );
    };
    // One DescribeImages: the tag and the architecture come in the same answer.
    let (arch, facts) = match ec2.image(image).await {
        Ok(Some(facts)) => match facts.architecture.clone() {
            Some(arch) => (arch, facts),
            None => return Check::skip(NAME, format!("EC2 knows no image {image}")),
        },
        Err(err) => {
            return Check::warn(
                NAME,
                format!("cannot describe {image}: {}", describe(&err)),
                "the credentials need ec2:DescribeImages",
            )
        }
        Ok(None) => return Check::skip(NAME, format!("EC2 knows no image {image}")),
    };
    let Some(arch) = runner_arch(&arch) else {
        return Check::skip(
            NAME,
            format!("image {image} is {arch}: no runner build for it"),
        );
    };
    let newest = match stack.runner_latest(bucket, arch).await {
        Ok(line) => line.as_deref().and_then(LatestRunner::parse),
        Err(err) => {
            return Check::warn(
                NAME,
                format!(
                    "cannot read runner/latest-{arch} in bucket {bucket}: {}",
                    describe(&err)
                ),
                "the credentials need s3:GetObject on the bucket's runner/* \
                 (infra/deployer-policy.json)",
            )
        }
    };
    let newest_version = newest.as_ref().map(|newest| newest.version.as_str());
    match judge(facts.runner_version.as_deref(), newest_version) {
        Verdict::Current => Check::pass(
            NAME,
            format!(
                "image {image} ({arch}) runs {}, the newest release",
                facts.runner_version.unwrap_or_default()
            ),
        ),
        Verdict::Behind { pinned, newest } => Check::warn(
            NAME,
            format!(
                "image {image} ({arch}) was baked with runner {pinned}, behind the newest \
                 {newest}: every boot swaps its runner from the bucket before it starts"
            ),
            "bake again: raise (or drop, for the newest) the image stack's RunnerVersion and \
             start its pipeline (the image stack's BakeX86Now or BakeArm64Now output); the \
             reaper starts both pipelines on a new release only for images that follow \
             the newest",
        ),
        Verdict::BakedLatest => match newest_version {
            Some(newest) => Check::pass(
                NAME,
                format!(
                    "image {image} ({arch}) took the newest runner at bake time (RunnerVersion \
                     latest); each boot compares it with the bucket's newest, {newest}, and \
                     swaps it if behind (metric RunnerBootsBehind, alarm DEPLOYMENT-stale-runner-image)"
                ),
            ),
            None => no_newest(image, arch, bucket, emulator),
        },
        Verdict::Stock => match newest_version {
            Some(newest) => Check::pass(
                NAME,
                format!(
                    "image {image} ({arch}) bakes no runner: hosts take the bucket's, {newest}, \
                     at boot"
                ),
            ),
            None => no_newest(image, arch, bucket, emulator),
        },
        Verdict::NoNewest => no_newest(image, arch, bucket, emulator),
        Verdict::Unreadable(text) => Check::warn(
            NAME,
            format!("image {image} ({arch}): cannot compare runner version {text:?}"),
            "tag the image's ephemera:runner-version with a 2.x.y or latest (the image \
             stack's RunnerVersion)",
        ),
    }
}

/// The bucket holds no newest runner for `arch` yet.
fn no_newest(image: &str, arch: &str, bucket: &str, emulator: Option<&str>) -> Check {
    match emulator {
        Some(endpoint) => Check::warn(
            NAME,
            format!(
                "the emulator at {endpoint} cannot answer this, not checked: bucket {bucket} \
                 holds no runner/latest-{arch} (image {image}), as the reaper's sync of \
                 GitHub's releases does not run here"
            ),
            "nothing to do locally; on AWS: wait for the reaper's next run (it syncs the \
             newest runner within the hour), or run ephemera doctor again",
        ),
        None => Check::warn(
            NAME,
            format!(
                "bucket {bucket} holds no runner/latest-{arch} yet: the reaper's runner \
                 sync has not run (image {image})"
            ),
            "wait for the reaper's next run (it syncs the newest runner within the hour); \
             if it stays empty, see the reaper's log for the runner release step",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{judge, runner_arch, Verdict};

    #[test]
    fn a_pinned_version_behind_the_newest_is_behind() {
        assert_eq!(
            judge(Some("2.329.0"), Some("2.330.1")),
            Verdict::Behind {
                pinned: "2.329.0".into(),
                newest: "2.330.1".into()
            }
        );
        // Numbers, not text: 2.99.0 is behind 2.330.0.
        assert!(matches!(
            judge(Some("2.99.0"), Some("2.330.0")),
            Verdict::Behind { .. }
        ));
    }

    #[test]
    fn a_pinned_version_at_or_past_the_newest_is_current() {
        assert_eq!(judge(Some("2.330.1"), Some("2.330.1")), Verdict::Current);
        assert_eq!(judge(Some("2.331.0"), Some("2.330.1")), Verdict::Current);
    }

    #[test]
    fn latest_and_no_tag_are_said_as_such_whatever_the_bucket_holds() {
        assert_eq!(judge(Some("latest"), Some("2.330.1")), Verdict::BakedLatest);
        assert_eq!(judge(Some("latest"), None), Verdict::BakedLatest);
        assert_eq!(judge(None, Some("2.330.1")), Verdict::Stock);
        assert_eq!(judge(Some(""), None), Verdict::Stock);
    }

    #[test]
    fn a_pin_with_an_empty_bucket_has_nothing_to_compare_with() {
        assert_eq!(judge(Some("2.330.1"), None), Verdict::NoNewest);
    }

    #[test]
    fn a_tag_that_is_no_version_is_unreadable() {
        assert_eq!(
            judge(Some("two"), Some("2.330.1")),
            Verdict::Unreadable("two".into())
        );
    }

    #[test]
    fn ec2_architectures_map_to_the_runners_names() {
        assert_eq!(runner_arch("x86_64"), Some("x64"));
        assert_eq!(runner_arch("arm64"), Some("arm64"));
        assert_eq!(runner_arch("i386"), None);
    }
}

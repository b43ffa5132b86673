//! The runner copy the deployment keeps in its bucket: the layout of the bucket, the
//! sums read from a release's notes, and [`RunnerSync`], the reaper's step that keeps
//! the newest release of each architecture there (docs/design.md, "The runner copy").
//!
//! The layout, all under `runner/` (what the hosts read; the runner roles may read only
//! that prefix):
//! - `runner/actions-runner-linux-<arch>-<version>.tar.gz`, the tarball as GitHub
//!   publishes it;
//! - `runner/actions-runner-linux-<arch>-<version>.tar.gz.sha256`,
//!   `"<sum>  <file name>\n"`;
//! - `runner/latest-<arch>`, `"<version> <sum>\n"`, written last, only after the tarball
//!   in the bucket was checked against the sum GitHub published.
//!
//! A runner the pointer no longer names is tagged `ephemera:superseded=true`
//! ([`SUPERSEDED_TAG`]); the bucket's lifecycle rule expires what carries the tag.
//!
//! The sync's own mark ([`SyncMark`]) is `sync/runner-release.json`, outside the prefix
//! the hosts may read.

mod sync;
#[cfg(test)]
mod sync_tests;

pub use sync::{RunnerSync, SyncOutcome, CHECK_INTERVAL, PART_SIZE, RETRY_AFTER_FAILURE};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The architectures kept, as GitHub names the runner's Linux assets.
pub const ARCHES: [&str; 2] = ["x64", "arm64"];

/// The tag (key, value) of a runner no longer pointed at.
pub const SUPERSEDED_TAG: (&str, &str) = ("ephemera:superseded", "true");

/// Where the sync keeps its mark.
pub const MARK_KEY: &str = "sync/runner-release.json";

/// The tarball's file name, as GitHub names the asset.
pub fn tarball_name(arch: &str, version: &str) -> String {
    format!("actions-runner-linux-{arch}-{version}.tar.gz")
}

/// The tarball's key in the bucket.
pub fn tarball_key(arch: &str, version: &str) -> String {
    format!("runner/{}", tarball_name(arch, version))
}

/// The key of the tarball's `.sha256` file.
pub fn sum_key(arch: &str, version: &str) -> String {
    format!("{}.sha256", tarball_key(arch, version))
}

/// The key of the pointer to the newest runner of `arch`.
pub fn latest_key(arch: &str) -> String {
    format!("runner/latest-{arch}")
}

/// The `.sha256` file's text, as `sha256sum` writes it.
pub fn sum_file(arch: &str, version: &str, sum: &str) -> String {
    format!("{sum}  {}\n", tarball_name(arch, version))
}

/// The newest runner of an architecture, as `latest-<arch>` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestRunner {
    pub version: String,
    pub sha256: String,
}

impl LatestRunner {
    /// `latest-<arch>`'s one line.
    pub fn line(&self) -> String {
        format!("{} {}\n", self.version, self.sha256)
    }

    /// Reads `latest-<arch>`'s line; `None` if it is not `<version> <64 hex>`.
    pub fn parse(text: &str) -> Option<LatestRunner> {
        let mut words = text.split_whitespace();
        let (version, sha256) = (words.next()?, words.next()?);
        if words.next().is_some() || !is_sha256(sha256) {
            return None;
        }
        Some(LatestRunner {
            version: version.to_owned(),
            sha256: sha256.to_owned(),
        })
    }
}

/// Whether `text` is a SHA-256 as the layout writes it: 64 lowercase hex digits.
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The SHA-256 the release notes publish for `linux-<arch>`: actions/runner's release
/// notes (its `releaseNote.md`) hold each sum between `<!-- BEGIN SHA linux-x64 -->` and
/// `<!-- END SHA linux-x64 -->`. `None` if the notes hold no such sum.
pub fn published_sum(body: &str, arch: &str) -> Option<String> {
    let begin = format!("<!-- BEGIN SHA linux-{arch} -->");
    let end = format!("<!-- END SHA linux-{arch} -->");
    let start = body.find(&begin)? + begin.len();
    let length = body[start..].find(&end)?;
    let sum = body[start..start + length].trim().to_ascii_lowercase();
    is_sha256(&sum).then_some(sum)
}

/// What the sync remembers between runs, in the bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncMark {
    /// No check of GitHub's latest release before this.
    #[serde(with = "time::serde::rfc3339::option", default)]
    pub next_check_at: Option<OffsetDateTime>,
    /// The ETag of the release every architecture in the bucket is at, sent as
    /// `If-None-Match` (none: the next read is unconditional).
    #[serde(default)]
    pub etag: Option<String>,
    /// The release the image pipelines were last started for.
    #[serde(default)]
    pub pipelines_started_for: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUM: &str = "5d13b77e0aa5306b6c03e234ad1da4d9c6aa7831d26fd7e37a3656e77153611e";

    #[test]
    fn the_published_sum_is_read_between_the_release_notes_markers() {
        let body = format!(
            "## Linux x64\n- <!-- BEGIN SHA linux-x64 -->{SUM}<!-- END SHA linux-x64 -->\n\
             - <!-- BEGIN SHA linux-arm64 -->{}<!-- END SHA linux-arm64 -->",
            "A".repeat(64)
        );
        assert_eq!(published_sum(&body, "x64").as_deref(), Some(SUM));
        assert_eq!(published_sum(&body, "arm64"), Some("a".repeat(64)));
        assert_eq!(published_sum(&body, "arm"), None);
        assert_eq!(
            published_sum(
                "<!-- BEGIN SHA linux-x64 -->nope<!-- END SHA linux-x64 -->",
                "x64"
            ),
            None
        );
    }

    #[test]
    fn the_latest_line_is_read_back_as_written() {
        let latest = LatestRunner {
            version: "2.337.0".into(),
            sha256: SUM.into(),
        };
        assert_eq!(LatestRunner::parse(&latest.line()), Some(latest));
        assert_eq!(LatestRunner::parse("2.337.0"), None);
        assert_eq!(LatestRunner::parse("2.337.0 abc"), None);
    }

    #[test]
    fn the_layout_names_the_tarball_as_github_does() {
        assert_eq!(
            tarball_key("arm64", "2.337.0"),
            "runner/actions-runner-linux-arm64-2.337.0.tar.gz"
        );
        assert_eq!(
            sum_file("x64", "2.337.0", SUM),
            format!("{SUM}  actions-runner-linux-x64-2.337.0.tar.gz\n")
        );
    }
}

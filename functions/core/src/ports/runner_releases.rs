//! [`RunnerReleases`]: GitHub's releases of the runner application (`actions/runner`),
//! read for the runner copy the deployment keeps in its bucket. The latest release is
//! asked conditionally (`If-None-Match` with the ETag of the last answer): GitHub's docs
//! ("Best practices for using the REST API", conditional requests) say a 304 answer does
//! not count against the primary rate limit.
//!
//! Fake: `memory::FakeRunnerReleases`. Adapter: `ephemera_github::GitHubApp` (the
//! first App's installation token, at its `api_url`, so GHES works).

use super::Cause;
use async_trait::async_trait;

/// One asset of a release, as GitHub lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseAsset {
    pub name: String,
    /// Bytes, as the release lists it.
    pub size: u64,
    pub download_url: String,
}

/// A release of the runner: its version (without the `v`), its notes (where the
/// published SHA-256 sums are) and its assets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerRelease {
    pub version: String,
    pub body: String,
    pub assets: Vec<ReleaseAsset>,
}

/// The answer to a conditional read of the latest release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LatestRelease {
    /// 304: the release is the one whose ETag was sent.
    NotModified,
    /// The latest release, with the ETag to send next time (if GitHub gave one).
    Release {
        release: RunnerRelease,
        etag: Option<String>,
    },
}

/// Why GitHub's releases could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error("GitHub's rate limit is spent")]
    Throttled,
    #[error("runner releases unreachable")]
    Transient(#[source] Cause),
}

/// The body of an asset, read a chunk at a time so that no tarball is ever held whole.
#[async_trait]
pub trait AssetChunks: Send {
    /// The next chunk, or `None` at the end of the body.
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, ReleaseError>;
}

/// GitHub's runner releases.
#[async_trait]
pub trait RunnerReleases: Send + Sync {
    /// `GET /repos/actions/runner/releases/latest`, conditional on `etag` when given.
    /// Read-only.
    async fn latest(&self, etag: Option<&str>) -> Result<LatestRelease, ReleaseError>;

    /// Starts the download of `asset` (a download, not an API call: no token is sent).
    /// Read-only.
    async fn download(&self, asset: &ReleaseAsset) -> Result<Box<dyn AssetChunks>, ReleaseError>;
}

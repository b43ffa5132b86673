//! [`RunnerBucket`]: the deployment's bucket where the newest runner of each
//! architecture is kept for the hosts, and where the sync keeps its mark. A tarball is
//! written as a multipart upload: parts (8 MiB, the sync's part size) are sent as
//! the download goes, and the object exists only once the upload is completed, so a
//! tarball whose sum is wrong is never seen (the upload is aborted).
//!
//! Fake: `memory::MemoryRunnerBucket`. Adapter: `ephemera_aws::S3RunnerBucket`.

use super::Cause;
use async_trait::async_trait;

/// Why the bucket could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("runner bucket: {what}")]
pub struct BucketError {
    pub what: String,
    #[source]
    pub cause: Cause,
}

/// An object being written a part at a time; nothing is visible until [`complete`].
///
/// [`complete`]: BucketUpload::complete
#[async_trait]
pub trait BucketUpload: Send {
    /// Sends the next part (every part but the last at least 5 MiB, S3's minimum).
    async fn part(&mut self, bytes: Vec<u8>) -> Result<(), BucketError>;
    /// Makes the object visible, whole. Consumes the upload.
    async fn complete(self: Box<Self>) -> Result<(), BucketError>;
    /// Drops the parts sent; the object never appears. Idempotent.
    async fn abort(self: Box<Self>) -> Result<(), BucketError>;
}

/// The deployment's runner bucket; keys are relative to the bucket.
#[async_trait]
pub trait RunnerBucket: Send + Sync {
    /// A small object's text (a `latest-<arch>`, a mark), or `None` if there is none.
    async fn read(&self, key: &str) -> Result<Option<String>, BucketError>;
    /// Writes a small object whole, replacing what was there. Idempotent.
    async fn write(&self, key: &str, text: &str) -> Result<(), BucketError>;
    /// Tags `key` as no longer pointed at, for the bucket's lifecycle rule to expire it.
    /// Idempotent; a key that is not there is no error.
    async fn mark_superseded(&self, key: &str) -> Result<(), BucketError>;
    /// Starts a multipart upload of `key`.
    async fn upload(&self, key: &str) -> Result<Box<dyn BucketUpload>, BucketError>;
}

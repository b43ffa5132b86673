//! [`RunnerSync`]: one check of GitHub's latest runner release, and the copy of each
//! architecture's tarball into the bucket when the bucket is behind. Checks at most once
//! per [`CHECK_INTERVAL`], conditionally (a 304 costs nothing of the rate limit), so a
//! new release is in the bucket within about an hour of GitHub publishing it.

use super::{
    latest_key, published_sum, sum_file, sum_key, tarball_key, tarball_name, LatestRunner,
    SyncMark, ARCHES, MARK_KEY,
};
use crate::ports::{
    BucketUpload, ImagePipelines, LatestRelease, ReleaseAsset, RunnerBucket, RunnerRelease,
    RunnerReleases,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use time::{Duration, OffsetDateTime};
use tokio::time::Instant;
use tracing::{error, info, warn};

/// How often GitHub is asked for the latest release.
pub const CHECK_INTERVAL: Duration = Duration::hours(1);
/// How soon a check that failed (GitHub or the bucket unreachable, the run's time up)
/// is tried again.
pub const RETRY_AFTER_FAILURE: Duration = Duration::minutes(10);
/// The parts of a tarball's upload: S3's minimum part size is 5 MiB (all parts but the
/// last), so at most this much of a tarball is held at once.
pub const PART_SIZE: usize = 8 * 1024 * 1024;

/// What one run of the step did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncOutcome {
    /// Whether GitHub was asked this run (false: the mark said not yet).
    pub checked: bool,
    /// GitHub answered 304: the bucket is at the latest release.
    pub not_modified: bool,
    /// Architectures whose tarball was put into the bucket.
    pub published: Vec<String>,
    /// Image pipelines started.
    pub pipelines_started: usize,
    /// Failures: a sum that did not match, an asset missing, GitHub or the bucket down.
    pub errors: usize,
}

/// The ports the step reaches.
#[derive(Clone)]
pub struct RunnerSync {
    pub releases: Arc<dyn RunnerReleases>,
    pub bucket: Arc<dyn RunnerBucket>,
    /// The image pipelines to start when the bucket takes a new release.
    pub pipelines: Arc<dyn ImagePipelines>,
}

/// Why one architecture was not published.
#[derive(Debug, thiserror::Error)]
enum ArchFailure {
    #[error("the release lists no asset {0}")]
    NoAsset(String),
    #[error("the release notes publish no SHA-256 for linux-{0}")]
    NoSum(String),
    #[error("{name}: the download's SHA-256 {got} is not the published {published}")]
    SumMismatch {
        name: String,
        got: String,
        published: String,
    },
    #[error("the run's time was up during the download")]
    OutOfTime,
    #[error(transparent)]
    Release(#[from] crate::ports::ReleaseError),
    #[error(transparent)]
    Bucket(#[from] crate::ports::BucketError),
}

impl ArchFailure {
    /// A failure that the same release will meet again: retried at the next check, not
    /// in a few minutes.
    fn is_release_fault(&self) -> bool {
        matches!(
            self,
            ArchFailure::NoAsset(_) | ArchFailure::NoSum(_) | ArchFailure::SumMismatch { .. }
        )
    }
}

impl RunnerSync {
    /// One run at `now`: nothing before the mark's time; otherwise a conditional read of
    /// the latest release, the architectures the bucket is behind on copied (each
    /// stopping at `deadline`), and the pipelines started once per release.
    pub async fn run(&self, now: OffsetDateTime, deadline: Instant) -> SyncOutcome {
        let mut outcome = SyncOutcome::default();
        let mark = match self.bucket.read(MARK_KEY).await {
            Ok(text) => text
                .and_then(|text| serde_json::from_str::<SyncMark>(&text).ok())
                .unwrap_or_default(),
            Err(err) => {
                error!(error = %err, "runner sync: the mark could not be read");
                outcome.errors += 1;
                return outcome;
            }
        };
        if mark.next_check_at.is_some_and(|at| now < at) {
            return outcome;
        }
        outcome.checked = true;
        let next = self.check(&mark, now, deadline, &mut outcome).await;
        if let Err(err) = self.write_mark(&next).await {
            error!(error = %err, "runner sync: the mark could not be written");
            outcome.errors += 1;
        }
        outcome
    }

    /// The check itself; returns the mark to keep.
    async fn check(
        &self,
        mark: &SyncMark,
        now: OffsetDateTime,
        deadline: Instant,
        outcome: &mut SyncOutcome,
    ) -> SyncMark {
        let retry = SyncMark {
            next_check_at: Some(now + RETRY_AFTER_FAILURE),
            etag: None,
            pipelines_started_for: mark.pipelines_started_for.clone(),
        };
        let (release, etag) = match self.releases.latest(mark.etag.as_deref()).await {
            Ok(LatestRelease::NotModified) => {
                outcome.not_modified = true;
                return SyncMark {
                    next_check_at: Some(now + CHECK_INTERVAL),
                    ..mark.clone()
                };
            }
            Ok(LatestRelease::Release { release, etag }) => (release, etag),
            Err(err) => {
                warn!(error = %err, "runner sync: the latest release could not be read");
                outcome.errors += 1;
                return retry;
            }
        };
        let mut release_faults = 0;
        let mut other_faults = 0;
        for arch in ARCHES {
            match self.sync_arch(&release, arch, deadline).await {
                Ok(true) => outcome.published.push(arch.to_owned()),
                Ok(false) => {}
                Err(failure) => {
                    error!(arch, version = %release.version, error = %failure,
                        "runner sync: the release was not published");
                    outcome.errors += 1;
                    if failure.is_release_fault() {
                        release_faults += 1;
                    } else {
                        other_faults += 1;
                    }
                }
            }
        }
        if other_faults > 0 {
            return retry;
        }
        let mut next = SyncMark {
            next_check_at: Some(now + CHECK_INTERVAL),
            // A release some architecture could not take is read whole again next time.
            etag: if release_faults == 0 { etag } else { None },
            pipelines_started_for: mark.pipelines_started_for.clone(),
        };
        if release_faults == 0 && next.pipelines_started_for.as_ref() != Some(&release.version) {
            match self.start_pipelines(&release.version, outcome).await {
                true => next.pipelines_started_for = Some(release.version.clone()),
                false => next.next_check_at = Some(now + RETRY_AFTER_FAILURE),
            }
        }
        next
    }

    /// Copies `arch`'s tarball of `release` into the bucket, unless `latest-<arch>`
    /// already names it; true if it was published.
    async fn sync_arch(
        &self,
        release: &RunnerRelease,
        arch: &str,
        deadline: Instant,
    ) -> Result<bool, ArchFailure> {
        let published =
            published_sum(&release.body, arch).ok_or_else(|| ArchFailure::NoSum(arch.into()))?;
        let latest = LatestRunner {
            version: release.version.clone(),
            sha256: published.clone(),
        };
        let current = self.bucket.read(&latest_key(arch)).await?;
        let current = current.as_deref().and_then(LatestRunner::parse);
        if current.as_ref() == Some(&latest) {
            return Ok(false);
        }
        let name = tarball_name(arch, &release.version);
        let asset = release
            .assets
            .iter()
            .find(|asset| asset.name == name)
            .ok_or_else(|| ArchFailure::NoAsset(name.clone()))?;
        let got = self
            .copy_checked(
                asset,
                &tarball_key(arch, &release.version),
                &published,
                deadline,
            )
            .await?;
        info!(arch, version = %release.version, sha256 = %got, "runner sync: tarball in the bucket");
        let sums = sum_file(arch, &release.version, &published);
        self.bucket
            .write(&sum_key(arch, &release.version), &sums)
            .await?;
        // Last: the hosts follow this pointer, and it names only a checked tarball.
        self.bucket.write(&latest_key(arch), &latest.line()).await?;
        if let Some(old) = current.filter(|old| old.version != latest.version) {
            self.supersede(arch, &old.version).await;
        }
        Ok(true)
    }

    /// Streams `asset` into `key` a part at a time, hashing as it goes; completes the
    /// upload only if the sum is `published`, and aborts it otherwise (the object never
    /// appears).
    async fn copy_checked(
        &self,
        asset: &ReleaseAsset,
        key: &str,
        published: &str,
        deadline: Instant,
    ) -> Result<String, ArchFailure> {
        let mut upload = self.bucket.upload(key).await?;
        match stream_parts(self.releases.as_ref(), asset, upload.as_mut(), deadline).await {
            Ok(got) if got == published => {
                upload.complete().await?;
                Ok(got)
            }
            Ok(got) => {
                abort(upload).await;
                Err(ArchFailure::SumMismatch {
                    name: asset.name.clone(),
                    got,
                    published: published.to_owned(),
                })
            }
            Err(failure) => {
                abort(upload).await;
                Err(failure)
            }
        }
    }

    /// Tags the tarball of `version` and its sum as superseded: the lifecycle rule
    /// expires them a while later. A failure leaves them in the bucket, nothing worse.
    async fn supersede(&self, arch: &str, version: &str) {
        for key in [tarball_key(arch, version), sum_key(arch, version)] {
            if let Err(err) = self.bucket.mark_superseded(&key).await {
                warn!(error = %err, key, "runner sync: an old runner was not tagged superseded");
            }
        }
    }

    /// Starts every pipeline for `version`; true if all started (or there are none).
    async fn start_pipelines(&self, version: &str, outcome: &mut SyncOutcome) -> bool {
        // Image Builder's clientToken is 1 to 36 characters; one token per release makes
        // a repeated start of the same release a no-op.
        let token: String = format!("runner-{version}").chars().take(36).collect();
        let mut all = true;
        for arn in self.pipelines.arns() {
            match self.pipelines.start(&arn, &token).await {
                Ok(()) => {
                    info!(pipeline = %arn, version, "runner sync: image pipeline started");
                    outcome.pipelines_started += 1;
                }
                Err(err) => {
                    error!(error = %err, "runner sync: an image pipeline was not started");
                    outcome.errors += 1;
                    all = false;
                }
            }
        }
        all
    }

    async fn write_mark(&self, mark: &SyncMark) -> Result<(), crate::ports::BucketError> {
        let text = serde_json::to_string(mark).unwrap_or_default();
        self.bucket.write(MARK_KEY, &text).await
    }
}

/// Sends the asset's body to `upload` in parts of [`PART_SIZE`]; returns its SHA-256.
async fn stream_parts(
    releases: &dyn RunnerReleases,
    asset: &ReleaseAsset,
    upload: &mut dyn BucketUpload,
    deadline: Instant,
) -> Result<String, ArchFailure> {
    let mut chunks = releases.download(asset).await?;
    let mut hasher = Sha256::new();
    let mut part = Vec::with_capacity(PART_SIZE);
    while let Some(chunk) = chunks.next_chunk().await? {
        if Instant::now() >= deadline {
            return Err(ArchFailure::OutOfTime);
        }
        hasher.update(&chunk);
        part.extend_from_slice(&chunk);
        if part.len() >= PART_SIZE {
            let full = std::mem::replace(&mut part, Vec::with_capacity(PART_SIZE));
            upload.part(full).await?;
        }
    }
    if !part.is_empty() {
        upload.part(part).await?;
    }
    Ok(hex::encode(hasher.finalize()))
}

async fn abort(upload: Box<dyn BucketUpload>) {
    if let Err(err) = upload.abort().await {
        // The bucket's lifecycle rule removes an upload left incomplete.
        warn!(error = %err, "runner sync: an upload could not be aborted");
    }
}

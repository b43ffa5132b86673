//! The runner copy's ports in memory: [`FakeRunnerReleases`] (GitHub's releases, with a
//! conditional read that answers 304 to the current ETag, and counts of what was asked),
//! [`MemoryRunnerBucket`] (objects in a map; a multipart upload appears only once
//! completed) and [`FakeImagePipelines`] (records each start).

use super::lock;
use crate::ports::{
    AssetChunks, BucketError, BucketUpload, ImagePipelines, LatestRelease, PipelineError,
    ReleaseAsset, ReleaseError, RunnerBucket, RunnerRelease, RunnerReleases,
};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// The chunk size of a fake download: small, so a test's tarball comes in many chunks.
const CHUNK: usize = 1024;

#[derive(Debug, Default)]
struct Releases {
    latest: Option<(RunnerRelease, String)>,
    assets: HashMap<String, Vec<u8>>,
    latest_reads: usize,
    not_modified: usize,
    downloads: usize,
}

/// GitHub's runner releases in memory.
#[derive(Debug, Default)]
pub struct FakeRunnerReleases {
    state: Mutex<Releases>,
}

impl FakeRunnerReleases {
    /// Publishes `version` with `notes` and one asset per `(name, bytes)`; the ETag
    /// changes with every publication.
    pub fn publish(&self, version: &str, notes: &str, assets: &[(&str, &[u8])]) {
        let mut state = lock(&self.state);
        let release = RunnerRelease {
            version: version.to_owned(),
            body: notes.to_owned(),
            assets: assets
                .iter()
                .map(|(name, bytes)| ReleaseAsset {
                    name: (*name).to_owned(),
                    size: bytes.len() as u64,
                    download_url: format!("https://github.invalid/{version}/{name}"),
                })
                .collect(),
        };
        for (name, bytes) in assets {
            let url = format!("https://github.invalid/{version}/{name}");
            state.assets.insert(url, bytes.to_vec());
        }
        let etag = format!("\"release-{version}-{}\"", state.assets.len());
        state.latest = Some((release, etag));
    }

    /// Reads of the latest release (304s included), 304s, and downloads started.
    pub fn calls(&self) -> (usize, usize, usize) {
        let state = lock(&self.state);
        (state.latest_reads, state.not_modified, state.downloads)
    }
}

struct Chunks(std::vec::IntoIter<Vec<u8>>);

#[async_trait]
impl AssetChunks for Chunks {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, ReleaseError> {
        Ok(self.0.next())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Missing(String);

#[async_trait]
impl RunnerReleases for FakeRunnerReleases {
    async fn latest(&self, etag: Option<&str>) -> Result<LatestRelease, ReleaseError> {
        let mut state = lock(&self.state);
        state.latest_reads += 1;
        let Some((release, current)) = state.latest.clone() else {
            return Err(ReleaseError::Transient(Box::new(Missing(
                "no release".into(),
            ))));
        };
        if etag == Some(current.as_str()) {
            state.not_modified += 1;
            return Ok(LatestRelease::NotModified);
        }
        Ok(LatestRelease::Release {
            release,
            etag: Some(current),
        })
    }

    async fn download(&self, asset: &ReleaseAsset) -> Result<Box<dyn AssetChunks>, ReleaseError> {
        let mut state = lock(&self.state);
        state.downloads += 1;
        let bytes = state
            .assets
            .get(&asset.download_url)
            .cloned()
            .ok_or_else(|| {
                ReleaseError::Transient(Box::new(Missing(format!("404 {}", asset.download_url))))
            })?;
        let chunks: Vec<Vec<u8>> = bytes.chunks(CHUNK).map(<[u8]>::to_vec).collect();
        Ok(Box::new(Chunks(chunks.into_iter())))
    }
}

#[derive(Debug, Default)]
struct Objects {
    objects: BTreeMap<String, Vec<u8>>,
    superseded: Vec<String>,
    uploads_aborted: usize,
}

/// The runner bucket in memory.
#[derive(Debug, Default, Clone)]
pub struct MemoryRunnerBucket {
    state: Arc<Mutex<Objects>>,
}

impl MemoryRunnerBucket {
    /// The object at `key`.
    pub fn object(&self, key: &str) -> Option<Vec<u8>> {
        lock(&self.state).objects.get(key).cloned()
    }

    /// Every key, in order.
    pub fn keys(&self) -> Vec<String> {
        lock(&self.state).objects.keys().cloned().collect()
    }

    /// The keys tagged as superseded, in order.
    pub fn superseded(&self) -> Vec<String> {
        lock(&self.state).superseded.clone()
    }

    /// Uploads aborted so far.
    pub fn uploads_aborted(&self) -> usize {
        lock(&self.state).uploads_aborted
    }
}

struct MemoryUpload {
    key: String,
    parts: Vec<Vec<u8>>,
    bucket: MemoryRunnerBucket,
}

#[async_trait]
impl BucketUpload for MemoryUpload {
    async fn part(&mut self, bytes: Vec<u8>) -> Result<(), BucketError> {
        self.parts.push(bytes);
        Ok(())
    }

    async fn complete(self: Box<Self>) -> Result<(), BucketError> {
        let whole = self.parts.concat();
        lock(&self.bucket.state).objects.insert(self.key, whole);
        Ok(())
    }

    async fn abort(self: Box<Self>) -> Result<(), BucketError> {
        lock(&self.bucket.state).uploads_aborted += 1;
        Ok(())
    }
}

#[async_trait]
impl RunnerBucket for MemoryRunnerBucket {
    async fn read(&self, key: &str) -> Result<Option<String>, BucketError> {
        let object = lock(&self.state).objects.get(key).cloned();
        Ok(object.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    async fn write(&self, key: &str, text: &str) -> Result<(), BucketError> {
        let mut state = lock(&self.state);
        state
            .objects
            .insert(key.to_owned(), text.as_bytes().to_vec());
        Ok(())
    }

    async fn mark_superseded(&self, key: &str) -> Result<(), BucketError> {
        let mut state = lock(&self.state);
        if state.objects.contains_key(key) && !state.superseded.iter().any(|k| k == key) {
            state.superseded.push(key.to_owned());
        }
        Ok(())
    }

    async fn upload(&self, key: &str) -> Result<Box<dyn BucketUpload>, BucketError> {
        Ok(Box::new(MemoryUpload {
            key: key.to_owned(),
            parts: Vec::new(),
            bucket: self.clone(),
        }))
    }
}

/// Image pipelines that record each start, with its client token.
#[derive(Debug, Default)]
pub struct FakeImagePipelines {
    pub arns: Vec<String>,
    started: Mutex<Vec<(String, String)>>,
}

impl FakeImagePipelines {
    /// Pipelines of these ARNs.
    pub fn of(arns: &[&str]) -> FakeImagePipelines {
        FakeImagePipelines {
            arns: arns.iter().map(|arn| (*arn).to_owned()).collect(),
            started: Mutex::default(),
        }
    }

    /// Each start, `(arn, client token)`, in order.
    pub fn started(&self) -> Vec<(String, String)> {
        lock(&self.started).clone()
    }
}

#[async_trait]
impl ImagePipelines for FakeImagePipelines {
    fn arns(&self) -> Vec<String> {
        self.arns.clone()
    }

    async fn start(&self, arn: &str, client_token: &str) -> Result<(), PipelineError> {
        lock(&self.started).push((arn.to_owned(), client_token.to_owned()));
        Ok(())
    }
}

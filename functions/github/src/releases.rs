//! The [`RunnerReleases`] port on GitHub's REST API: the latest release of
//! `actions/runner`, read with the App's installation token at the App's `api_url` (so a
//! GHES instance is asked where the configuration names one), and its assets'
//! downloads.
//!
//! The read is conditional: GitHub's "Best practices for using the REST API"
//! (<https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate>)
//! says a conditional request answered 304, made with an `Authorization` header, does not
//! count against the primary rate limit. An installation token may read a public
//! repository's releases wherever the App is installed; the App's first installation is
//! used (`GET /app/installations`, as the App).
//!
//! A download is of `browser_download_url`, no token sent (a download, not an API call);
//! GitHub answers it with a redirect to its storage, which the client follows. The body
//! is read a chunk at a time, never whole.

use crate::client::{lock, GitHubApp};
use crate::http::{Call, Endpoint, HttpError};
use async_trait::async_trait;
use ephemera_core::ports::{
    AssetChunks, ForgeError, LatestRelease, ReleaseAsset, ReleaseError, RunnerRelease,
    RunnerReleases,
};
use serde::Deserialize;
use std::time::Duration;
use tracing::instrument;

const LATEST_RELEASE: Endpoint =
    Endpoint::new("get_latest_runner_release", &[(304, "not_modified")]);
const INSTALLATIONS: Endpoint = Endpoint::new("list_app_installations", &[]);
/// Where the runner is released.
const LATEST_PATH: &str = "/repos/actions/runner/releases/latest";
/// How long a download may take as a whole (the sync stops at its run's deadline before).
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// The fields of GitHub's `release` schema read here.
#[derive(Deserialize)]
struct ReleaseBody {
    tag_name: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    assets: Vec<AssetBody>,
}

#[derive(Deserialize)]
struct AssetBody {
    name: String,
    size: u64,
    browser_download_url: String,
}

#[derive(Deserialize)]
struct Installation {
    id: u64,
}

impl From<ReleaseBody> for RunnerRelease {
    fn from(release: ReleaseBody) -> RunnerRelease {
        let version = release.tag_name.trim_start_matches('v').to_owned();
        RunnerRelease {
            version,
            body: release.body.unwrap_or_default(),
            assets: release
                .assets
                .into_iter()
                .map(|asset| ReleaseAsset {
                    name: asset.name,
                    size: asset.size,
                    download_url: asset.browser_download_url,
                })
                .collect(),
        }
    }
}

fn release_error(error: ForgeError) -> ReleaseError {
    match error {
        ForgeError::Throttled { .. } => ReleaseError::Throttled,
        other => ReleaseError::Transient(Box::new(other)),
    }
}

impl GitHubApp {
    /// The App's first installation, found once.
    async fn any_installation(&self) -> Result<u64, ForgeError> {
        let key = (String::new(), None);
        if let Some(&id) = lock(&self.installations).get(&key) {
            return Ok(id);
        }
        let call = Call::get("/app/installations?per_page=1".to_owned());
        let reply = self.send_as_app(&INSTALLATIONS, &call).await?;
        let installations: Vec<Installation> = reply.json(&INSTALLATIONS)?;
        let id = installations
            .first()
            .map(|installation| installation.id)
            .ok_or_else(|| ForgeError::Rejected {
                status: 404,
                message: "the GitHub App has no installation".to_owned(),
            })?;
        lock(&self.installations).insert(key, id);
        Ok(id)
    }
}

/// A download's body, a chunk at a time.
struct Download(reqwest::Response);

#[async_trait]
impl AssetChunks for Download {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, ReleaseError> {
        match self.0.chunk().await {
            Ok(chunk) => Ok(chunk.map(|bytes| bytes.to_vec())),
            Err(source) => Err(ReleaseError::Transient(Box::new(HttpError::Request {
                endpoint: "download_runner_asset",
                source,
            }))),
        }
    }
}

#[async_trait]
impl RunnerReleases for GitHubApp {
    #[instrument(skip_all)]
    async fn latest(&self, etag: Option<&str>) -> Result<LatestRelease, ReleaseError> {
        let installation_id = self.any_installation().await.map_err(release_error)?;
        let call = Call::get(LATEST_PATH.to_owned()).if_none_match(etag);
        let reply = self
            .as_installation(installation_id, &LATEST_RELEASE, &call)
            .await
            .map_err(release_error)?;
        if reply.status == 304 {
            return Ok(LatestRelease::NotModified);
        }
        let body: ReleaseBody = reply.json(&LATEST_RELEASE).map_err(release_error)?;
        Ok(LatestRelease::Release {
            release: body.into(),
            etag: reply.etag,
        })
    }

    #[instrument(skip_all, fields(asset = %asset.name))]
    async fn download(&self, asset: &ReleaseAsset) -> Result<Box<dyn AssetChunks>, ReleaseError> {
        let failed = |source| {
            ReleaseError::Transient(Box::new(HttpError::Request {
                endpoint: "download_runner_asset",
                source,
            }))
        };
        let response = self
            .http
            .get(&asset.download_url)
            .header(reqwest::header::ACCEPT, "application/octet-stream")
            .timeout(DOWNLOAD_TIMEOUT)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(failed)?;
        Ok(Box::new(Download(response)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_reads_its_version_without_the_v_and_its_assets() {
        let body: ReleaseBody = serde_json::from_str(
            r#"{"tag_name":"v2.337.0","body":"notes","assets":[{"name":"actions-runner-linux-x64-2.337.0.tar.gz","size":3,"browser_download_url":"https://github.com/actions/runner/releases/download/v2.337.0/actions-runner-linux-x64-2.337.0.tar.gz"}]}"#,
        )
        .expect("a release");
        let release = RunnerRelease::from(body);
        assert_eq!(release.version, "2.337.0");
        assert_eq!(release.assets[0].size, 3);
    }
}

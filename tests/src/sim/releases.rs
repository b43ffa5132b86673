//! The runner's releases, as GitHub serves them: `GET /repos/actions/runner/releases/latest`
//! and `/releases/tags/v<ver>` (GitHub's `release` object, its notes holding each Linux
//! tarball's SHA-256 between `<!-- BEGIN SHA linux-<arch> -->` and
//! `<!-- END SHA linux-<arch> -->` as actions/runner's release notes do), with an ETag and
//! a 304 to a matching `If-None-Match`; the assets' downloads on github.com's side
//! (`GET /actions/runner/releases/download/v<ver>/<name>`, outside the API's buckets); and
//! the App's installations (`GET /app/installations`), where a token for the releases is
//! taken. A test publishes a release with [`super::SimHandle::publish_runner_release`]
//! or `POST /_sim/runner-releases`.

use super::auth::ApiError;
use super::routes::Sim;
use super::{body, Shared};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where the assets are downloaded from (github.com's side of the simulator).
pub const DOWNLOADS: &str = "/actions/runner/releases/download/";

/// One published release.
#[derive(Debug, Clone)]
pub struct SimRelease {
    pub id: u64,
    pub version: String,
    /// arch → tarball.
    pub tarballs: BTreeMap<String, Vec<u8>>,
    /// arch → the sum the notes publish (the tarball's own unless a test says otherwise).
    pub published_sums: BTreeMap<String, String>,
}

/// The releases published so far, the latest last, and the downloads served.
#[derive(Debug, Default)]
pub struct Releases {
    pub published: Vec<SimRelease>,
    /// Asset names downloaded, in order.
    pub downloads: Vec<String>,
    /// `GET …/releases/latest` answered, by status.
    pub latest_answers: BTreeMap<u16, u64>,
}

impl SimRelease {
    fn tag(&self) -> String {
        format!("v{}", self.version)
    }

    fn etag(&self) -> String {
        format!("W/\"release-{}\"", self.id)
    }

    fn notes(&self) -> String {
        let mut notes = String::from(
            "## What's Changed\n- Runner release of the simulator\n\n## SHA-256 Checksums\n",
        );
        for (arch, sum) in &self.published_sums {
            notes.push_str(&format!(
                "- actions-runner-linux-{arch}-{}.tar.gz <!-- BEGIN SHA linux-{arch} -->{sum}<!-- END SHA linux-{arch} -->\n",
                self.version
            ));
        }
        notes
    }

    fn json(&self, api: &str) -> Value {
        let repo = format!("{api}/repos/actions/runner");
        let assets: Vec<Value> = self
            .tarballs
            .iter()
            .enumerate()
            .map(|(n, (arch, bytes))| {
                let name = format!("actions-runner-linux-{arch}-{}.tar.gz", self.version);
                let id = self.id * 100 + n as u64;
                json!({
                    "url": format!("{repo}/releases/assets/{id}"),
                    "browser_download_url": format!("{api}{DOWNLOADS}{}/{name}", self.tag()),
                    "id": id,
                    "node_id": format!("RA_sim{id}"),
                    "name": name,
                    "label": "",
                    "state": "uploaded",
                    "content_type": "application/gzip",
                    "size": bytes.len(),
                    "digest": format!("sha256:{}", hex::encode(Sha256::digest(bytes))),
                    "download_count": 0,
                    "created_at": "2026-01-01T00:00:00Z",
                    "updated_at": "2026-01-01T00:00:00Z",
                    "uploader": null,
                })
            })
            .collect();
        json!({
            "url": format!("{repo}/releases/{}", self.id),
            "html_url": format!("https://github.com/actions/runner/releases/tag/{}", self.tag()),
            "assets_url": format!("{repo}/releases/{}/assets", self.id),
            "upload_url": format!("https://uploads.github.com/repos/actions/runner/releases/{}/assets{{?name,label}}", self.id),
            "tarball_url": format!("{repo}/tarball/{}", self.tag()),
            "zipball_url": format!("{repo}/zipball/{}", self.tag()),
            "id": self.id,
            "node_id": format!("RE_sim{}", self.id),
            "tag_name": self.tag(),
            "target_commitish": "main",
            "name": self.tag(),
            "body": self.notes(),
            "draft": false,
            "prerelease": false,
            "created_at": "2026-01-01T00:00:00Z",
            "published_at": "2026-01-01T00:00:00Z",
            "author": body::account("github-actions"),
            "assets": assets,
        })
    }
}

impl Shared {
    /// Publishes `version` with one tarball per arch; `published_sums` overrides the sum
    /// the notes give for an arch (a test of a wrong sum).
    pub(crate) fn publish_runner_release(
        &self,
        version: &str,
        tarballs: BTreeMap<String, Vec<u8>>,
        published_sums: BTreeMap<String, String>,
    ) {
        let mut releases = self.releases();
        let sums = tarballs
            .iter()
            .map(|(arch, bytes)| {
                let own = hex::encode(Sha256::digest(bytes));
                (
                    arch.clone(),
                    published_sums.get(arch).cloned().unwrap_or(own),
                )
            })
            .collect();
        let id = releases.published.len() as u64 + 1;
        releases.published.push(SimRelease {
            id,
            version: version.to_owned(),
            tarballs,
            published_sums: sums,
        });
    }
}

fn is_runner_repo(owner: &str, repo: &str) -> bool {
    owner.eq_ignore_ascii_case("actions") && repo.eq_ignore_ascii_case("runner")
}

/// `GET /repos/{owner}/{repo}/releases/latest`, conditional on `If-None-Match`.
pub async fn latest(
    State(sim): Sim,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    sim.lock().hit("GET /repos/{owner}/{repo}/releases/latest");
    let release = sim.releases().published.last().cloned();
    let Some(release) = release.filter(|_| is_runner_repo(&owner, &repo)) else {
        return Err(ApiError::not_found());
    };
    let etag = release.etag();
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|sent| sent == etag);
    let status = if matches { 304 } else { 200 };
    *sim.releases().latest_answers.entry(status).or_default() += 1;
    if matches {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    let body = release.json(&sim.url);
    Ok(([(header::ETAG, etag)], Json(body)).into_response())
}

/// `GET /repos/{owner}/{repo}/releases/tags/{tag}`.
pub async fn by_tag(
    State(sim): Sim,
    Path((owner, repo, tag)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    sim.lock()
        .hit("GET /repos/{owner}/{repo}/releases/tags/{tag}");
    let found = sim
        .releases()
        .published
        .iter()
        .find(|release| release.tag() == tag)
        .cloned();
    match found.filter(|_| is_runner_repo(&owner, &repo)) {
        Some(release) => Ok(Json(release.json(&sim.url))),
        None => Err(ApiError::not_found()),
    }
}

/// `GET /actions/runner/releases/download/{tag}/{name}`: the tarball's bytes.
pub async fn download(State(sim): Sim, Path((tag, name)): Path<(String, String)>) -> Response {
    let mut releases = sim.releases();
    let bytes = releases
        .published
        .iter()
        .filter(|release| release.tag() == tag)
        .flat_map(|release| {
            release.tarballs.iter().filter_map(|(arch, bytes)| {
                let asset = format!("actions-runner-linux-{arch}-{}.tar.gz", release.version);
                (asset == name).then(|| bytes.clone())
            })
        })
        .next();
    match bytes {
        Some(bytes) => {
            releases.downloads.push(name);
            ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
        }
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

/// `GET /app/installations`, as the App: its one installation.
pub async fn installations(State(sim): Sim, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    sim.lock().hit("GET /app/installations");
    let app_id = sim.verify_app(&headers)?;
    Ok(Json(json!([body::installation(
        sim.config.installation_id,
        app_id,
        "sim-org"
    )])))
}

/// The body of `POST /_sim/runner-releases`.
#[derive(Deserialize)]
pub struct PublishRequest {
    version: String,
    /// arch → the tarball, base64.
    tarballs: BTreeMap<String, String>,
    #[serde(default)]
    published_sums: BTreeMap<String, String>,
}

/// `POST /_sim/runner-releases`: publishes a release.
pub async fn control_publish(
    State(sim): State<Arc<Shared>>,
    Json(request): Json<PublishRequest>,
) -> Result<StatusCode, (StatusCode, String)> {
    let mut tarballs = BTreeMap::new();
    for (arch, encoded) in request.tarballs {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|err| (StatusCode::BAD_REQUEST, format!("tarball {arch}: {err}")))?;
        tarballs.insert(arch, bytes);
    }
    sim.publish_runner_release(&request.version, tarballs, request.published_sums);
    Ok(StatusCode::CREATED)
}

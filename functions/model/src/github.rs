//! GitHub behind its limits, each GitHub App's own: points per minute per endpoint,
//! concurrent requests and the installation's hourly buckets (`core`, and
//! `actions_runner_registration` for generate-jitconfig; the content-creation limit when
//! the quotas apply it), each call answered after a drawn latency; the organization's
//! limits every App shares: its runner registrations every 5 minutes (a wait), and its
//! runner group's 10,000 runners (a refusal: GitHub's "Actions limits" say adding a
//! runner past it "will not be possible"). In front of it, ephemera's retry policy
//! (`ephemera-github`: 4 attempts, 200 ms doubling, a 10 s budget, `retry-after`
//! honoured only when it fits in the budget).

use crate::cloud::{Caller, Cloud, GitHubBucket};
use async_trait::async_trait;
use ephemera_core::memory::FakeForge;
use ephemera_core::ports::*;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// ephemera-github's retry policy: attempts, the first backoff (doubling), the budget.
pub const ATTEMPTS: u32 = 4;
pub const BASE_DELAY: Duration = Duration::from_millis(200);
pub const BUDGET: Duration = Duration::from_secs(10);

/// A GitHub REST endpoint, its points and the hourly bucket it spends.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    pub name: &'static str,
    pub points: f64,
    pub bucket: GitHubBucket,
    /// Whether the content-creation limit may apply to it (a POST that creates).
    pub creates_content: bool,
}

pub const GENERATE_JITCONFIG: Endpoint = Endpoint {
    name: "generate_jitconfig",
    points: 5.0,
    bucket: GitHubBucket::Registration,
    creates_content: true,
};
pub const DELETE_RUNNER: Endpoint = Endpoint {
    name: "delete_runner",
    points: 5.0,
    bucket: GitHubBucket::Core,
    creates_content: false,
};
pub const GET_RUNNER: Endpoint = Endpoint {
    name: "get_runner",
    points: 1.0,
    bucket: GitHubBucket::Core,
    creates_content: false,
};
pub const LIST_RUNNERS: Endpoint = Endpoint {
    name: "list_runners",
    points: 1.0,
    bucket: GitHubBucket::Core,
    creates_content: false,
};
pub const LIST_DELIVERIES: Endpoint = Endpoint {
    name: "list_deliveries",
    points: 1.0,
    bucket: GitHubBucket::Core,
    creates_content: false,
};
pub const REDELIVER: Endpoint = Endpoint {
    name: "redeliver",
    points: 5.0,
    bucket: GitHubBucket::Core,
    creates_content: false,
};
pub const GET_JOB: Endpoint = Endpoint {
    name: "get_job",
    points: 1.0,
    bucket: GitHubBucket::Core,
    creates_content: false,
};

/// One request to GitHub as ephemera's client makes it, as the first App.
pub async fn request(cloud: &Cloud, caller: Caller, endpoint: Endpoint) -> Result<(), ForgeError> {
    request_as(cloud, caller, 0, endpoint).await
}

/// One request to GitHub as App `app`: retried inside its budget, `Throttled` with
/// GitHub's wait once that does not fit.
pub async fn request_as(
    cloud: &Cloud,
    caller: Caller,
    app: usize,
    endpoint: Endpoint,
) -> Result<(), ForgeError> {
    let started = Instant::now();
    let mut failures = 0;
    let points_bucket = format!("app{app}:{}", endpoint.name);
    loop {
        cloud.count(caller, "GitHub", endpoint.name);
        let refusal = match cloud.github_start(app, endpoint.bucket, endpoint.creates_content) {
            Ok(()) => {
                let points =
                    cloud.take(&points_bucket, cloud.quotas.github_points, endpoint.points);
                cloud.wait(cloud.latencies.github).await;
                cloud.github_end(app);
                match points {
                    Ok(()) => return Ok(()),
                    Err(_) => {
                        cloud.github_refused("points");
                        cloud.quotas.github_retry_after
                    }
                }
            }
            Err(wait) => {
                cloud.wait(cloud.latencies.github).await;
                wait
            }
        };
        cloud.throttled("GitHub");
        failures += 1;
        if failures >= ATTEMPTS || started.elapsed() + refusal > BUDGET {
            return Err(ForgeError::Throttled {
                retry_after: Some(refusal),
            });
        }
        tokio::time::sleep(refusal.max(BASE_DELAY * (1 << (failures - 1)))).await;
    }
}

/// The [`Forge`] port on GitHub's limits, over the in-memory GitHub, as one App (every
/// App has the same installations, so one GitHub answers them all).
pub struct MeteredForge {
    pub inner: Arc<FakeForge>,
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
    /// Which App's buckets its calls spend.
    pub app: usize,
}

#[async_trait]
impl Forge for MeteredForge {
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request_: &JitRequest,
    ) -> Result<JitConfig, ForgeError> {
        request_as(&self.cloud, self.caller, self.app, GENERATE_JITCONFIG).await?;
        if !self.cloud.join_group() {
            // What GitHub answers is not documented; the adapter maps any answer but
            // 409 and the rate limits to `Rejected`, which fails the creation.
            return Err(ForgeError::Rejected {
                status: 422,
                message: "the runner group holds its 10,000 runners".to_owned(),
            });
        }
        let registered = self.inner.generate_jit_config(scope, request_).await;
        if registered.is_err() {
            self.cloud.leave_group();
        }
        registered
    }

    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError> {
        request_as(&self.cloud, self.caller, self.app, DELETE_RUNNER).await?;
        let removal = self.inner.remove_runner(scope, runner_id).await;
        if matches!(removal, Ok(RunnerRemoval::Removed)) {
            self.cloud.leave_group();
        }
        removal
    }

    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        request_as(&self.cloud, self.caller, self.app, GET_RUNNER).await?;
        self.inner.get_runner(scope, runner_id).await
    }

    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError> {
        let listed = self.inner.list_runners(scope).await?;
        // One request per page of 100.
        for _ in 0..listed.len().div_ceil(100).max(1) {
            request_as(&self.cloud, self.caller, self.app, LIST_RUNNERS).await?;
        }
        Ok(listed)
    }

    async fn find_runner(
        &self,
        scope: &RunnerScope,
        name: &str,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        // One request: the list endpoint filtered by name.
        request_as(&self.cloud, self.caller, self.app, LIST_RUNNERS).await?;
        self.inner.find_runner(scope, name).await
    }

    async fn job_state(
        &self,
        installation_id: Option<u64>,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError> {
        request_as(&self.cloud, self.caller, self.app, GET_JOB).await?;
        self.inner
            .job_state(installation_id, owner, repo, job_id)
            .await
    }
}

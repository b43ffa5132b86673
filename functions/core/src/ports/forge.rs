//! [`Forge`]: GitHub's runners and jobs, as a GitHub App installation sees them, and
//! [`ForgeError`], the error of every GitHub port.
//!
//! Fake: `memory::FakeForge`. Adapter: `ephemera_github::GitHubApp` (and, over
//! several Apps, [`crate::apps::SeveralApps`]).

use super::Cause;
use crate::model::RunnerScope;
use async_trait::async_trait;
use secrecy::SecretString;
use std::time::Duration;

/// What a just-in-time runner is registered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitRequest {
    pub name: String,
    pub labels: Vec<String>,
    pub runner_group: String,
    pub work_folder: String,
}

/// A registered just-in-time runner.
#[derive(Debug, Clone)]
pub struct JitConfig {
    pub runner_id: u64,
    pub encoded: SecretString,
}

/// The answer to removing a runner from GitHub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerRemoval {
    Removed,
    /// GitHub does not know it (already gone).
    NotFound,
    /// GitHub refused: the runner is running a job (422).
    Busy,
}

/// GitHub's view of a runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeRunner {
    pub id: u64,
    pub name: String,
    pub online: bool,
    pub busy: bool,
}

/// GitHub's view of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeJobState {
    Queued,
    InProgress,
    Completed,
    /// waiting, requested, pending...
    Other,
}

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// A runner with that name is already registered.
    #[error("a runner named {0} already exists")]
    AlreadyExists(String),
    #[error("GitHub refused the credentials")]
    Unauthorized,
    #[error("GitHub rate limit hit")]
    Throttled { retry_after: Option<Duration> },
    #[error("GitHub refused the request: {status}: {message}")]
    Rejected { status: u16, message: String },
    #[error("GitHub request failed")]
    Transient(#[source] Cause),
}

/// GitHub, as a GitHub App installation sees it.
#[async_trait]
pub trait Forge: Send + Sync {
    /// Registers a just-in-time runner. Not idempotent: a second call with the same name
    /// is [`ForgeError::AlreadyExists`].
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request: &JitRequest,
    ) -> Result<JitConfig, ForgeError>;

    /// Removes a runner. The DELETE is itself the "is it busy?" check: 422 → `Busy`.
    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError>;

    /// Reads a runner; `None` if GitHub does not know it.
    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError>;

    /// Every runner registered in `scope`, read page by page; a snapshot (a runner
    /// registered or removed meanwhile may be missed). Read-only.
    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError>;

    /// The runner registered in `scope` under `name`, if any. GitHub's list endpoint
    /// filters by name, so a client asks once instead of reading every page; this
    /// default reads the list.
    async fn find_runner(
        &self,
        scope: &RunnerScope,
        name: &str,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        let listed = self.list_runners(scope).await?;
        Ok(listed.into_iter().find(|r| r.name == name))
    }

    /// Reads a job's state; `None` if GitHub does not know it.
    async fn job_state(
        &self,
        installation_id: Option<u64>,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError>;
}

//! [`WorkflowRuns`]: GitHub's workflow runs, read and re-run for the one re-run of a job
//! its spot runner's interruption failed ([`crate::rerun`]).
//!
//! Fake: `memory::FakeWorkflowRuns`. Adapter: `ephemera_github::GitHubApp`.

use super::ForgeError;
use crate::model::{RunKey, RunState};
use async_trait::async_trait;

/// Workflow runs on GitHub (needs the App's `actions: write` to re-run).
#[async_trait]
pub trait WorkflowRuns: Send + Sync {
    /// `GET /repos/{owner}/{repo}/actions/runs/{run_id}`; `None` if GitHub does not know
    /// it. Read-only.
    async fn run_state(
        &self,
        installation_id: Option<u64>,
        run: &RunKey,
    ) -> Result<Option<RunState>, ForgeError>;

    /// `POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun`. Not idempotent: each
    /// call GitHub accepts is one more attempt of the run; a 403 (the run is still in
    /// progress) is [`ForgeError::Rejected`].
    async fn rerun_job(
        &self,
        installation_id: Option<u64>,
        run: &RunKey,
        job_id: u64,
    ) -> Result<(), ForgeError>;
}

/// Whether GitHub's refusal certainly did nothing, so the re-run may be asked again:
/// any 4xx answer, a throttle or refused credentials. A failure of transport or a 5xx
/// may have re-run the job, so it is never asked again.
pub fn refusal_did_nothing(err: &ForgeError) -> bool {
    matches!(
        err,
        ForgeError::Rejected { .. } | ForgeError::Throttled { .. } | ForgeError::Unauthorized
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refusal_that_did_nothing_is_asked_again() {
        let refused = ForgeError::Rejected {
            status: 403,
            message: "in progress".into(),
        };
        assert!(refusal_did_nothing(&refused));
        assert!(refusal_did_nothing(&ForgeError::Throttled {
            retry_after: None
        }));
        let lost = ForgeError::Transient("connection reset".into());
        assert!(!refusal_did_nothing(&lost));
    }
}

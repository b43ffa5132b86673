//! The [`WorkflowRuns`] port on GitHub's REST API: a workflow run's state, and the
//! re-run of one of its jobs (the App needs `actions: write`).
//!
//! GitHub answers a job re-run with 201, and refuses it with 403 while the job's
//! workflow run is still in progress: that refusal is a [`ForgeError::Rejected`], which
//! the reaper takes as "nothing done, ask again later".

use crate::client::GitHubApp;
use crate::http::{Call, Endpoint};
use async_trait::async_trait;
use ephemera_core::ports::ForgeError;
use ephemera_core::ports::WorkflowRuns;
use ephemera_core::rerun::{RunKey, RunState};
use serde::Deserialize;
use tracing::instrument;

const GET_RUN: Endpoint = Endpoint::new("get_workflow_run", &[(404, "not_found")]);
const RERUN_JOB: Endpoint = Endpoint::new("rerun_job", &[]);

/// The fields of GitHub's `workflow-run` schema read here.
#[derive(Deserialize)]
struct RunBody {
    status: Option<String>,
    run_attempt: Option<u32>,
}

impl From<RunBody> for RunState {
    fn from(run: RunBody) -> RunState {
        RunState {
            completed: run.status.as_deref() == Some("completed"),
            run_attempt: run.run_attempt.unwrap_or(1),
        }
    }
}

#[async_trait]
impl WorkflowRuns for GitHubApp {
    #[instrument(skip_all, fields(run = %run))]
    async fn run_state(
        &self,
        installation_id: Option<u64>,
        run: &RunKey,
    ) -> Result<Option<RunState>, ForgeError> {
        let installation_id = self
            .installation_id(installation_id, &run.owner, Some(&run.repo))
            .await?;
        let path = format!(
            "/repos/{}/{}/actions/runs/{}",
            run.owner, run.repo, run.run_id
        );
        let reply = self
            .as_installation(installation_id, &GET_RUN, &Call::get(path))
            .await?;
        if reply.status == 404 {
            return Ok(None);
        }
        let body: RunBody = reply.json(&GET_RUN)?;
        Ok(Some(body.into()))
    }

    #[instrument(skip_all, fields(run = %run, job_id = job_id))]
    async fn rerun_job(
        &self,
        installation_id: Option<u64>,
        run: &RunKey,
        job_id: u64,
    ) -> Result<(), ForgeError> {
        let installation_id = self
            .installation_id(installation_id, &run.owner, Some(&run.repo))
            .await?;
        let path = format!(
            "/repos/{}/{}/actions/jobs/{job_id}/rerun",
            run.owner, run.repo
        );
        self.as_installation(installation_id, &RERUN_JOB, &Call::post(path))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_completed_only_when_github_says_so() {
        let body: RunBody =
            serde_json::from_str(r#"{"id":30433642,"status":"in_progress","run_attempt":1}"#)
                .expect("a workflow-run");
        assert_eq!(
            RunState::from(body),
            RunState {
                completed: false,
                run_attempt: 1
            }
        );
        let body: RunBody = serde_json::from_str(
            r#"{"status":"completed","conclusion":"failure","run_attempt":2}"#,
        )
        .expect("a workflow-run");
        assert!(RunState::from(body).completed);
    }
}

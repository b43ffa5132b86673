//! The [`Forge`] port on GitHub's REST API: just-in-time registration, runner removal,
//! runner and job reads, and the response shapes they decode.
//!
//! Runners live under an organization (`/orgs/{org}`) or a repository
//! (`/repos/{owner}/{repo}`), as [`RunnerScope`] says. Runner groups are named in the
//! config but GitHub wants their ids: an organization's groups are listed once and
//! remembered.

use crate::client::{lock, GitHubApp};
use crate::http::{Call, Endpoint};
use async_trait::async_trait;
use ephemera_core::ports::{
    Forge, ForgeError, ForgeJobState, ForgeRunner, JitConfig, JitRequest, RunnerRemoval,
    RunnerScope,
};
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use tracing::instrument;

/// Every organization and repository has this group; repository runners must use it.
const DEFAULT_RUNNER_GROUP_ID: u64 = 1;
const GROUPS_PER_PAGE: usize = 100;

const GENERATE_JITCONFIG: Endpoint =
    Endpoint::new("generate_jitconfig", &[(409, "already_exists")]);
const DELETE_RUNNER: Endpoint =
    Endpoint::new("delete_runner", &[(404, "not_found"), (422, "busy")]);
const GET_RUNNER: Endpoint = Endpoint::new("get_runner", &[(404, "not_found")]);
const GET_JOB: Endpoint = Endpoint::new("get_job", &[(404, "not_found")]);
const RUNNER_GROUPS: Endpoint = Endpoint::new("runner_groups", &[]);

#[derive(Deserialize)]
struct JitResponse {
    runner: RunnerId,
    encoded_jit_config: SecretString,
}

#[derive(Deserialize)]
struct RunnerId {
    id: u64,
}

#[derive(Deserialize)]
pub(crate) struct RunnerBody {
    id: u64,
    name: String,
    status: String,
    busy: bool,
}

impl From<RunnerBody> for ForgeRunner {
    fn from(runner: RunnerBody) -> ForgeRunner {
        ForgeRunner {
            id: runner.id,
            name: runner.name,
            online: runner.status == "online",
            busy: runner.busy,
        }
    }
}

#[derive(Deserialize)]
struct JobBody {
    status: String,
}

#[derive(Deserialize)]
struct RunnerGroups {
    total_count: usize,
    runner_groups: Vec<RunnerGroup>,
}

#[derive(Deserialize)]
struct RunnerGroup {
    id: u64,
    name: String,
}

/// The API path of the scope's runners' owner.
pub(crate) fn scope_path(scope: &RunnerScope) -> String {
    match &scope.repo {
        Some(repo) => format!("/repos/{}/{}", scope.owner, repo),
        None => format!("/orgs/{}", scope.owner),
    }
}

fn job_state(status: &str) -> ForgeJobState {
    match status {
        "queued" => ForgeJobState::Queued,
        "in_progress" => ForgeJobState::InProgress,
        "completed" => ForgeJobState::Completed,
        _ => ForgeJobState::Other,
    }
}

/// A group by name: exactly, else ignoring case, since the config is typed by hand.
fn find_group(groups: &HashMap<String, u64>, name: &str) -> Option<u64> {
    groups.get(name).copied().or_else(|| {
        groups
            .iter()
            .find(|(candidate, _)| candidate.eq_ignore_ascii_case(name))
            .map(|(_, &id)| id)
    })
}

impl GitHubApp {
    pub(crate) async fn installation_for(&self, scope: &RunnerScope) -> Result<u64, ForgeError> {
        self.installation_id(scope.installation_id, &scope.owner, scope.repo.as_deref())
            .await
    }

    /// The id GitHub wants for `request.runner_group` in this scope.
    async fn runner_group_id(
        &self,
        installation_id: u64,
        scope: &RunnerScope,
        group: &str,
    ) -> Result<u64, ForgeError> {
        if scope.repo.is_some() || group.is_empty() || group.eq_ignore_ascii_case("default") {
            return Ok(DEFAULT_RUNNER_GROUP_ID);
        }
        let org = scope.owner.to_lowercase();
        let cached = lock(&self.runner_groups)
            .get(&org)
            .map(|g| find_group(g, group));
        if let Some(Some(id)) = cached {
            return Ok(id);
        }
        // Not cached, or created since the list was read: read it again.
        let groups = self
            .list_runner_groups(installation_id, &scope.owner)
            .await?;
        let found = find_group(&groups, group);
        lock(&self.runner_groups).insert(org, groups);
        found.ok_or_else(|| ForgeError::Rejected {
            status: 404,
            message: format!(
                "runner group {group:?} does not exist in organization {}",
                scope.owner
            ),
        })
    }

    async fn list_runner_groups(
        &self,
        installation_id: u64,
        org: &str,
    ) -> Result<HashMap<String, u64>, ForgeError> {
        let mut groups = HashMap::new();
        for page in 1.. {
            let path =
                format!("/orgs/{org}/actions/runner-groups?per_page={GROUPS_PER_PAGE}&page={page}");
            let reply = self
                .as_installation(installation_id, &RUNNER_GROUPS, &Call::get(path))
                .await?;
            let listed: RunnerGroups = reply.json(&RUNNER_GROUPS)?;
            let received = listed.runner_groups.len();
            groups.extend(listed.runner_groups.into_iter().map(|g| (g.name, g.id)));
            if received < GROUPS_PER_PAGE || groups.len() >= listed.total_count {
                break;
            }
        }
        Ok(groups)
    }
}

#[async_trait]
impl Forge for GitHubApp {
    #[instrument(skip_all, fields(owner = %scope.owner, runner = %request.name))]
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request: &JitRequest,
    ) -> Result<JitConfig, ForgeError> {
        let installation_id = self.installation_for(scope).await?;
        let group_id = self
            .runner_group_id(installation_id, scope, &request.runner_group)
            .await?;
        let call = Call::post(format!(
            "{}/actions/runners/generate-jitconfig",
            scope_path(scope)
        ))
        .with_json(json!({
            "name": request.name,
            "runner_group_id": group_id,
            "labels": request.labels,
            "work_folder": request.work_folder,
        }));
        let reply = self
            .as_installation(installation_id, &GENERATE_JITCONFIG, &call)
            .await?;
        if reply.status == 409 {
            return Err(ForgeError::AlreadyExists(request.name.clone()));
        }
        let registered: JitResponse = reply.json(&GENERATE_JITCONFIG)?;
        Ok(JitConfig {
            runner_id: registered.runner.id,
            encoded: registered.encoded_jit_config,
        })
    }

    #[instrument(skip_all, fields(owner = %scope.owner, runner_id = runner_id))]
    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError> {
        let installation_id = self.installation_for(scope).await?;
        let call = Call::delete(format!("{}/actions/runners/{runner_id}", scope_path(scope)));
        let reply = self
            .as_installation(installation_id, &DELETE_RUNNER, &call)
            .await?;
        Ok(match reply.status {
            404 => RunnerRemoval::NotFound,
            422 => RunnerRemoval::Busy,
            _ => RunnerRemoval::Removed,
        })
    }

    #[instrument(skip_all, fields(owner = %scope.owner, runner_id = runner_id))]
    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        let installation_id = self.installation_for(scope).await?;
        let call = Call::get(format!("{}/actions/runners/{runner_id}", scope_path(scope)));
        let reply = self
            .as_installation(installation_id, &GET_RUNNER, &call)
            .await?;
        if reply.status == 404 {
            return Ok(None);
        }
        let runner: RunnerBody = reply.json(&GET_RUNNER)?;
        Ok(Some(runner.into()))
    }

    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError> {
        GitHubApp::list_runners(self, scope).await
    }

    async fn find_runner(
        &self,
        scope: &RunnerScope,
        name: &str,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        GitHubApp::find_runner(self, scope, name).await
    }

    #[instrument(skip_all, fields(owner = %owner, repo = %repo, job_id = job_id))]
    async fn job_state(
        &self,
        installation_id: Option<u64>,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError> {
        let installation_id = self
            .installation_id(installation_id, owner, Some(repo))
            .await?;
        let call = Call::get(format!("/repos/{owner}/{repo}/actions/jobs/{job_id}"));
        let reply = self
            .as_installation(installation_id, &GET_JOB, &call)
            .await?;
        if reply.status == 404 {
            return Ok(None);
        }
        let job: JobBody = reply.json(&GET_JOB)?;
        Ok(Some(job_state(&job.status)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(repo: Option<&str>) -> RunnerScope {
        RunnerScope {
            installation_id: Some(1),
            owner: "acme".into(),
            repo: repo.map(str::to_owned),
        }
    }

    #[test]
    fn scope_path_is_repository_or_organization() {
        assert_eq!(scope_path(&scope(Some("app"))), "/repos/acme/app");
        assert_eq!(scope_path(&scope(None)), "/orgs/acme");
    }

    #[test]
    fn job_statuses_map_to_forge_states() {
        assert_eq!(job_state("queued"), ForgeJobState::Queued);
        assert_eq!(job_state("in_progress"), ForgeJobState::InProgress);
        assert_eq!(job_state("completed"), ForgeJobState::Completed);
        assert_eq!(job_state("waiting"), ForgeJobState::Other);
    }

    #[test]
    fn group_names_match_exactly_then_ignoring_case() {
        let groups = HashMap::from([("Linux".to_owned(), 5), ("linux".to_owned(), 6)]);
        assert_eq!(find_group(&groups, "linux"), Some(6));
        let groups = HashMap::from([("GPU".to_owned(), 9)]);
        assert_eq!(find_group(&groups, "gpu"), Some(9));
        assert_eq!(find_group(&groups, "cpu"), None);
    }
}

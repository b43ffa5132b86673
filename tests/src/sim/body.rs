//! The JSON bodies GitHub answers with for runners and jobs.
//!
//! Shapes follow GitHub's REST description (`runner`, `job` schemas); the encoded JIT
//! config is in [`super::jit`].

pub use super::jit::{decode_jit_config, encode_jit_config};

use super::state::{SimJob, SimRunner};
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The API's base URL as it appears in `url` fields.
pub const API: &str = "https://api.github.com";

const READ_ONLY_LABELS: [&str; 4] = ["self-hosted", "linux", "x64", "arm64"];

pub fn timestamp(at: OffsetDateTime) -> String {
    at.replace_nanosecond(0)
        .unwrap_or(at)
        .format(&Rfc3339)
        .unwrap_or_default()
}

fn optional_timestamp(at: Option<OffsetDateTime>) -> Value {
    at.map(timestamp).map(Value::String).unwrap_or(Value::Null)
}

/// A stable small id for a label name.
fn label_id(name: &str) -> u64 {
    name.to_ascii_lowercase()
        .bytes()
        .fold(7u64, |h, b| (h.wrapping_mul(31) + u64::from(b)) % 1_000_000)
}

/// GitHub's `runner` object.
pub fn runner(runner: &SimRunner) -> Value {
    let labels: Vec<Value> = runner
        .labels
        .iter()
        .map(|name| {
            let read_only = READ_ONLY_LABELS
                .iter()
                .any(|l| l.eq_ignore_ascii_case(name));
            json!({
                "id": label_id(name),
                "name": name,
                "type": if read_only { "read-only" } else { "custom" },
            })
        })
        .collect();
    json!({
        "id": runner.id,
        "runner_group_id": runner.runner_group_id,
        "name": runner.name,
        "os": runner.os,
        "status": runner.status,
        "busy": runner.busy,
        "ephemeral": runner.ephemeral,
        "labels": labels,
    })
}

/// GitHub's `job` object (also the `workflow_job` of webhooks).
pub fn job(job: &SimJob) -> Value {
    let repo_url = format!("{API}/repos/{}/{}", job.owner, job.repo);
    let html = format!("https://github.com/{}/{}", job.owner, job.repo);
    json!({
        "id": job.id,
        "run_id": job.run_id,
        "run_url": format!("{repo_url}/actions/runs/{}", job.run_id),
        "run_attempt": job.run_attempt,
        "node_id": format!("CR_sim{}", job.id),
        "head_sha": "0123456789abcdef0123456789abcdef01234567",
        "head_branch": "main",
        "url": format!("{repo_url}/actions/jobs/{}", job.id),
        "html_url": format!("{html}/actions/runs/{}/job/{}", job.run_id, job.id),
        "status": job.status,
        "conclusion": job.conclusion,
        "created_at": timestamp(job.created_at),
        "started_at": timestamp(job.started_at.unwrap_or(job.created_at)),
        "completed_at": optional_timestamp(job.completed_at),
        "name": "build",
        "workflow_name": "CI",
        "steps": [],
        "check_run_url": format!("{repo_url}/check-runs/{}", job.id),
        "labels": job.labels,
        "runner_id": job.runner_id,
        "runner_name": job.runner_name,
        "runner_group_id": job.runner_group_id,
        "runner_group_name": job.runner_group_id.map(|_| "Default"),
    })
}

/// The installation object of `GET …/installation`.
pub fn installation(id: u64, app_id: u64, login: &str) -> Value {
    json!({
        "id": id,
        "app_id": app_id,
        "app_slug": "ephemera-sim",
        "target_id": label_id(login),
        "target_type": "Organization",
        "single_file_name": null,
        "account": account(login),
        "repository_selection": "all",
        "access_tokens_url": format!("{API}/app/installations/{id}/access_tokens"),
        "html_url": format!("https://github.com/organizations/{login}/settings/installations/{id}"),
        "repositories_url": format!("{API}/installation/repositories"),
        "permissions": permissions(),
        "events": ["workflow_job"],
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "suspended_by": null,
        "suspended_at": null,
    })
}

/// GitHub's `simple-user` object for an organization account.
pub fn account(login: &str) -> Value {
    let id = label_id(login);
    let api = format!("{API}/users/{login}");
    json!({
        "login": login,
        "id": id,
        "node_id": format!("O_sim{id}"),
        "type": "Organization",
        "site_admin": false,
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "gravatar_id": "",
        "url": api,
        "html_url": format!("https://github.com/{login}"),
        "events_url": format!("{api}/events{{/privacy}}"),
        "followers_url": format!("{api}/followers"),
        "following_url": format!("{api}/following{{/other_user}}"),
        "gists_url": format!("{api}/gists{{/gist_id}}"),
        "organizations_url": format!("{api}/orgs"),
        "received_events_url": format!("{api}/received_events"),
        "repos_url": format!("{api}/repos"),
        "starred_url": format!("{api}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{api}/subscriptions"),
    })
}

pub fn permissions() -> Value {
    json!({ "actions": "write", "administration": "write", "organization_self_hosted_runners": "write", "metadata": "read" })
}

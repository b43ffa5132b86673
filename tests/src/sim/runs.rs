//! Workflow runs: `GET /repos/{owner}/{repo}/actions/runs/{run_id}` and
//! `POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun` (201 with an empty object;
//! 403 while the run is in progress; the re-run's `queued` job gets its webhook), and
//! the spot interruption a test plays on a runner in the middle of its job.
//!
//! An interruption has two steps, as on EC2: [`SimHandle::spot_interruption_warning`]
//! gives EC2's warning (the EventBridge event the test hands to the reaper), and
//! [`SimHandle::reclaim`], two minutes later in simulated time, fails the job with
//! GitHub's message, terminates the instance and gives the state-change event.

use super::auth::{require_token, ApiError};
use super::body::{self, API};
use super::routes::Sim;
use super::state::{RerunRefused, RunView};
use super::{webhook, SimHandle};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Value};
use time::OffsetDateTime;

/// How long before EC2 reclaims a spot instance its warning comes.
pub const WARNING_AHEAD: time::Duration = time::Duration::minutes(2);

pub(crate) async fn get_run(
    State(sim): Sim,
    Path((owner, repo, run_id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let mut state = sim.lock();
    state.hit("GET /repos/{owner}/{repo}/actions/runs/{run_id}");
    require_token(&state, &headers)?;
    run_id
        .parse::<u64>()
        .ok()
        .and_then(|id| state.run(&owner, &repo, id))
        .map(|run| Json(workflow_run(&run)))
        .ok_or_else(ApiError::not_found)
}

pub(crate) async fn rerun_job(
    State(sim): Sim,
    Path((owner, repo, job_id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let job = {
        let mut state = sim.lock();
        state.hit("POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun");
        require_token(&state, &headers)?;
        let id = job_id.parse::<u64>().map_err(|_| ApiError::not_found())?;
        let ours = state.jobs.get(&id).is_some_and(|j| {
            j.owner.eq_ignore_ascii_case(&owner) && j.repo.eq_ignore_ascii_case(&repo)
        });
        if !ours {
            return Err(ApiError::not_found());
        }
        state
            .rerun_job(id, sim.config.job_duration)
            .map_err(|refused| match refused {
                RerunRefused::NotFound => ApiError::not_found(),
                RerunRefused::InProgress => ApiError::new(
                    StatusCode::FORBIDDEN,
                    "This workflow run cannot be rerun while it is in progress.",
                ),
            })?
    };
    webhook::deliver(&sim, "queued", &job).await;
    Ok((StatusCode::CREATED, Json(json!({}))))
}

/// GitHub's `workflow-run` object (the required fields, and `run_attempt`).
pub fn workflow_run(run: &RunView) -> Value {
    let repo_url = format!("{API}/repos/{}/{}", run.owner, run.repo);
    let run_url = format!("{repo_url}/actions/runs/{}", run.run_id);
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let repository = minimal_repository(&run.owner, &run.repo, run.run_id);
    json!({
        "id": run.run_id,
        "name": "CI",
        "node_id": format!("WFR_sim{}", run.run_id),
        "head_branch": "main",
        "head_sha": sha,
        "path": ".github/workflows/ci.yml",
        "display_title": "CI",
        "run_number": run.run_id % 10_000,
        "run_attempt": run.run_attempt,
        "event": "push",
        "status": run.status,
        "conclusion": run.conclusion,
        "workflow_id": 161335,
        "url": run_url,
        "html_url": format!("https://github.com/{}/{}/actions/runs/{}", run.owner, run.repo, run.run_id),
        "pull_requests": [],
        "created_at": body::timestamp(run.created_at),
        "updated_at": body::timestamp(run.updated_at),
        "jobs_url": format!("{run_url}/jobs"),
        "logs_url": format!("{run_url}/logs"),
        "check_suite_url": format!("{repo_url}/check-suites/{}", run.run_id),
        "artifacts_url": format!("{run_url}/artifacts"),
        "cancel_url": format!("{run_url}/cancel"),
        "rerun_url": format!("{run_url}/rerun"),
        "workflow_url": format!("{repo_url}/actions/workflows/161335"),
        "head_commit": {
            "id": sha,
            "tree_id": sha,
            "message": "Build",
            "timestamp": body::timestamp(run.created_at),
            "author": { "name": "Octo Cat", "email": "octocat@github.com" },
            "committer": { "name": "Octo Cat", "email": "octocat@github.com" },
        },
        "repository": repository,
        "head_repository": repository,
    })
}

/// GitHub's `minimal-repository` object.
fn minimal_repository(owner: &str, name: &str, run_id: u64) -> Value {
    let url = format!("{API}/repos/{owner}/{name}");
    let mut repo = json!({
        "id": run_id % 1_000_000,
        "node_id": format!("R_sim{}", run_id % 1_000_000),
        "name": name,
        "full_name": format!("{owner}/{name}"),
        "owner": body::account(owner),
        "private": true,
        "html_url": format!("https://github.com/{owner}/{name}"),
        "description": null,
        "fork": false,
        "url": url,
    });
    let templates = [
        ("archive_url", "/{archive_format}{/ref}"),
        ("assignees_url", "/assignees{/user}"),
        ("blobs_url", "/git/blobs{/sha}"),
        ("branches_url", "/branches{/branch}"),
        ("collaborators_url", "/collaborators{/collaborator}"),
        ("comments_url", "/comments{/number}"),
        ("commits_url", "/commits{/sha}"),
        ("compare_url", "/compare/{base}...{head}"),
        ("contents_url", "/contents/{+path}"),
        ("contributors_url", "/contributors"),
        ("deployments_url", "/deployments"),
        ("downloads_url", "/downloads"),
        ("events_url", "/events"),
        ("forks_url", "/forks"),
        ("git_commits_url", "/git/commits{/sha}"),
        ("git_refs_url", "/git/refs{/sha}"),
        ("git_tags_url", "/git/tags{/sha}"),
        ("hooks_url", "/hooks"),
        ("issue_comment_url", "/issues/comments{/number}"),
        ("issue_events_url", "/issues/events{/number}"),
        ("issues_url", "/issues{/number}"),
        ("keys_url", "/keys{/key_id}"),
        ("labels_url", "/labels{/name}"),
        ("languages_url", "/languages"),
        ("merges_url", "/merges"),
        ("milestones_url", "/milestones{/number}"),
        (
            "notifications_url",
            "/notifications{?since,all,participating}",
        ),
        ("pulls_url", "/pulls{/number}"),
        ("releases_url", "/releases{/id}"),
        ("stargazers_url", "/stargazers"),
        ("statuses_url", "/statuses/{sha}"),
        ("subscribers_url", "/subscribers"),
        ("subscription_url", "/subscription"),
        ("tags_url", "/tags"),
        ("teams_url", "/teams"),
        ("trees_url", "/git/trees{/sha}"),
    ];
    for (field, tail) in templates {
        repo[field] = Value::String(format!("{url}{tail}"));
    }
    repo
}

/// A spot interruption under way: EC2 warned, the instance is reclaimed two minutes
/// later.
#[derive(Debug, Clone)]
pub struct SpotInterruption {
    pub job_id: u64,
    pub instance_id: String,
    pub warned_at: OffsetDateTime,
    /// EC2's `EC2 Spot Instance Interruption Warning`, as EventBridge delivers it.
    pub warning: Value,
}

/// An EC2 event about `instance_id` as EventBridge delivers it.
pub fn ec2_event(detail_type: &str, instance_id: &str, at: OffsetDateTime, detail: Value) -> Value {
    let mut detail = detail;
    detail["instance-id"] = Value::String(instance_id.to_owned());
    json!({
        "version": "0",
        "id": uuid_like(instance_id, at),
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": "123456789012",
        "time": body::timestamp(at),
        "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}")],
        "detail": detail,
    })
}

fn uuid_like(instance_id: &str, at: OffsetDateTime) -> String {
    let n = at.unix_timestamp().unsigned_abs();
    let tail: String = instance_id.chars().rev().take(12).collect();
    format!("{:08x}-0000-4000-8000-{tail:0>12}", n & 0xffff_ffff)
}

impl SimHandle {
    /// EC2's warning that it reclaims the spot instance of the runner running `job_id`
    /// in two minutes (simulated time: nothing happens until [`SimHandle::reclaim`]).
    pub fn spot_interruption_warning(&self, job_id: u64) -> anyhow::Result<SpotInterruption> {
        let instance_id = self
            .shared
            .lock()
            .instance_running(job_id)
            .ok_or_else(|| anyhow::anyhow!("job {job_id} is not running on an instance"))?;
        let warned_at = OffsetDateTime::now_utc();
        let detail = json!({ "instance-action": "terminate" });
        let warning = ec2_event(
            "EC2 Spot Instance Interruption Warning",
            &instance_id,
            warned_at,
            detail,
        );
        Ok(SpotInterruption {
            job_id,
            instance_id,
            warned_at,
            warning,
        })
    }

    /// EC2 reclaims the instance: the job fails with GitHub's shutdown-signal message
    /// (its `completed` webhook is sent), the instance is terminated, and EC2's
    /// state-change event (dated two minutes after the warning) is returned.
    pub async fn reclaim(&self, interruption: &SpotInterruption) -> anyhow::Result<Value> {
        let job = self
            .shared
            .lock()
            .interrupt_job(interruption.job_id)
            .ok_or_else(|| anyhow::anyhow!("job {} is not running", interruption.job_id))?;
        let endpoint = self
            .shared
            .config
            .aws_endpoint
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the simulator watches no EC2 endpoint"))?;
        let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&endpoint)).await;
        aws_sdk_ec2::Client::new(&sdk)
            .terminate_instances()
            .instance_ids(&interruption.instance_id)
            .send()
            .await?;
        webhook::deliver(&self.shared, "completed", &job).await;
        let at = interruption.warned_at + WARNING_AHEAD;
        let detail = json!({ "state": "terminated" });
        Ok(ec2_event(
            "EC2 Instance State-change Notification",
            &interruption.instance_id,
            at,
            detail,
        ))
    }
}

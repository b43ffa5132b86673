//! The self-hosted runner routes, for organizations and repositories alike:
//! `generate-jitconfig`, list (paginated), get, and delete (refused while busy).

use super::auth::{require_token, ApiError};
use super::body;
use super::routes::Sim;
use super::state::{RunnerError, RunnerScope};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

/// The id of the one runner group, `Default`.
pub const DEFAULT_GROUP: u64 = 1;

/// GitHub's longest runner name (actions/runner#1710: "Runner names can only be 64
/// characters in length").
pub const MAX_RUNNER_NAME: usize = 64;

fn org(org: String) -> RunnerScope {
    RunnerScope {
        owner: org,
        repo: None,
    }
}

fn repo((owner, repo): (String, String)) -> RunnerScope {
    RunnerScope {
        owner,
        repo: Some(repo),
    }
}

/// `orgs/{org}` or `repos/{owner}/{repo}`, for route names in counters.
fn route(scope: &RunnerScope, method: &str, rest: &str) -> String {
    let base = match scope.repo {
        None => "/orgs/{org}/actions/runners",
        Some(_) => "/repos/{owner}/{repo}/actions/runners",
    };
    format!("{method} {base}{rest}")
}

// ------------------------------------------------------------------------- generate-jitconfig

pub async fn org_jit(s: Sim, Path(o): Path<String>, h: HeaderMap, b: String) -> Response {
    jit(s, org(o), h, b).await
}

pub async fn repo_jit(
    s: Sim,
    Path(p): Path<(String, String)>,
    h: HeaderMap,
    b: String,
) -> Response {
    jit(s, repo(p), h, b).await
}

struct JitRequest {
    name: String,
    runner_group_id: u64,
    labels: Vec<String>,
    work_folder: String,
}

fn parse_jit_request(raw: &str) -> Result<JitRequest, ApiError> {
    let invalid = |what: &str| ApiError::unprocessable(format!("Invalid request.\n\n{what}"));
    let value: Value = serde_json::from_str(raw)
        .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "Problems parsing JSON"))?;
    let name = match value.get("name") {
        None => return Err(invalid("\"name\" wasn't supplied.")),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(_) => return Err(invalid("Invalid property /name: not a non-empty string.")),
    };
    let length = name.chars().count();
    if length > MAX_RUNNER_NAME {
        return Err(ApiError::validation_failed(json!([format!(
            "Name is too long (maximum is {MAX_RUNNER_NAME} characters, got {length})"
        )])));
    }
    let runner_group_id = match value.get("runner_group_id") {
        None => return Err(invalid("\"runner_group_id\" wasn't supplied.")),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| invalid("Invalid property /runner_group_id: not an integer."))?,
    };
    let labels = match value.get("labels") {
        None => return Err(invalid("\"labels\" wasn't supplied.")),
        Some(Value::Array(items)) => items
            .iter()
            .map(|l| {
                l.as_str()
                    .filter(|s| !s.trim().is_empty())
                    .map(str::to_owned)
            })
            .collect::<Option<Vec<String>>>()
            .filter(|l| (1..=100).contains(&l.len()))
            .ok_or_else(|| invalid("Invalid property /labels: 1 to 100 non-empty strings."))?,
        Some(_) => return Err(invalid("Invalid property /labels: not an array.")),
    };
    let work_folder = match value.get("work_folder") {
        None => "_work".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(invalid("Invalid property /work_folder: not a string.")),
    };
    Ok(JitRequest {
        name,
        runner_group_id,
        labels,
        work_folder,
    })
}

async fn jit(State(sim): Sim, scope: RunnerScope, headers: HeaderMap, raw: String) -> Response {
    let mut state = sim.lock();
    state.hit(&route(&scope, "POST", "/generate-jitconfig"));
    let answer = require_token(&state, &headers)
        .and_then(|_| parse_jit_request(&raw))
        .and_then(|request| {
            if request.runner_group_id != DEFAULT_GROUP {
                return Err(ApiError::not_found());
            }
            let name = request.name.clone();
            let runner = state
                .register_runner(scope, &name, request.labels, request.runner_group_id)
                .map_err(|_| {
                    ApiError::new(
                        StatusCode::CONFLICT,
                        format!("Already exists - A runner with the name {name} already exists."),
                    )
                })?;
            Ok(json!({
                "runner": body::runner(&runner),
                "encoded_jit_config": body::encode_jit_config(&runner, &request.work_folder),
            }))
        });
    match answer {
        Ok(answer) => (StatusCode::CREATED, Json(answer)).into_response(),
        Err(error) => error.into_response(),
    }
}

// ------------------------------------------------------------------------- list

#[derive(Deserialize)]
pub struct Page {
    per_page: Option<usize>,
    page: Option<usize>,
    name: Option<String>,
}

pub async fn org_list(s: Sim, Path(o): Path<String>, q: Query<Page>, h: HeaderMap) -> Response {
    list(s, org(o), q, h)
}

pub async fn repo_list(
    s: Sim,
    Path(p): Path<(String, String)>,
    q: Query<Page>,
    h: HeaderMap,
) -> Response {
    list(s, repo(p), q, h)
}

fn list(
    State(sim): Sim,
    scope: RunnerScope,
    Query(page): Query<Page>,
    headers: HeaderMap,
) -> Response {
    let mut state = sim.lock();
    state.hit(&route(&scope, "GET", ""));
    if let Err(error) = require_token(&state, &headers) {
        return error.into_response();
    }
    let per_page = page.per_page.unwrap_or(30).clamp(1, 100);
    let number = page.page.unwrap_or(1).max(1);
    let matching: Vec<Value> = state
        .runners_in(&scope)
        .into_iter()
        .filter(|r| page.name.as_deref().is_none_or(|n| r.name == n))
        .map(body::runner)
        .collect();
    let total = matching.len();
    let runners: Vec<Value> = matching
        .into_iter()
        .skip((number - 1) * per_page)
        .take(per_page)
        .collect();
    let mut response = Json(json!({ "total_count": total, "runners": runners })).into_response();
    if number * per_page < total {
        let path = match &scope.repo {
            None => format!("/orgs/{}/actions/runners", scope.owner),
            Some(repo) => format!("/repos/{}/{repo}/actions/runners", scope.owner),
        };
        let next = format!(
            "<{}{path}?per_page={per_page}&page={}>; rel=\"next\"",
            sim.url,
            number + 1
        );
        if let Ok(value) = next.parse() {
            response.headers_mut().insert(header::LINK, value);
        }
    }
    response
}

// ------------------------------------------------------------------------- get, delete

pub async fn org_get(s: Sim, Path((o, id)): Path<(String, String)>, h: HeaderMap) -> Response {
    get(s, org(o), &id, h)
}

pub async fn repo_get(
    s: Sim,
    Path((o, r, id)): Path<(String, String, String)>,
    h: HeaderMap,
) -> Response {
    get(s, repo((o, r)), &id, h)
}

fn get(State(sim): Sim, scope: RunnerScope, id: &str, headers: HeaderMap) -> Response {
    let mut state = sim.lock();
    state.hit(&route(&scope, "GET", "/{runner_id}"));
    require_token(&state, &headers)
        .and_then(|_| {
            id.parse::<u64>()
                .ok()
                .and_then(|id| state.runner_in(&scope, id))
                .map(|r| Json(body::runner(r)))
                .ok_or_else(ApiError::not_found)
        })
        .into_response()
}

pub async fn org_delete(s: Sim, Path((o, id)): Path<(String, String)>, h: HeaderMap) -> Response {
    delete(s, org(o), &id, h)
}

pub async fn repo_delete(
    s: Sim,
    Path((o, r, id)): Path<(String, String, String)>,
    h: HeaderMap,
) -> Response {
    delete(s, repo((o, r)), &id, h)
}

fn delete(State(sim): Sim, scope: RunnerScope, id: &str, headers: HeaderMap) -> Response {
    let mut state = sim.lock();
    state.hit(&route(&scope, "DELETE", "/{runner_id}"));
    if let Err(error) = require_token(&state, &headers) {
        return error.into_response();
    }
    let Ok(id) = id.parse::<u64>() else {
        return ApiError::not_found().into_response();
    };
    match state.delete_runner(&scope, id) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(RunnerError::NotFound | RunnerError::NameTaken) => {
            ApiError::not_found().into_response()
        }
        Err(RunnerError::Busy(name)) => ApiError::unprocessable(format!(
            "Bad request - Runner \"{name}\" is still running a job\""
        ))
        .into_response(),
    }
}

//! The router: App and installation routes, the jobs route, and the `/_sim` control
//! routes the demo and the tests drive the simulator with. Runner routes are in
//! [`super::runners`].

use super::auth::{require_token, ApiError};
use super::runners;
use super::{app, body, deliveries, releases, runs, IssuedToken, Shared};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

pub type Sim = State<Arc<Shared>>;

pub fn router(shared: Arc<Shared>) -> Router {
    let org = "/orgs/{org}/actions";
    let repo = "/repos/{owner}/{repo}/actions";
    Router::new()
        .route(
            "/app/installations/{installation_id}/access_tokens",
            post(access_token),
        )
        .route("/rate_limit", get(rate_limit))
        .route("/app", get(app::get_app))
        .route("/app/hook/config", get(app::get_hook_config))
        .route("/app/hook/deliveries", get(deliveries::list))
        .route("/app/hook/deliveries/{delivery_id}", get(deliveries::get))
        .route(
            "/app/hook/deliveries/{delivery_id}/attempts",
            post(deliveries::redeliver),
        )
        .route("/app/installations", get(releases::installations))
        .route(
            "/repos/{owner}/{repo}/releases/latest",
            get(releases::latest),
        )
        .route(
            "/repos/{owner}/{repo}/releases/tags/{tag}",
            get(releases::by_tag),
        )
        .route(
            &format!("{}{{tag}}/{{name}}", releases::DOWNLOADS),
            get(releases::download),
        )
        .route("/_sim/runner-releases", post(releases::control_publish))
        .route("/orgs/{org}/installation", get(org_installation))
        .route("/repos/{owner}/{repo}/installation", get(repo_installation))
        .route(
            &format!("{org}/runners/generate-jitconfig"),
            post(runners::org_jit),
        )
        .route(
            &format!("{repo}/runners/generate-jitconfig"),
            post(runners::repo_jit),
        )
        .route(&format!("{org}/runners"), get(runners::org_list))
        .route(&format!("{repo}/runners"), get(runners::repo_list))
        .route(
            &format!("{org}/runners/{{runner_id}}"),
            get(runners::org_get).delete(runners::org_delete),
        )
        .route(
            &format!("{repo}/runners/{{runner_id}}"),
            get(runners::repo_get).delete(runners::repo_delete),
        )
        .route(&format!("{org}/runner-groups"), get(runner_groups))
        .route(&format!("{repo}/jobs/{{job_id}}"), get(job))
        .route(
            &format!("{repo}/jobs/{{job_id}}/rerun"),
            post(runs::rerun_job),
        )
        .route(&format!("{repo}/runs/{{run_id}}"), get(runs::get_run))
        .route("/_sim/jobs", post(control_create_job))
        .route("/_sim/state", get(control_state))
        .route("/_sim/webhook-url", post(control_webhook_url))
        .fallback(|| async { ApiError::not_found() })
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            super::intercept::intercept,
        ))
        .with_state(shared)
}

async fn access_token(
    State(sim): Sim,
    Path(installation_id): Path<String>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    sim.lock()
        .hit("POST /app/installations/{installation_id}/access_tokens");
    let app_id = sim.verify_app(&headers)?;
    if installation_id.parse::<u64>().ok() != Some(sim.config.installation_id) {
        return Err(ApiError::not_found());
    }
    let token = format!("ghs_{}", URL_SAFE_NO_PAD.encode(rand::random::<[u8; 27]>()));
    let expires_at = OffsetDateTime::now_utc() + time::Duration::hours(1);
    sim.lock().tokens.insert(
        token.clone(),
        IssuedToken {
            installation_id: sim.config.installation_id,
            app_id,
            expires_at,
        },
    );
    let answer = json!({
        "token": token,
        "expires_at": body::timestamp(expires_at),
        "permissions": body::permissions(),
        "repository_selection": "all",
    });
    Ok((StatusCode::CREATED, Json(answer)))
}

async fn org_installation(
    State(sim): Sim,
    Path(org): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    sim.lock().hit("GET /orgs/{org}/installation");
    let app_id = sim.verify_app(&headers)?;
    let settings = sim.lock().app_settings(app_id, sim.config.app_id);
    if !settings.installed_on(&org, None) {
        return Err(ApiError::not_found());
    }
    Ok(Json(body::installation(
        sim.config.installation_id,
        app_id,
        &org,
    )))
}

async fn repo_installation(
    State(sim): Sim,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    sim.lock().hit("GET /repos/{owner}/{repo}/installation");
    let app_id = sim.verify_app(&headers)?;
    let settings = sim.lock().app_settings(app_id, sim.config.app_id);
    if !settings.installed_on(&owner, Some(&repo)) {
        return Err(ApiError::not_found());
    }
    Ok(Json(body::installation(
        sim.config.installation_id,
        app_id,
        &owner,
    )))
}

/// `GET /rate_limit`: the caller's buckets (an installation token's, or the App's for a
/// JWT); it costs nothing (`buckets.rs`).
async fn rate_limit(State(sim): Sim, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    let authorization = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let (credential, _) = sim.bucket_owner(authorization);
    if credential != "app" {
        let state = sim.lock();
        require_token(&state, &headers)?;
    }
    Ok(Json(sim.buckets.overview(&credential)))
}

async fn runner_groups(
    State(sim): Sim,
    Path(org): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let mut state = sim.lock();
    state.hit("GET /orgs/{org}/actions/runner-groups");
    require_token(&state, &headers)?;
    Ok(Json(json!({
        "total_count": 1,
        "runner_groups": [{
            "id": runners::DEFAULT_GROUP,
            "name": "Default",
            "visibility": "all",
            "default": true,
            "inherited": false,
            "allows_public_repositories": false,
            "restricted_to_workflows": false,
            "selected_workflows": [],
            "workflow_restrictions_read_only": false,
            "runners_url": format!("{}/orgs/{org}/actions/runner-groups/1/runners", sim.url),
        }],
    })))
}

async fn job(
    State(sim): Sim,
    Path((owner, repo, job_id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let mut state = sim.lock();
    state.hit("GET /repos/{owner}/{repo}/actions/jobs/{job_id}");
    require_token(&state, &headers)?;
    job_id
        .parse::<u64>()
        .ok()
        .and_then(|id| state.jobs.get(&id))
        .filter(|j| j.owner.eq_ignore_ascii_case(&owner) && j.repo.eq_ignore_ascii_case(&repo))
        .map(|j| Json(body::job(j)))
        .ok_or_else(ApiError::not_found)
}

#[derive(Deserialize)]
struct NewJob {
    owner: String,
    repo: String,
    labels: Vec<String>,
    duration_ms: Option<u64>,
}

async fn control_create_job(State(sim): Sim, Json(new): Json<NewJob>) -> (StatusCode, Json<Value>) {
    let duration = new.duration_ms.map(Duration::from_millis);
    let job = sim
        .create_job(&new.owner, &new.repo, new.labels, duration)
        .await;
    let answer = json!({ "id": job.id, "run_id": job.run_id });
    (StatusCode::CREATED, Json(answer))
}

async fn control_state(State(sim): Sim) -> Json<Value> {
    let snapshot = sim.lock().clone();
    Json(serde_json::to_value(snapshot).unwrap_or(Value::Null))
}

#[derive(Deserialize)]
struct WebhookUrl {
    url: String,
}

async fn control_webhook_url(State(sim): Sim, Json(new): Json<WebhookUrl>) -> StatusCode {
    *sim.webhook_url.lock().expect("webhook url lock") = Some(new.url);
    StatusCode::NO_CONTENT
}

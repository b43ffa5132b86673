//! The App's own routes, answered to its JWT as GitHub does: `GET /app` (its
//! description, permissions and events) and `GET /app/hook/config` (its webhook URL,
//! the secret masked), plus what a test changes about the App's settings: its
//! permissions, its events, and the accounts it is not installed on (their
//! `…/installation` routes answer 404).

use super::auth::ApiError;
use super::body;
use super::routes::Sim;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The App's settings page, as far as ephemera cares.
#[derive(Debug, Clone, Serialize)]
pub struct AppSettings {
    /// Permission name → `read` or `write`.
    pub permissions: BTreeMap<String, String>,
    /// Subscribed webhook events.
    pub events: Vec<String>,
    /// Organizations or `owner/repo` repositories (lower-cased) the App is not
    /// installed on.
    pub not_installed_on: BTreeSet<String>,
}

impl Default for AppSettings {
    fn default() -> AppSettings {
        let permissions = body::permissions()
            .as_object()
            .map(|map| {
                map.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        AppSettings {
            permissions,
            events: vec!["workflow_job".to_owned()],
            not_installed_on: BTreeSet::new(),
        }
    }
}

impl AppSettings {
    /// Whether the App is installed on the organization `owner`, or the repository
    /// `owner/repo` (an App not installed on an organization is on none of its
    /// repositories).
    pub fn installed_on(&self, owner: &str, repo: Option<&str>) -> bool {
        let owner = owner.to_lowercase();
        if self.not_installed_on.contains(&owner) {
            return false;
        }
        match repo {
            Some(repo) => !self
                .not_installed_on
                .contains(&format!("{owner}/{}", repo.to_lowercase())),
            None => true,
        }
    }
}

/// `GET /app`.
pub(crate) async fn get_app(State(sim): Sim, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    sim.lock().hit("GET /app");
    let app_id = sim.verify_app(&headers)?;
    let settings = sim.lock().app_settings(app_id, sim.config.app_id);
    let owner = "ephemera-sim-owner";
    // Every App has a slug of its own: the first App's is `ephemera-sim`.
    let slug = if app_id == sim.config.app_id {
        "ephemera-sim".to_owned()
    } else {
        format!("ephemera-sim-{app_id}")
    };
    Ok(Json(json!({
        "id": app_id,
        "slug": slug,
        "node_id": format!("A_sim{app_id}"),
        "client_id": format!("Iv1.sim{app_id}"),
        "owner": body::account(owner),
        "name": slug,
        "description": "The GitHub simulator's App",
        "external_url": format!("https://github.com/apps/{slug}"),
        "html_url": format!("https://github.com/apps/{slug}"),
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "permissions": settings.permissions,
        "events": settings.events,
        "installations_count": 1,
    })))
}

/// `GET /app/hook/config`: the URL deliveries go to; GitHub masks the secret.
pub(crate) async fn get_hook_config(
    State(sim): Sim,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    sim.lock().hit("GET /app/hook/config");
    sim.verifier().verify(&headers)?;
    let url = sim
        .webhook_url
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(Json(json!({
        "url": url.unwrap_or_default(),
        "content_type": "json",
        "secret": "********",
        "insecure_ssl": "0",
    })))
}

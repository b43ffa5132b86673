//! What the App itself is, as GitHub answers its JWT: `GET /app` (the App's name,
//! permissions and subscribed events), `GET /app/hook/config` (where its webhook goes)
//! and whether it is installed on an account (`GET /orgs/{org}/installation`,
//! `GET /repos/{owner}/{repo}/installation`). `ephemera doctor` reads these.
//!
//! `GET /app` answers 401 when the JWT is refused (wrong key or App id); the
//! installation routes answer 404 when the App is not installed there.

use crate::client::GitHubApp;
use crate::http::{Call, Endpoint};
use ephemera_core::ports::ForgeError;
use serde::Deserialize;
use std::collections::BTreeMap;

const GET_APP: Endpoint = Endpoint::new("get_app", &[]);
const HOOK_CONFIG: Endpoint = Endpoint::new("hook_config", &[]);
const FIND_INSTALLATION: Endpoint = Endpoint::new("installation", &[(404, "not_found")]);

/// The App as `GET /app` describes it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct AppDescription {
    pub id: u64,
    pub slug: Option<String>,
    pub name: String,
    /// Permission name → `read` or `write`.
    #[serde(default)]
    pub permissions: BTreeMap<String, String>,
    /// The webhook events the App subscribes to.
    #[serde(default)]
    pub events: Vec<String>,
}

#[derive(Deserialize)]
struct HookConfig {
    url: Option<String>,
}

#[derive(Deserialize)]
struct InstallationId {
    id: u64,
}

impl GitHubApp {
    /// `GET /app` with the App JWT.
    pub async fn describe_app(&self) -> Result<AppDescription, ForgeError> {
        let reply = self
            .send_as_app(&GET_APP, &Call::get("/app".to_owned()))
            .await?;
        reply.json(&GET_APP)
    }

    /// The App's webhook URL (`GET /app/hook/config`); `None` when none is set.
    pub async fn webhook_url(&self) -> Result<Option<String>, ForgeError> {
        let reply = self
            .send_as_app(&HOOK_CONFIG, &Call::get("/app/hook/config".to_owned()))
            .await?;
        let config: HookConfig = reply.json(&HOOK_CONFIG)?;
        Ok(config.url.filter(|url| !url.is_empty()))
    }

    /// The App's installation on the organization `owner` (or the repository
    /// `owner/repo`); `None` when it is not installed there (404).
    pub async fn find_installation(
        &self,
        owner: &str,
        repo: Option<&str>,
    ) -> Result<Option<u64>, ForgeError> {
        let path = match repo {
            Some(repo) => format!("/repos/{owner}/{repo}/installation"),
            None => format!("/orgs/{owner}/installation"),
        };
        let reply = self
            .send_as_app(&FIND_INSTALLATION, &Call::get(path))
            .await?;
        if reply.status == 404 {
            return Ok(None);
        }
        Ok(Some(reply.json::<InstallationId>(&FIND_INSTALLATION)?.id))
    }
}

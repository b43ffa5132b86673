//! The GitHub port of `ephemera doctor` on the App client ([`GitHubApp`]): `GET /app`,
//! `GET /app/hook/config`, the installation lookups and the newest page of
//! `GET /app/hook/deliveries`, all with the App's JWT, and each installation's
//! `GET /rate_limit` with its token. The doctor makes each call once:
//! no retries, so a broken setup is reported at once.

use super::ports::{GitHubConnector, GitHubPort};
use async_trait::async_trait;
use ephemera_core::ports::{ForgeError, HookDeliveries, HookDelivery};
use ephemera_github::{AppDescription, GitHubApp, GitHubAppConfig, RetryPolicy};
use secrecy::SecretString;

/// Builds a [`GitHubApp`] from the key in the deployment's secret.
pub struct AppConnector;

impl GitHubConnector for AppConnector {
    fn connect(
        &self,
        api_url: &str,
        app_id: u64,
        private_key_pem: &str,
    ) -> Result<Box<dyn GitHubPort>, String> {
        let key = SecretString::from(private_key_pem.to_owned());
        let once = RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        };
        let app =
            GitHubApp::new(GitHubAppConfig::new(api_url.to_owned(), app_id, key).with_retry(once))
                .map_err(|err| err.to_string())?;
        Ok(Box::new(AppPort(app)))
    }
}

struct AppPort(GitHubApp);

#[async_trait]
impl GitHubPort for AppPort {
    async fn describe_app(&self) -> Result<AppDescription, ForgeError> {
        self.0.describe_app().await
    }

    async fn webhook_url(&self) -> Result<Option<String>, ForgeError> {
        self.0.webhook_url().await
    }

    async fn installation(
        &self,
        owner: &str,
        repo: Option<&str>,
    ) -> Result<Option<u64>, ForgeError> {
        self.0.find_installation(owner, repo).await
    }

    async fn recent_deliveries(&self) -> Result<Vec<HookDelivery>, ForgeError> {
        Ok(self.0.list_deliveries(None).await?.deliveries)
    }

    async fn rate_limits(
        &self,
        installation_id: u64,
    ) -> Result<std::collections::BTreeMap<String, ephemera_github::RateBucket>, ForgeError> {
        self.0.installation_rate_limits(installation_id).await
    }
}

//! A deployment's GitHub Apps as the one [`Forge`] its handlers take: the App alone when
//! there is one (every call exactly as it always was), else
//! [`SeveralApps`] over all of them, each App registering at its own pace.

use crate::client::{ConfigError, GitHubApp, GitHubAppConfig};
use ephemera_core::apps::{AppSource, SeveralApps};
use ephemera_core::metrics::Metrics;
use ephemera_core::pace::{AppPaces, RegistrationPace};
use ephemera_core::ports::{Forge, TokenShelf};
use std::sync::Arc;

/// The deployment's Apps at `api_url`, in the order given, sharing installation tokens
/// through `shelf` and counting their calls into `metrics`; `Err` with where the unusable
/// key is kept.
pub fn deployment_apps(
    api_url: &str,
    apps: Vec<AppSource>,
    shelf: Option<Arc<dyn TokenShelf>>,
    metrics: &Metrics,
) -> Result<Vec<Arc<GitHubApp>>, (String, ConfigError)> {
    apps.into_iter()
        .map(|source| {
            let config = GitHubAppConfig::new(api_url, source.app_id, source.key);
            let mut app = GitHubApp::new(config)
                .map_err(|err| (source.kept_in, err))?
                .with_metrics(metrics.clone());
            if let Some(key_source) = source.key_source {
                app = app.with_key_source(key_source);
            }
            if let Some(shelf) = &shelf {
                app = app.with_token_shelf(shelf.clone());
            }
            Ok(Arc::new(app))
        })
        .collect()
}

/// The forge over `apps` (the App that sends webhooks first), App `id` paced by
/// `pace(id)`.
pub fn forge_over(
    apps: Vec<Arc<GitHubApp>>,
    pace: impl Fn(u64) -> Arc<RegistrationPace>,
) -> Arc<dyn Forge> {
    if let [app] = apps.as_slice() {
        return app.clone();
    }
    let lanes = apps
        .into_iter()
        .map(|app| (app.app_id, app as Arc<dyn Forge>))
        .collect();
    Arc::new(SeveralApps::new(lanes, pace))
}

/// The scaler's forge over `apps`, each App registering at its own pace from `paces`,
/// and the scaler's own pace: the Apps' allowances together, which sends a job back to
/// the queue until its registration's turn.
pub fn paced_forge(
    apps: Vec<Arc<GitHubApp>>,
    paces: &Arc<AppPaces>,
) -> (Arc<dyn Forge>, Arc<RegistrationPace>) {
    let together = paces.together(apps.len());
    let paces = paces.clone();
    (forge_over(apps, move |app_id| paces.app(app_id)), together)
}

/// An App's pace at GitHub's whole registration limits, for a process that shares its
/// Apps with no other (`ephemera local`), or registers no runner (the reaper).
pub fn unshared_pace(_app_id: u64) -> Arc<RegistrationPace> {
    Arc::new(RegistrationPace::shared(
        ephemera_core::pace::GITHUB_REGISTRATIONS_PER_MINUTE,
        1,
    ))
}

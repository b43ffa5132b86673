//! The reaper Lambda function, run by an EventBridge schedule: deletes what was asked to
//! be deleted, within the invocation's time. All logic is in
//! `ephemera_core::handlers::reaper`.

use ephemera_aws::lambda::{init_tracing, LambdaEnv};
use ephemera_core::handlers::reaper::Reaper;
use ephemera_github::{GitHubApp, GitHubAppConfig};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Time kept back from the invocation's deadline to finish the work in hand.
const MARGIN: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let env = LambdaEnv::load().await?;
    let metrics = env.metrics();
    let forge = GitHubApp::new(GitHubAppConfig {
        api_url: env.config.github.api_url.clone(),
        app_id: env.config.github.app_id,
        private_key: env.secret("EPHEMERA_GITHUB_KEY_SECRET_ID").await?,
        retry: Default::default(),
    })?
    .with_metrics(metrics.clone());
    let forge = Arc::new(forge);
    let reaper = Reaper::new(
        env.config.clone(),
        Arc::new(env.store()?),
        Arc::new(env.fleet()),
        forge.clone(),
        Arc::new(env.jit_secrets()?),
        Arc::new(env.queue()?),
    )
    .with_deliveries(forge)
    .with_metrics(metrics);
    lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        handle(&reaper, event)
    }))
    .await
}

async fn handle(
    reaper: &Reaper,
    event: LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, Error> {
    let left = event
        .context
        .deadline()
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    let deadline = tokio::time::Instant::now() + left.saturating_sub(MARGIN);
    let report = reaper
        .run(time::OffsetDateTime::now_utc(), deadline)
        .await?;
    Ok(serde_json::json!({
        "came_online": report.came_online,
        "deleted": report.deleted,
        "busy": report.busy,
        "backed_off": report.backed_off,
        "sent_to_delete": report.sent_to_delete,
        "orphans_reaped": report.orphans_reaped,
        "requeued": report.requeued,
        "counters_repaired": report.counters_repaired,
        "warm_requested": report.warm_requested,
        "left_for_next_run": report.left_for_next_run,
    }))
}

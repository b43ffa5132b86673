//! The reaper Lambda function, run by an EventBridge schedule and EC2's events: deletes
//! what was asked to be deleted, within the invocation's time. All logic is in
//! `ephemera_core::handlers::reaper`; the reaper is assembled in `ephemera_aws::assembly`.

use ephemera_aws::assembly::WebhookApp;
use ephemera_aws::lambda::{
    cold_start, init_tracing, LambdaEnv, GITHUB_KEY_SECRET_ID, REAPER_VARS,
};
use ephemera_aws::reload::{Reloading, Sources};
use ephemera_core::handlers::reaper::{InstanceEvent, Reaper};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use std::time::{Duration, SystemTime};

/// Time kept back from the invocation's deadline to finish the work in hand.
const MARGIN: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let start = async {
        let env = LambdaEnv::load(REAPER_VARS).await?;
        Reloading::start(env, "reaper", &[GITHUB_KEY_SECRET_ID], build).await
    };
    let reaper = cold_start(start).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        handle(&reaper, event)
    }))
    .await
}

/// The reaper for one version of the configuration and the Apps' keys. It registers no
/// runner, so the Apps' registration paces are never spent here; the redelivery sweep
/// and the re-runs are the webhook App's (the first).
fn build(env: &LambdaEnv, sources: &Sources) -> anyhow::Result<Reaper> {
    let deployment = env.deployment(&sources.config)?;
    let apps = ephemera_github::deployment_apps(
        &sources.config.github.api_url,
        sources.app_sources(env)?,
        Some(std::sync::Arc::new(env.token_shelf()?)),
        &deployment.metrics,
    )
    .map_err(|(secret, err)| ephemera_aws::lambda::unusable_app_key_in(&secret, err))?;
    let webhook_app = WebhookApp::of(apps[0].clone());
    let forge = ephemera_github::forge_over(apps, ephemera_github::unshared_pace);
    Ok(deployment.reaper(forge, webhook_app))
}

/// An EC2 event (EventBridge rules of the stack) is one instance's news, handled on its
/// own; anything else is the schedule, answered with the run's whole report.
async fn handle(
    reaper: &Reloading<Reaper>,
    event: LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, Error> {
    let reaper = reaper.handler().await;
    let now = time::OffsetDateTime::now_utc();
    if let Some(instance_event) = InstanceEvent::from_eventbridge(&event.payload)? {
        let outcome = reaper.on_instance_event(&instance_event, now).await?;
        return Ok(serde_json::json!({ "instance_event": outcome }));
    }
    let left = (event.context.deadline().duration_since(SystemTime::now())).unwrap_or_default();
    let deadline = tokio::time::Instant::now() + left.saturating_sub(MARGIN);
    Ok(serde_json::to_value(reaper.run(now, deadline).await?)?)
}

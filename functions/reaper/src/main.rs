//! The reaper Lambda function, run by an EventBridge schedule: deletes what was asked to
//! be deleted, within the invocation's time. All logic is in
//! `ephemera_core::handlers::reaper`.

use ephemera_aws::lambda::{
    cold_start, init_tracing, metrics, unusable_app_key_in, LambdaEnv, GITHUB_KEY_SECRET_ID,
    REAPER_VARS,
};
use ephemera_aws::reload::{Reloading, Sources};
use ephemera_core::handlers::reaper::{InstanceEvent, Reaper, Reruns};
use ephemera_github::{deployment_apps, forge_over, unshared_pace};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Time kept back from the invocation's deadline to finish the work in hand.
const MARGIN: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let reaper = cold_start(start()).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        handle(&reaper, event)
    }))
    .await
}

/// The cold start: the environment (all of it checked before any call), then the
/// configuration and the App key, followed from then on.
async fn start() -> anyhow::Result<Reloading<Reaper>> {
    let env = LambdaEnv::load(REAPER_VARS).await?;
    Reloading::start(env, "reaper", &[GITHUB_KEY_SECRET_ID], build).await
}

/// The reaper for one version of the configuration and the Apps' keys; it runs only
/// while it holds the reaper lease in the table (one reaper at a time).
fn build(env: &LambdaEnv, sources: &Sources) -> anyhow::Result<Reaper> {
    let config = sources.config.clone();
    let metrics = metrics(&config);
    let apps = deployment_apps(
        &config.github.api_url,
        sources.app_sources(env)?,
        Some(Arc::new(env.token_shelf()?)),
        &metrics,
    )
    .map_err(|(secret, err)| unusable_app_key_in(&secret, err))?;
    // The redelivery sweep is the webhook App's (the first); the reaper registers no
    // runner, so the Apps' registration paces are never spent here.
    let webhook_app = apps[0].clone();
    let forge = forge_over(apps, unshared_pace);
    let store = Arc::new(env.store()?);
    let (price_book, price_list) = env.pricing()?;
    Ok(Reaper::new(
        config.clone(),
        store.clone(),
        Arc::new(env.fleet(&config)),
        forge,
        Arc::new(env.jit_store()?),
        Arc::new(env.queue()?),
    )
    .with_deliveries(webhook_app.clone())
    // The re-runs, like the sweep, are the first App's: one App keeps a run's
    // waiting and its ask together.
    .with_reruns(Reruns {
        store: Arc::new(env.reruns()?),
        runs: webhook_app,
    })
    .with_spot_breakers(Arc::new(env.spot_breakers()?))
    .with_metrics(metrics)
    .with_pricing(Arc::new(price_book), Arc::new(price_list))
    .with_lease(store))
}

async fn handle(
    reaper: &Reloading<Reaper>,
    event: LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, Error> {
    let reaper = reaper.handler().await;
    // EC2's events (EventBridge rules of the stack) come to the same function as its
    // schedule; each is one instance's news, handled on its own.
    if let Some(instance_event) =
        InstanceEvent::from_eventbridge(&event.payload).map_err(Error::from)?
    {
        let outcome = reaper
            .on_instance_event(&instance_event, time::OffsetDateTime::now_utc())
            .await?;
        return Ok(serde_json::json!({ "instance_event": outcome }));
    }
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
        "prices_read": report.prices_read,
        "reruns_asked": report.reruns_asked,
        "left_for_next_run": report.left_for_next_run,
        "another_run_held_the_lease": report.another_run_held_the_lease,
    }))
}

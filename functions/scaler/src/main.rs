//! The scaler Lambda function: SQS batches of job events in, runners out, failures
//! reported per message. All logic is in `ephemera_core::handlers::scaler`.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use ephemera_aws::lambda::{
    cold_start, init_tracing, metrics, unusable_app_key_in, LambdaEnv, GITHUB_KEY_SECRET_ID,
    SCALER_VARS,
};
use ephemera_aws::reload::{Reloading, Sources};
use ephemera_core::handlers::scaler::{BatchItem, Scaler};
use ephemera_core::pace::AppPaces;
use ephemera_github::{deployment_apps, forge_over};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let scaler = cold_start(start()).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        handle(&scaler, event)
    }))
    .await
}

/// The cold start: the environment (all of it checked before any call), then the
/// configuration and the App key, followed from then on.
async fn start() -> anyhow::Result<Reloading<Scaler>> {
    let env = LambdaEnv::load(SCALER_VARS).await?;
    // This invocation's share of each App's registration rate (template.yaml sets the
    // concurrency from ScalerMaxConcurrency); the paces live as long as the
    // environment, kept across configuration reloads.
    let paces = Arc::new(
        AppPaces::from_environment(
            std::env::var("EPHEMERA_REGISTRATIONS_PER_MINUTE")
                .ok()
                .as_deref(),
            std::env::var("EPHEMERA_SCALER_CONCURRENCY").ok().as_deref(),
        )
        .map_err(anyhow::Error::msg)?,
    );
    Reloading::start(
        env,
        "scaler",
        &[GITHUB_KEY_SECRET_ID],
        move |env, sources| build(env, sources, paces.clone()),
    )
    .await
}

/// The scaler for one version of the configuration and the Apps' keys.
fn build(env: &LambdaEnv, sources: &Sources, paces: Arc<AppPaces>) -> anyhow::Result<Scaler> {
    let config = sources.config.clone();
    let metrics = metrics(&config);
    let apps = deployment_apps(
        &config.github.api_url,
        sources.app_sources(env)?,
        Some(Arc::new(env.token_shelf()?)),
        &metrics,
    )
    .map_err(|(secret, err)| unusable_app_key_in(&secret, err))?;
    let pace = paces.together(apps.len());
    let forge = forge_over(apps, |app_id| paces.app(app_id));
    Ok(Scaler::new(
        config.clone(),
        Arc::new(env.store()?),
        Arc::new(env.fleet(&config)),
        forge,
        Arc::new(env.jit_store()?),
        Arc::new(env.queue()?),
    )
    .with_metrics(metrics)
    .with_spot_breakers(Arc::new(env.spot_breakers()?))
    .with_reruns(Arc::new(env.reruns()?))
    .with_registration_pace(pace))
}

async fn handle(
    scaler: &Reloading<Scaler>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let scaler = scaler.handler().await;
    let items = event
        .payload
        .records
        .into_iter()
        .map(|record| BatchItem {
            message_id: record.message_id.unwrap_or_default(),
            body: record.body.unwrap_or_default(),
        })
        .collect();
    let failed = scaler
        .handle_batch(items, time::OffsetDateTime::now_utc())
        .await;
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failed
        .into_iter()
        .map(|item_identifier| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = item_identifier;
            failure
        })
        .collect();
    Ok(response)
}

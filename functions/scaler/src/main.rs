//! The scaler Lambda function: SQS batches of job events in, runners out, failures
//! reported per message. All logic is in `ephemera_core::handlers::scaler`; the scaler
//! is assembled in `ephemera_aws::assembly`.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use ephemera_aws::lambda::{
    cold_start, init_tracing, LambdaEnv, GITHUB_KEY_SECRET_ID, SCALER_VARS,
};
use ephemera_aws::reload::{Reloading, Sources};
use ephemera_core::handlers::scaler::{BatchItem, Scaler};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let start = async {
        let env = LambdaEnv::load(SCALER_VARS).await?;
        Reloading::start(env, "scaler", &[GITHUB_KEY_SECRET_ID], build).await
    };
    let scaler = cold_start(start).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        handle(&scaler, event)
    }))
    .await
}

/// The scaler for one version of the configuration and the Apps' keys; the paces live
/// as long as the environment, kept across reloads.
fn build(env: &LambdaEnv, sources: &Sources) -> anyhow::Result<Scaler> {
    let deployment = env.deployment(&sources.config)?;
    let apps = ephemera_github::deployment_apps(
        &sources.config.github.api_url,
        sources.app_sources(env)?,
        Some(std::sync::Arc::new(env.token_shelf()?)),
        &deployment.metrics,
    )
    .map_err(|(secret, err)| ephemera_aws::lambda::unusable_app_key_in(&secret, err))?;
    let (forge, pace) = ephemera_github::paced_forge(apps, &env.app_paces());
    Ok(deployment.scaler(forge, pace))
}

async fn handle(
    scaler: &Reloading<Scaler>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let items = (event.payload.records.into_iter())
        .map(|record| BatchItem {
            message_id: record.message_id.unwrap_or_default(),
            body: record.body.unwrap_or_default(),
        })
        .collect();
    let now = time::OffsetDateTime::now_utc();
    let failed = scaler.handler().await.handle_batch(items, now).await;
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

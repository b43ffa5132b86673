//! The scaler Lambda function: SQS batches of job events in, runners out, failures
//! reported per message. All logic is in `ephemera_core::handlers::scaler`.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use ephemera_aws::lambda::{init_tracing, LambdaEnv};
use ephemera_core::handlers::scaler::{BatchItem, Scaler};
use ephemera_core::pace::RegistrationPace;
use ephemera_github::{GitHubApp, GitHubAppConfig};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use std::sync::Arc;

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
    let fleet = Arc::new(env.fleet());
    // This invocation's share of the App's registration rate (template.yaml sets the
    // concurrency from ScalerMaxConcurrency).
    let pace = RegistrationPace::from_environment(
        std::env::var("EPHEMERA_REGISTRATIONS_PER_MINUTE")
            .ok()
            .as_deref(),
        std::env::var("EPHEMERA_SCALER_CONCURRENCY").ok().as_deref(),
    )?;
    let scaler = Arc::new(
        Scaler::new(
            env.config.clone(),
            Arc::new(env.store()?),
            fleet,
            Arc::new(forge),
            Arc::new(env.jit_secrets()?),
            Arc::new(env.queue()?),
        )
        .with_metrics(metrics)
        .with_registration_pace(Arc::new(pace)),
    );
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        handle(&scaler, event)
    }))
    .await
}

async fn handle(
    scaler: &Arc<Scaler>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
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

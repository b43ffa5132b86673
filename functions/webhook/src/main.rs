//! The webhook Lambda function: GitHub's signed deliveries in (through a Function URL),
//! versioned queue messages out. All logic is in `ephemera_core::handlers::webhook`.

use ephemera_aws::lambda::{cold_start, init_tracing, metrics, LambdaEnv, WEBHOOK_VARS};
use ephemera_aws::reload::{Reloading, Sources};
use ephemera_core::handlers::webhook::{
    WebhookCapabilities, WebhookHandler, WebhookRequest, WebhookResponse,
};
use ephemera_core::ports::UnroutedJobs;
use ephemera_core::screen::Rejection;
use lambda_http::{service_fn, Body, Error, Request, Response};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let webhook = cold_start(start()).await?;
    lambda_http::run(service_fn(|request: Request| handle(&webhook, request))).await
}

/// The cold start: the environment (all of it checked before any call), then the
/// configuration and the webhook secrets, followed from then on.
async fn start() -> anyhow::Result<Reloading<WebhookHandler>> {
    let env = LambdaEnv::load(WEBHOOK_VARS).await?;
    let secrets = env.webhook_secret_vars();
    Reloading::start(env, "webhook", &secrets, build).await
}

/// The handler for one version of the configuration and the webhook secrets. With
/// `EPHEMERA_TABLE` set (template.yaml sets it), jobs no pool takes are recorded there
/// for `ephemera jobs list --status unrouted`.
fn build(env: &LambdaEnv, sources: &Sources) -> anyhow::Result<WebhookHandler> {
    let capabilities = WebhookCapabilities {
        metrics: metrics(&sources.config),
        unrouted: (env.unrouted_jobs()).map(|jobs| Arc::new(jobs) as Arc<dyn UnroutedJobs>),
    };
    let (config, secrets) = (sources.config.clone(), sources.webhook_secrets()?);
    let queue = Arc::new(env.queue()?);
    Ok(WebhookHandler::new(config, secrets, queue, capabilities))
}

async fn handle(
    webhook: &Reloading<WebhookHandler>,
    request: Request,
) -> Result<Response<Body>, Error> {
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    let delivery = WebhookRequest {
        event: header("x-github-event"),
        delivery_id: header("x-github-delivery"),
        signature: header("x-hub-signature-256"),
        body: request.body().as_ref(),
    };
    // What the headers refuse is answered before any check of the sources (a call).
    let refused = webhook.current().await.refusal(delivery);
    let response = match refused {
        Some(refused) => refused,
        None => verified(webhook, delivery).await,
    };
    Ok(Response::builder()
        .status(response.status)
        .header("content-type", "application/json")
        .body(Body::from(response.body()))?)
}

/// A delivery the headers did not refuse, handled; a signature that does not match is
/// tried again once after a check of the secrets: they may have rotated since read.
async fn verified(
    webhook: &Reloading<WebhookHandler>,
    delivery: WebhookRequest<'_>,
) -> WebhookResponse {
    let now = time::OffsetDateTime::now_utc();
    let response = webhook.handler().await.handle(delivery, now).await;
    if response.rejected == Some(Rejection::BadSignature) && webhook.check_now().await {
        return webhook.handler().await.handle(delivery, now).await;
    }
    response
}

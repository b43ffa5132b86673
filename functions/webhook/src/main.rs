//! The webhook Lambda function: GitHub's signed deliveries in (through a Function URL),
//! versioned queue messages out. All logic is in `ephemera_core::handlers::webhook`.

use ephemera_aws::lambda::{init_tracing, LambdaEnv};
use ephemera_core::handlers::webhook::{WebhookHandler, WebhookRequest};
use lambda_http::{service_fn, Body, Error, Request, Response};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let env = LambdaEnv::load().await?;
    let queue = Arc::new(env.queue()?);
    let handler = WebhookHandler::new(env.config.clone(), env.webhook_secrets().await?, queue)
        .with_metrics(env.metrics());
    lambda_http::run(service_fn(|request: Request| handle(&handler, request))).await
}

async fn handle(handler: &WebhookHandler, request: Request) -> Result<Response<Body>, Error> {
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    let delivery = WebhookRequest {
        event: header("x-github-event"),
        delivery_id: header("x-github-delivery"),
        signature: header("x-hub-signature-256"),
        body: request.body().as_ref(),
    };
    let response = handler
        .handle(delivery, time::OffsetDateTime::now_utc())
        .await;
    Ok(Response::builder()
        .status(response.status)
        .header("content-type", "application/json")
        .body(Body::from(response.body()))?)
}

//! The webhook over HTTP, into the real SQS queue: what is signed right is queued once,
//! everything else is refused or ignored and queues nothing.

use ephemera_core::message::{MessageKind, QueueMessage};
use ephemera_core::webhook::signature_header;
use ephemera_tests::pipeline::{workspace_path, Pipeline, PipelineOptions, WEBHOOK_SECRET};

async fn post(url: &str, event: &str, signature: Option<&str>, body: &[u8]) -> anyhow::Result<u16> {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("x-github-event", event)
        .header("x-github-delivery", "d-1")
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(signature) = signature {
        request = request.header("x-hub-signature-256", signature);
    }
    Ok(request.send().await?.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_delivery_is_queued_once_and_bad_ones_queue_nothing() -> anyhow::Result<()> {
    // Only the listener and the queue matter here: no scaler drains the queue.
    let options = PipelineOptions {
        drain_queue: false,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let body = std::fs::read(workspace_path(
        "functions/core/fixtures/workflow_job_queued.json",
    ))?;
    let good = signature_header(WEBHOOK_SECRET.as_bytes(), &body);
    let mut changed = body.clone();
    changed[10] ^= 1;
    let wrong_secret = signature_header(b"not the secret", &body);
    let sha1_only = "sha1=0123456789abcdef0123456789abcdef01234567";
    let bad_hex = format!("sha256={}", "g".repeat(64));

    assert_eq!(
        post(&p.webhook_url, "workflow_job", Some(&wrong_secret), &body).await?,
        401
    );
    assert_eq!(
        post(&p.webhook_url, "workflow_job", None, &body).await?,
        401
    );
    assert_eq!(
        post(&p.webhook_url, "workflow_job", Some(sha1_only), &body).await?,
        401
    );
    assert_eq!(
        post(&p.webhook_url, "workflow_job", Some(&bad_hex), &body).await?,
        401
    );
    assert_eq!(
        post(&p.webhook_url, "workflow_job", Some(&good), &changed).await?,
        401
    );
    assert_eq!(post(&p.webhook_url, "push", Some(&good), &body).await?, 202);
    assert_eq!(
        p.queue.receive(10, 1).await?.len(),
        0,
        "refused and ignored deliveries queue nothing"
    );

    assert_eq!(
        post(&p.webhook_url, "workflow_job", Some(&good), &body).await?,
        200
    );
    let received = p.queue.receive(10, 2).await?;
    assert_eq!(received.len(), 1);
    let message = QueueMessage::decode(&received[0].body)?;
    assert_eq!(message.kind, MessageKind::Queued);
    assert_eq!(message.job_id, 29679449);
    assert_eq!(message.pool, "linux-x64");
    assert_eq!(message.delivery_id, "d-1");
    Ok(())
}

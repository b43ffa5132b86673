//! The public webhook URL under a flood, through the real `ephemera local` binary: a
//! bounded flood of unsigned requests on loopback while 10 jobs arrive (every job runs,
//! every genuine delivery gets through, and `WebhookRejected` counts the flood), and a
//! genuine delivery answered 429, as a throttled Lambda function URL answers it, which
//! GitHub records as failed and the reaper's redelivery sweep has sent again.

use super::local_world::{LocalOptions, LocalWorld};
use axum::http::StatusCode;
use ephemera_core::metrics::{validate_emf, Dimension, Metric};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// The flood's bounds: this many requests at most, for this long at most.
const FLOOD_REQUESTS: usize = 2_000;
const FLOOD_FOR: Duration = Duration::from_secs(60);
/// Requests in flight at once.
const FLOODERS: usize = 8;
const JOBS: usize = 10;

/// Sends unsigned `workflow_job` requests to `url` until `count` are sent or `within`
/// has passed; returns how many were sent, each checked to be answered 401.
async fn flood(url: String, count: usize, within: Duration) -> anyhow::Result<usize> {
    let client = reqwest::Client::new();
    let body = r#"{"action":"queued","workflow_job":{"id":1,"run_id":1,"labels":["x"]}}"#;
    let deadline = Instant::now() + within;
    let mut sent = 0;
    while sent < count && Instant::now() < deadline {
        let status = client
            .post(&url)
            .header("x-github-event", "workflow_job")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await?
            .status();
        anyhow::ensure!(
            status == StatusCode::UNAUTHORIZED,
            "flood answered {status}"
        );
        sent += 1;
    }
    Ok(sent)
}

/// `WebhookRejected` with `reason`, summed over the EMF lines the process printed.
fn rejected(log: &str, reason: &str) -> anyhow::Result<f64> {
    let mut total = 0.0;
    let emf = |line: &&str| line.starts_with('{') && line.contains("\"_aws\"");
    for line in log.lines().filter(emf) {
        let document = validate_emf(line).map_err(anyhow::Error::msg)?;
        if document.dimension(Dimension::Reason) == Some(reason) {
            total += document
                .values(Metric::WebhookRejected)
                .map_or(0.0, |values| values.iter().sum());
        }
    }
    Ok(total)
}

/// Waits until every job in `jobs` is completed, successfully.
async fn all_completed(world: &LocalWorld, jobs: &[u64], within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let snapshot = world.sim.snapshot();
        let waiting: Vec<_> = jobs
            .iter()
            .filter(|&&id| snapshot.jobs[&id].status != "completed")
            .collect();
        if waiting.is_empty() {
            for id in jobs {
                let job = &snapshot.jobs[id];
                assert_eq!(job.conclusion.as_deref(), Some("success"), "{job:?}");
            }
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "jobs {waiting:?} have not run; log:\n{}",
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unsigned_requests_leaves_every_job_to_run_and_is_counted() -> anyhow::Result<()>
{
    let world = LocalWorld::start(LocalOptions::default()).await?;
    let url = world.webhook_url();
    assert!(url.starts_with("http://127.0.0.1:"), "loopback only: {url}");
    let mut flooders = JoinSet::new();
    for _ in 0..FLOODERS {
        flooders.spawn(flood(url.clone(), FLOOD_REQUESTS / FLOODERS, FLOOD_FOR));
    }
    let jobs = world.create_jobs(JOBS).await?;
    let mut flooded = 0;
    while let Some(sent) = flooders.join_next().await {
        flooded += sent??;
    }
    all_completed(&world, &jobs, Duration::from_secs(120)).await?;

    assert!(flooded > 0, "no flood was sent");
    let snapshot = world.sim.snapshot();
    let failed: Vec<_> = snapshot
        .deliveries
        .values()
        .filter(|d| !d.succeeded())
        .collect();
    assert!(failed.is_empty(), "genuine deliveries failed: {failed:?}");
    assert_eq!(rejected(&world.log(), "no_signature")?, flooded as f64);
    Ok(())
}

/// Answers every request as a Lambda function URL answers a throttled invocation.
async fn throttled_url() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let throttled = || async {
        (
            StatusCode::TOO_MANY_REQUESTS,
            [("x-amzn-ErrorType", "TooManyRequestsException")],
            r#"{"Reason":"ReservedFunctionConcurrentInvocationLimitExceeded","Type":"User","message":"Rate Exceeded."}"#,
        )
    };
    let app = axum::Router::new().fallback(throttled);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{address}/webhook"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_genuine_delivery_throttled_with_429_is_recovered_by_the_redelivery_sweep(
) -> anyhow::Result<()> {
    let world = LocalWorld::start(LocalOptions::default()).await?;
    world.sim.set_webhook_url(throttled_url().await?);
    let [job_id] = world.create_jobs(1).await?[..] else {
        anyhow::bail!("one job asked for");
    };
    world.sim.set_webhook_url(world.webhook_url());
    let first: Vec<_> = world.sim.snapshot().deliveries.into_values().collect();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].status_code, 429, "{first:?}");
    assert!(!first[0].succeeded(), "GitHub records a 429 as failed");

    all_completed(&world, &[job_id], Duration::from_secs(90)).await?;
    let snapshot = world.sim.snapshot();
    assert_eq!(snapshot.counters.runners_registered, 1);
    let redelivered = snapshot
        .deliveries
        .values()
        .any(|d| d.redelivery && d.succeeded());
    assert!(redelivered, "{:?}", snapshot.deliveries);
    Ok(())
}

//! A job waiting at a full pool for more than 30 minutes is not cut off by Lambda's
//! recursive-loop detection: the scaler's Lambda entry point (under the project's
//! runtime API) defers it again and again, the test plays Lambda's SQS event source
//! mapping (each invocation's trace header carries a `Lineage` one above the message's
//! `AWSTraceHeader`, as Lambda counts), and the strict world's cut-off at 16 never fires,
//! with its clock advanced so SQS delays pass without waiting.

use super::follow::{deployment_environment, queued_delivery};
use crate::cli::config_yaml;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use ephemera_tests::functions::Function;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT};
use ephemera_tests::runtime_api::{function_url_answer, sqs_event, DEFAULT_TRACE_ID};
use std::time::Duration;

/// Longer than the scaler's longest capacity wait (15 s, spread up to 22.5 s).
const HOP: Duration = Duration::from_secs(23);
/// The simulated wait the job must survive.
const WAIT: Duration = Duration::from_secs(31 * 60);

/// The `Lineage` count in a trace header, 0 without one.
fn lineage_of(header: &str) -> u32 {
    header
        .split(';')
        .find_map(|field| field.trim().strip_prefix("Lineage="))
        .and_then(|lineage| lineage.split(':').nth(1))
        .and_then(|count| count.parse().ok())
        .unwrap_or(0)
}

/// Plays the event source mapping once: every visible message, each to its own
/// invocation whose trace header counts one more hop than the message's; a message
/// handled without failure is deleted. The job ids handled and the highest Lineage an
/// invocation carried.
async fn deliver(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    scaler: &mut Function,
) -> anyhow::Result<(Vec<u64>, u32)> {
    let received = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::AwsTraceHeader)
        .send()
        .await?;
    let mut handled = Vec::new();
    let mut highest = 0;
    for message in received.messages() {
        let header = message
            .attributes()
            .and_then(|a| a.get(&MessageSystemAttributeName::AwsTraceHeader))
            .map(String::as_str)
            .unwrap_or(DEFAULT_TRACE_ID);
        let hops = lineage_of(header) + 1;
        highest = highest.max(hops);
        let trace = format!("{DEFAULT_TRACE_ID};Lineage=a87bd80c:{hops}");
        let body = message.body().unwrap_or_default().to_owned();
        let receipt = message.receipt_handle().unwrap_or_default().to_owned();
        let id = message.message_id().unwrap_or_default().to_owned();
        let answer = scaler
            .invoke_traced(sqs_event(&[(id, receipt.clone(), body.clone())]), &trace)
            .await?;
        anyhow::ensure!(
            answer["batchItemFailures"] == serde_json::json!([]),
            "{answer}"
        );
        sqs.delete_message()
            .queue_url(queue_url)
            .receipt_handle(receipt)
            .send()
            .await?;
        let job: serde_json::Value = serde_json::from_str(&body)?;
        handled.push(job["job_id"].as_u64().unwrap_or_default());
    }
    Ok((handled, highest))
}

#[tokio::test]
async fn a_job_waiting_half_an_hour_for_capacity_is_not_cut_off_as_a_recursive_loop(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        drain_queue: false,
        reaper_interval: None,
        ..PipelineOptions::default()
    })
    .await?;
    let one_slot = config_yaml(DEPLOYMENT, &p.sim.url).replace("max_runners: 10", "max_runners: 1");
    let env = deployment_environment(&p, &one_slot, &[]).await?;
    let mut webhook = Function::start("webhook", &env).await?;
    let mut scaler = Function::start("scaler", &env).await?;
    let sdk =
        ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&p.moto.endpoint)).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let queue_url = p.queue.queue_url().to_owned();
    let x64 = ["self-hosted", "linux", "x64"];

    // The first job takes the pool's one slot.
    let (status, body) = function_url_answer(&webhook.invoke(queued_delivery(3001, &x64)).await?);
    assert_eq!(status, 200, "{body}");
    assert_eq!(deliver(&sqs, &queue_url, &mut scaler).await?.0, [3001]);
    let first = p
        .runner_for_job(3001)
        .await?
        .expect("a runner for the first job");
    assert!(first.instance_id.is_some(), "{first:?}");

    // The second waits for capacity: deferred at every delivery, for more than 30
    // minutes of the strict world's time.
    let (status, body) = function_url_answer(&webhook.invoke(queued_delivery(3002, &x64)).await?);
    assert_eq!(status, 200, "{body}");
    let mut waited = Duration::ZERO;
    let mut deliveries = 0;
    let mut longest_chain = 0;
    while waited < WAIT {
        let (handled, highest) = deliver(&sqs, &queue_url, &mut scaler).await?;
        assert_eq!(
            handled,
            [3002],
            "delivery {deliveries}, after {waited:?}: the waiting job, and only it"
        );
        longest_chain = longest_chain.max(highest);
        deliveries += 1;
        p.moto.advance_strict_clock(HOP).await?;
        waited += HOP;
    }
    assert!(deliveries > 16, "{deliveries} deliveries");
    assert_eq!(longest_chain, 1, "every delivery starts a new chain");
    assert!(
        p.runner_for_job(3002).await?.is_none(),
        "the pool stayed full"
    );
    let stats = p.moto.strict_stats().await?;
    assert_eq!(
        stats.count("lambda_recursive_invocations_dropped"),
        0,
        "{:?}",
        stats.log
    );
    println!("job 3002 delivered {deliveries} times over {waited:?} of simulated time");
    Ok(())
}

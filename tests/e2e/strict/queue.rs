//! SQS through the strict layer: the message size limit and the 0..900 s delay, the
//! `X-Amzn-Trace-Id` header kept as AWSTraceHeader, and Lambda's recursive-loop cut-off:
//! a function that re-sends to the queue that triggers it is stopped at 16 hops, and
//! the message goes to the queue's dead-letter queue.

use crate::strict::refusal;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use aws_sdk_sqs::Client;
use ephemera_aws::{sdk_config, AwsSettings};
use ephemera_tests::moto::Moto;

async fn sqs(moto: &Moto) -> Client {
    Client::new(&sdk_config(&AwsSettings::emulator(&moto.endpoint)).await)
}

/// A queue whose messages go to `<name>-dlq` after 5 receives.
async fn queue_with_dlq(sqs: &Client, name: &str) -> anyhow::Result<(String, String)> {
    let dlq = sqs
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        .send()
        .await?;
    let dlq_url = dlq.queue_url().unwrap_or_default().to_owned();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .unwrap_or_default();
    let redrive = format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"5"}}"#);
    let queue = sqs
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .send()
        .await?;
    Ok((queue.queue_url().unwrap_or_default().to_owned(), dlq_url))
}

#[tokio::test]
async fn sqs_refuses_messages_over_1_mib_and_delays_over_900_seconds() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sqs = sqs(&moto).await;
    let (queue, _) = queue_with_dlq(&sqs, "sizes").await?;
    let send = |body: String, delay: i32| {
        sqs.send_message()
            .queue_url(&queue)
            .message_body(body)
            .delay_seconds(delay)
            .send()
    };
    send("m".repeat(1024 * 1024), 0).await?;
    let err = send("m".repeat(1024 * 1024 + 1), 0).await.unwrap_err();
    let refused = refusal(&err);
    assert_eq!(
        (refused.code.as_str(), refused.message.as_str(), refused.status),
        (
            "InvalidParameterValue",
            "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.",
            400
        )
    );
    send("late".to_owned(), 900).await?;
    let err = send("too late".to_owned(), 901).await.unwrap_err();
    let refused = refusal(&err);
    assert_eq!(refused.code, "InvalidParameterValue");
    assert_eq!(
        refused.message,
        "Value 901 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900."
    );
    let stats = moto.strict_stats().await?;
    assert_eq!(stats.count("sqs_message_too_large"), 1);
    assert_eq!(stats.count("sqs_delay_out_of_range"), 1);
    Ok(())
}

/// The trace header a function invoked `hops` times in one chain sends with (the
/// `Lineage` field is Lambda's count; the SDK forwards `_X_AMZN_TRACE_ID` as it is).
fn trace_header(hops: u32) -> String {
    format!("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0;Lineage=a87bd80c:{hops}")
}

fn lineage_hops(header: Option<&String>) -> u32 {
    header
        .and_then(|h| h.split("Lineage=").nth(1))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|n| n.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_function_resending_to_its_own_queue_is_stopped_at_16_hops() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sqs = sqs(&moto).await;
    let (queue, dlq) = queue_with_dlq(&sqs, "loop").await?;
    sqs.send_message()
        .queue_url(&queue)
        .message_body("hop 0")
        .send()
        .await?;

    // Play Lambda's event source mapping and the function: each delivery invokes the
    // function, which re-sends to its own queue with the trace header of its invocation.
    let mut deliveries = 0;
    for _ in 0..40 {
        let received = sqs
            .receive_message()
            .queue_url(&queue)
            .message_system_attribute_names(MessageSystemAttributeName::AwsTraceHeader)
            .send()
            .await?;
        let Some(message) = received.messages().first() else {
            break;
        };
        deliveries += 1;
        let attributes = message.attributes();
        let header = attributes.and_then(|a| a.get(&MessageSystemAttributeName::AwsTraceHeader));
        let hops = lineage_hops(header);
        if hops > 0 {
            assert_eq!(
                header.map(String::as_str),
                Some(trace_header(hops).as_str())
            );
        }
        let next = trace_header(hops + 1);
        sqs.send_message()
            .queue_url(&queue)
            .message_body(format!("hop {}", hops + 1))
            .customize()
            .mutate_request(move |request| {
                request
                    .headers_mut()
                    .insert("X-Amzn-Trace-Id", next.clone());
            })
            .send()
            .await?;
        let handle = message.receipt_handle().unwrap_or_default();
        sqs.delete_message()
            .queue_url(&queue)
            .receipt_handle(handle)
            .send()
            .await?;
    }
    assert_eq!(deliveries, 16, "hops 0..=15 are delivered, hop 16 is not");
    let parked = sqs.receive_message().queue_url(&dlq).send().await?;
    let bodies: Vec<&str> = parked.messages().iter().filter_map(|m| m.body()).collect();
    assert_eq!(bodies, ["hop 16"]);
    let stats = moto.strict_stats().await?;
    assert_eq!(stats.count("lambda_recursive_invocations_dropped"), 1);
    assert_eq!(stats.log.len(), 1);
    assert!(
        stats.log[0].starts_with("Lambda recursive loop detected"),
        "{}",
        stats.log[0]
    );
    assert!(
        stats.log[0].contains("moved to dead-letter queue loop-dlq"),
        "{}",
        stats.log[0]
    );
    Ok(())
}

//! The SQS side of the dead-letter commands: finding the jobs queue's dead-letter
//! queue, its depth, and receiving its messages without consuming them.

use super::{BATCH, MOST, PEEK_SECONDS};
use crate::errors::aws;
use crate::exit::{Failure, USAGE};
use crate::target::Deployment;
use anyhow::Context;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use aws_sdk_sqs::Client;
use std::collections::HashSet;

/// The URL of the dead-letter queue a `RedrivePolicy` names
/// (`{"deadLetterTargetArn": "arn:aws:sqs:REGION:ACCOUNT:NAME", ...}`).
pub async fn dead_letter_url(sqs: &Client, policy: &str) -> Result<String, Failure> {
    let policy: serde_json::Value = serde_json::from_str(policy)
        .map_err(|err| anyhow::anyhow!("the jobs queue's RedrivePolicy is not JSON: {err}"))?;
    let arn = policy["deadLetterTargetArn"].as_str().unwrap_or_default();
    let name = arn.rsplit(':').next().unwrap_or_default();
    Ok(ephemera_aws::sqs::queue_url(sqs, name).await?)
}

/// The messages waiting in a queue (`ApproximateNumberOfMessages`).
pub async fn depth(sqs: &Client, url: &str) -> Result<u64, Failure> {
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .map_err(aws("SQS", "GetQueueAttributes"))
        .with_context(|| format!("reading the depth of {url}"))?
        .attributes
        .unwrap_or_default();
    Ok(attributes
        .get(&QueueAttributeName::ApproximateNumberOfMessages)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

/// The jobs queue and its dead-letter queue.
pub(super) async fn queues(deployment: &mut Deployment) -> Result<(String, String), Failure> {
    let Some(queue) = deployment.queue_url().await? else {
        return Err(Failure::msg(
            USAGE,
            "which jobs queue? give --stack NAME, or --queue-url URL",
        ));
    };
    let sqs = Client::new(&deployment.sdk);
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .map_err(aws("SQS", "GetQueueAttributes"))
        .with_context(|| format!("reading the RedrivePolicy of {queue}"))?
        .attributes
        .unwrap_or_default();
    let Some(policy) = attributes.get(&QueueAttributeName::RedrivePolicy) else {
        return Err(Failure::msg(
            crate::exit::FAILURE,
            format!("the jobs queue {queue} has no dead-letter queue (no RedrivePolicy)"),
        ));
    };
    let dlq = dead_letter_url(&sqs, policy).await?;
    Ok((queue, dlq))
}

/// Receives up to 10 messages, hidden for `visibility` seconds.
pub(super) async fn receive(
    sqs: &Client,
    url: &str,
    visibility: i32,
) -> anyhow::Result<Vec<aws_sdk_sqs::types::Message>> {
    let received = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(BATCH)
        .visibility_timeout(visibility)
        // Long polling for a second: a short poll may miss messages on some servers.
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
        .send()
        .await
        .map_err(aws("SQS", "ReceiveMessage"))?;
    Ok(received.messages.unwrap_or_default())
}

/// Makes a received message visible again at once.
pub(super) async fn release(sqs: &Client, url: &str, receipt: &str) -> anyhow::Result<()> {
    sqs.change_message_visibility()
        .queue_url(url)
        .receipt_handle(receipt)
        .visibility_timeout(0)
        .send()
        .await
        .map_err(aws("SQS", "ChangeMessageVisibility"))?;
    Ok(())
}

/// Every message of the dead-letter queue (up to [`MOST`]), each made visible again.
pub(super) async fn peek(
    sqs: &Client,
    url: &str,
) -> anyhow::Result<Vec<aws_sdk_sqs::types::Message>> {
    let mut seen = HashSet::new();
    let mut messages = Vec::new();
    let mut result = Ok(());
    while messages.len() < MOST {
        let batch = match receive(sqs, url, PEEK_SECONDS).await {
            Ok(batch) => batch,
            Err(err) => {
                result = Err(err);
                break;
            }
        };
        let fresh: Vec<_> = batch
            .into_iter()
            .filter(|m| seen.insert(m.message_id().unwrap_or_default().to_owned()))
            .collect();
        if fresh.is_empty() {
            break;
        }
        messages.extend(fresh);
    }
    // Visible again whatever happened above, so that nothing stays hidden for long.
    for message in &messages {
        if let Some(receipt) = message.receipt_handle() {
            release(sqs, url, receipt).await?;
        }
    }
    result.map(|()| messages)
}

/// A system attribute of a received message.
pub(super) fn system_attribute(
    message: &aws_sdk_sqs::types::Message,
    name: MessageSystemAttributeName,
) -> Option<&str> {
    message.attributes()?.get(&name).map(String::as_str)
}

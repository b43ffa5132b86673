//! [`SqsJobQueue`]: the [`JobQueue`] port on the SQS jobs queue, plus the receiving side
//! that `ephemera local` polls with (under Lambda the event source mapping receives).

use async_trait::async_trait;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use aws_sdk_sqs::Client;
use ephemera_core::message::QueueMessage;
use ephemera_core::ports::{JobQueue, QueueError};
use std::time::Duration;
use tracing::{instrument, warn};

/// The queue between the webhook and the scaler.
#[derive(Debug, Clone)]
pub struct SqsJobQueue {
    client: Client,
    queue_url: String,
}

/// One message taken from the queue, invisible to others until deleted or timed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    /// How many times it has been received, this time included.
    pub receive_count: u32,
}

/// SQS answered without a field it always sends.
#[derive(Debug, thiserror::Error)]
#[error("SQS answered without {0}")]
struct MissingField(&'static str);

fn queue_error<E, R>(err: SdkError<E, R>) -> QueueError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match err.code() {
        Some("ThrottlingException" | "RequestThrottled" | "Throttling") => {
            QueueError::Throttled(Box::new(err))
        }
        _ => QueueError::Transient(Box::new(err)),
    }
}

impl SqsJobQueue {
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        SqsJobQueue {
            client,
            queue_url: queue_url.into(),
        }
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// Receives up to `max` messages (1..=10), long-polling for `wait_seconds` (0..=20).
    #[instrument(skip_all, fields(max, wait_seconds))]
    pub async fn receive(
        &self,
        max: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        let output = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max)
            .wait_time_seconds(wait_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .customize()
            .config_override(
                aws_sdk_sqs::Config::builder().timeout_config(long_poll_timeouts(wait_seconds)),
            )
            .send()
            .await
            .map_err(queue_error)?;
        let mut received = Vec::new();
        for message in output.messages.unwrap_or_default() {
            let receive_count = message
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|count| count.parse().ok())
                .unwrap_or(1);
            let (Some(message_id), Some(receipt_handle)) =
                (message.message_id, message.receipt_handle)
            else {
                // Without a receipt handle it cannot be deleted; it will come back.
                warn!("skipping a received message without id or receipt handle");
                continue;
            };
            received.push(ReceivedMessage {
                message_id,
                receipt_handle,
                body: message.body.unwrap_or_default(),
                receive_count,
            });
        }
        Ok(received)
    }

    /// Makes a received message visible again after `delay` (at most 12 hours).
    pub async fn retry_after(
        &self,
        receipt_handle: &str,
        delay: Duration,
    ) -> Result<(), QueueError> {
        let seconds = delay.as_secs().min(43_200) as i32;
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(seconds)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(())
    }

    /// Deletes a handled message.
    #[instrument(skip_all)]
    pub async fn delete(&self, receipt_handle: &str) -> Result<(), QueueError> {
        self.client
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(())
    }

    /// About how many messages wait to be received.
    pub async fn approximate_depth(&self) -> Result<u64, QueueError> {
        let output = self
            .client
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .map_err(queue_error)?;
        output
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessages))
            .and_then(|depth| depth.parse().ok())
            .ok_or_else(|| {
                QueueError::Transient(Box::new(MissingField("ApproximateNumberOfMessages")))
            })
    }
}

/// The default timeouts, stretched by a long poll of `wait_seconds`.
fn long_poll_timeouts(wait_seconds: i32) -> aws_config::timeout::TimeoutConfig {
    let wait = Duration::from_secs(wait_seconds.max(0) as u64);
    crate::client::AwsTimeouts::DEFAULT
        .with_long_poll(wait)
        .to_sdk()
}

/// The URL of the queue named `name`.
pub async fn queue_url(client: &Client, name: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    client
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .with_context(|| format!("finding queue {name}"))?
        .queue_url
        .with_context(|| format!("SQS returned no URL for queue {name}"))
}

/// The environment variable Lambda sets to the invocation's trace header (the SDK copies
/// it into `X-Amzn-Trace-Id` on every request, and SQS keeps it with the message).
const TRACE_ID_VAR: &str = "_X_AMZN_TRACE_ID";

/// `header` without its `Lineage` field: the count of invocations Lambda's
/// recursive-loop detection keeps. `None` if nothing else is left.
pub(crate) fn without_lineage(header: &str) -> Option<String> {
    let kept: Vec<&str> = header
        .split(';')
        .map(str::trim)
        .filter(|field| !field.is_empty() && !field.starts_with("Lineage="))
        .collect();
    (!kept.is_empty()).then(|| kept.join(";"))
}

impl SqsJobQueue {
    /// Sends `message`, delayed by `delay` (at most SQS's 15 minutes); with
    /// `fresh_lineage`, with the invocation's trace header minus its `Lineage`.
    async fn put(
        &self,
        message: &QueueMessage,
        delay: Duration,
        fresh_lineage: bool,
    ) -> Result<(), QueueError> {
        let seconds = delay.as_secs().min(900) as i32;
        let request = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(message.encode())
            .set_delay_seconds((seconds > 0).then_some(seconds));
        let trace = std::env::var(TRACE_ID_VAR)
            .ok()
            .filter(|_| fresh_lineage)
            .and_then(|header| without_lineage(&header));
        match trace {
            // Set here, the SDK's recursion detection leaves the header as it is.
            Some(trace) => {
                request
                    .customize()
                    .mutate_request(move |request| {
                        request
                            .headers_mut()
                            .insert("x-amzn-trace-id", trace.clone());
                    })
                    .send()
                    .await
            }
            None => request.send().await,
        }
        .map_err(queue_error)?;
        Ok(())
    }
}

#[async_trait]
impl JobQueue for SqsJobQueue {
    #[instrument(skip_all, fields(job_id = message.job_id, kind = ?message.kind))]
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError> {
        self.put(message, Duration::ZERO, false).await
    }

    /// A job sent back to wait (for capacity, its registration turn, another delivery's
    /// creation) starts a new chain for Lambda's recursive-loop detection: the trace
    /// header goes without its `Lineage` count. Otherwise Lambda would stop the 17th
    /// delivery of a job that waits at a full pool (about five minutes of waiting) and
    /// move it to the dead-letter queue. The wait is bounded by the job itself: the
    /// scaler ends it once the table says the job is over.
    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError> {
        self.put(message, delay, true).await
    }
}

#[cfg(test)]
mod tests {
    use super::without_lineage;

    #[test]
    fn the_lineage_field_is_taken_out_of_a_trace_header() {
        assert_eq!(
            without_lineage("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0;Lineage=a87bd80c:15")
                .as_deref(),
            Some("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0")
        );
        assert_eq!(
            without_lineage("Root=1-2-3;Lineage=a87bd80c:3;Sampled=1").as_deref(),
            Some("Root=1-2-3;Sampled=1")
        );
        assert_eq!(without_lineage("Lineage=a87bd80c:3"), None);
    }
}

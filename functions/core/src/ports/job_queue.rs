//! [`JobQueue`]: the queue between webhook and scaler (and the scaler's own requeues).
//!
//! Fake: `memory::MemoryQueue`. Adapter: `ephemera_aws::SqsJobQueue`.

use super::Cause;
use crate::message::QueueMessage;
use async_trait::async_trait;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue throttled the request")]
    Throttled(#[source] Cause),
    #[error("queue request failed")]
    Transient(#[source] Cause),
}

/// The jobs queue between webhook and scaler.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Sends one message. Not idempotent: the scaler copes with duplicates.
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError>;

    /// Sends one message that becomes visible only after `delay` (at most 15 minutes):
    /// a job waiting for capacity goes back in line as a fresh message, so waiting never
    /// counts against the queue's maxReceiveCount.
    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError>;
}

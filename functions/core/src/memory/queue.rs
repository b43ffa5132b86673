//! [`MemoryQueue`]: the jobs queue as a list of sent messages.
//!
//! Like SQS it keeps every message sent, duplicates included; the test plays the scaler
//! by taking them out.

use super::{lock, InjectedFailure};
use crate::message::QueueMessage;
use crate::ports::{JobQueue, QueueError};
use async_trait::async_trait;
use std::sync::Mutex;
use std::time::Duration;

/// Construct with [`MemoryQueue::new`]; read with [`sent`](MemoryQueue::sent) or
/// [`take`](MemoryQueue::take).
#[derive(Debug, Default)]
pub struct MemoryQueue {
    state: Mutex<QueueState>,
}

#[derive(Debug, Default)]
struct QueueState {
    messages: Vec<QueueMessage>,
    delays: Vec<Duration>,
    failing: bool,
    sends: usize,
}

impl MemoryQueue {
    pub fn new() -> MemoryQueue {
        MemoryQueue::default()
    }

    /// The messages sent and not yet taken, oldest first.
    pub fn sent(&self) -> Vec<QueueMessage> {
        lock(&self.state).messages.clone()
    }

    /// Removes and returns the messages sent so far, oldest first.
    pub fn take(&self) -> Vec<QueueMessage> {
        std::mem::take(&mut lock(&self.state).messages)
    }

    /// The delay each kept message was sent with (zero for `send`), in order.
    pub fn delays(&self) -> Vec<Duration> {
        lock(&self.state).delays.clone()
    }

    /// While on, every `send` fails with [`QueueError::Transient`] and keeps nothing.
    pub fn fail_sends(&self, on: bool) {
        lock(&self.state).failing = on;
    }

    /// Calls of `send`, failed ones included.
    pub fn send_calls(&self) -> usize {
        lock(&self.state).sends
    }
}

#[async_trait]
impl JobQueue for MemoryQueue {
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError> {
        self.send_after(message, Duration::ZERO).await
    }

    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError> {
        let mut state = lock(&self.state);
        state.sends += 1;
        if state.failing {
            return Err(QueueError::Transient(Box::new(InjectedFailure("send"))));
        }
        state.messages.push(message.clone());
        state.delays.push(delay);
        Ok(())
    }
}

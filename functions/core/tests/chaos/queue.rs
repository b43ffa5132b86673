//! The jobs queue as SQS behaves: delivery at least once and in no particular order, a
//! received message hidden for [`VISIBILITY`] and seen again unless deleted, and moved to
//! the dead-letter queue once received more than [`MAX_RECEIVES`] times, where it waits
//! for the operator's redrive (`ephemera jobs dlq redrive`: each message back on the
//! queue, body unchanged).
//!
//! Delays are rounded up to a [`DELAY_GRID`], so the scaler's random jitter on deferred
//! jobs cannot make one seed's schedule differ from run to run.

use crate::rng::Rng;
use async_trait::async_trait;
use ephemera_core::memory::InjectedFailure;
use ephemera_core::message::QueueMessage;
use ephemera_core::ports::{JobQueue, QueueError};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use time::OffsetDateTime;

/// How long a received message stays hidden (the queue's visibility timeout).
pub const VISIBILITY: Duration = Duration::from_secs(120);
/// The redrive policy's maxReceiveCount.
pub const MAX_RECEIVES: u32 = 4;
/// Delayed messages become visible on this grid.
pub const DELAY_GRID: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct Stored {
    pub id: String,
    pub message: QueueMessage,
    visible_at: OffsetDateTime,
    receives: u32,
}

#[derive(Default)]
struct QueueState {
    now: Option<OffsetDateTime>,
    next_id: u64,
    messages: Vec<Stored>,
    dead: Vec<QueueMessage>,
    /// Messages ever moved to the dead-letter queue, redriven ones included.
    dead_lettered: u64,
    failing_sends: bool,
}

/// Construct with [`SimQueue::default`]; the schedule sets its clock with `set_now`.
#[derive(Default)]
pub struct SimQueue {
    state: Mutex<QueueState>,
}

impl SimQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_now(&self, now: OffsetDateTime) {
        self.lock().now = Some(now);
    }

    /// While on, every handler's `send` fails and keeps nothing.
    pub fn fail_sends(&self, on: bool) {
        self.lock().failing_sends = on;
    }

    /// Enqueues as the webhook function does (its own send failing is a lost delivery,
    /// which the schedule plays separately).
    pub fn push(&self, message: &QueueMessage) {
        self.store(message, Duration::ZERO);
    }

    fn store(&self, message: &QueueMessage, delay: Duration) {
        let mut state = self.lock();
        let now = state.now.expect("queue clock set");
        let grid = DELAY_GRID.as_secs();
        let delay = Duration::from_secs(delay.as_secs().div_ceil(grid) * grid);
        state.next_id += 1;
        let stored = Stored {
            id: format!("msg-{}", state.next_id),
            message: message.clone(),
            visible_at: now + delay,
            receives: 0,
        };
        state.messages.push(stored);
    }

    /// Receives up to `max` visible messages in random order; those received too often
    /// go to the dead-letter queue instead.
    pub fn receive(&self, max: usize, rng: &mut Rng) -> Vec<Stored> {
        let mut state = self.lock();
        let now = state.now.expect("queue clock set");
        let mut visible: Vec<usize> = (0..state.messages.len())
            .filter(|&i| state.messages[i].visible_at <= now)
            .collect();
        rng.shuffle(&mut visible);
        let mut received = Vec::new();
        let mut dead = Vec::new();
        for i in visible {
            if received.len() == max {
                break;
            }
            let stored = &mut state.messages[i];
            if stored.receives >= MAX_RECEIVES {
                dead.push(stored.id.clone());
                continue;
            }
            stored.receives += 1;
            stored.visible_at = now + VISIBILITY;
            received.push(stored.clone());
        }
        for id in dead {
            let at = state.messages.iter().position(|m| m.id == id);
            if let Some(at) = at {
                let stored = state.messages.remove(at);
                state.dead.push(stored.message);
                state.dead_lettered += 1;
            }
        }
        received
    }

    /// Deletes a handled message; one already gone is fine.
    pub fn delete(&self, id: &str) {
        self.lock().messages.retain(|m| m.id != id);
    }

    /// Messages waiting, visible or not.
    pub fn waiting(&self) -> usize {
        self.lock().messages.len()
    }

    pub fn dead_letters(&self) -> Vec<QueueMessage> {
        self.lock().dead.clone()
    }

    /// Messages ever dead-lettered, those since redriven included.
    pub fn dead_lettered(&self) -> u64 {
        self.lock().dead_lettered
    }

    /// The operator's redrive: every dead letter back on the queue as a fresh message,
    /// body unchanged. Returns how many.
    pub fn redrive(&self) -> usize {
        let dead = std::mem::take(&mut self.lock().dead);
        for message in &dead {
            self.push(message);
        }
        dead.len()
    }
}

#[async_trait]
impl JobQueue for SimQueue {
    async fn send(&self, message: &QueueMessage) -> Result<(), QueueError> {
        self.send_after(message, Duration::ZERO).await
    }

    async fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError> {
        if self.lock().failing_sends {
            return Err(QueueError::Transient(Box::new(InjectedFailure("send"))));
        }
        self.store(message, delay);
        Ok(())
    }
}

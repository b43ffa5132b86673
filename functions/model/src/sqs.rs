//! The jobs queue as a standard SQS queue: a received message is hidden for the
//! visibility timeout and comes back unless deleted; one received more than
//! maxReceiveCount times goes to the dead-letter queue instead.

use ephemera_core::message::QueueMessage;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct Stored {
    pub id: String,
    pub message: QueueMessage,
    visible_at: Instant,
    receives: u32,
}

#[derive(Default)]
struct State {
    next_id: u64,
    messages: Vec<Stored>,
    dead: Vec<QueueMessage>,
}

/// Construct with [`SimQueue::new`].
pub struct SimQueue {
    visibility: Duration,
    max_receives: u32,
    state: Mutex<State>,
}

impl SimQueue {
    pub fn new(visibility: Duration, max_receives: u32) -> SimQueue {
        SimQueue {
            visibility,
            max_receives,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a message, visible after `delay`.
    pub fn push(&self, message: &QueueMessage, delay: Duration) {
        let mut state = self.state();
        state.next_id += 1;
        let stored = Stored {
            id: format!("m{}", state.next_id),
            message: message.clone(),
            visible_at: Instant::now() + delay,
            receives: 0,
        };
        state.messages.push(stored);
    }

    /// Receives up to `max` visible messages, oldest visible first; a message received
    /// too often goes to the dead-letter queue instead.
    pub fn receive(&self, max: usize) -> Vec<Stored> {
        let now = Instant::now();
        let hidden_until = now + self.visibility;
        let max_receives = self.max_receives;
        let mut state = self.state();
        let mut received = Vec::new();
        let mut dead = Vec::new();
        for stored in state.messages.iter_mut() {
            if received.len() == max {
                break;
            }
            if stored.visible_at > now {
                continue;
            }
            if stored.receives >= max_receives {
                dead.push(stored.id.clone());
                continue;
            }
            stored.receives += 1;
            stored.visible_at = hidden_until;
            received.push(stored.clone());
        }
        for id in dead {
            if let Some(at) = state.messages.iter().position(|m| m.id == id) {
                let stored = state.messages.remove(at);
                state.dead.push(stored.message);
            }
        }
        received
    }

    /// Deletes handled messages.
    pub fn delete(&self, ids: &[String]) {
        self.state().messages.retain(|m| !ids.contains(&m.id));
    }

    /// Messages visible now.
    pub fn visible(&self) -> usize {
        let now = Instant::now();
        self.state()
            .messages
            .iter()
            .filter(|m| m.visible_at <= now)
            .count()
    }

    /// Messages waiting, visible or not.
    pub fn waiting(&self) -> usize {
        self.state().messages.len()
    }

    pub fn dead_lettered(&self) -> usize {
        self.state().dead.len()
    }

    /// Jobs with a message in the dead-letter queue (a job sent again may have several).
    pub fn dead_lettered_jobs(&self) -> usize {
        let state = self.state();
        let jobs: std::collections::HashSet<u64> = state.dead.iter().map(|m| m.job_id).collect();
        jobs.len()
    }
}

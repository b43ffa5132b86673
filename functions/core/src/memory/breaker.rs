//! [`MemorySpotBreakers`]: each pool's spot circuit-breaker state in memory, keeping the
//! DynamoDB adapter's rules (an instance counted once, a later pause stands).

use crate::model::SpotBreakerState;
use crate::ports::SpotBreakerStore;
use crate::ports::StoreError;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use time::OffsetDateTime;

/// States by pool.
#[derive(Default)]
pub struct MemorySpotBreakers {
    pools: Mutex<HashMap<String, SpotBreakerState>>,
}

impl MemorySpotBreakers {
    pub fn new() -> MemorySpotBreakers {
        MemorySpotBreakers::default()
    }

    /// The pool's state as it is.
    pub fn state(&self, pool: &str) -> SpotBreakerState {
        self.lock().get(pool).cloned().unwrap_or_default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, SpotBreakerState>> {
        self.pools.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl SpotBreakerStore for MemorySpotBreakers {
    async fn note_interruption(
        &self,
        pool: &str,
        instance_id: &str,
        at: OffsetDateTime,
        forget_before: OffsetDateTime,
    ) -> Result<SpotBreakerState, StoreError> {
        let mut pools = self.lock();
        let state = pools.entry(pool.to_owned()).or_default();
        state
            .interrupted
            .entry(instance_id.to_owned())
            .or_insert(at);
        state.interrupted.retain(|_, when| *when >= forget_before);
        Ok(state.clone())
    }

    async fn pause_spot(&self, pool: &str, until: OffsetDateTime) -> Result<(), StoreError> {
        let mut pools = self.lock();
        let state = pools.entry(pool.to_owned()).or_default();
        if state.paused_until.is_none_or(|held| held < until) {
            state.paused_until = Some(until);
        }
        Ok(())
    }

    async fn breaker_state(&self, pool: &str) -> Result<SpotBreakerState, StoreError> {
        Ok(self.state(pool))
    }
}

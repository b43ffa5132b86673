//! [`SpotBreakerStore`]: each pool's spot interruptions and pause ([`crate::breaker`]),
//! an item of the runners table.
//!
//! Fake: `memory::MemorySpotBreakers`. Adapter: `ephemera_aws::breaker::DynamoSpotBreakers`.

use super::StoreError;
use crate::model::SpotBreakerState;
use async_trait::async_trait;
use time::OffsetDateTime;

/// Where each pool's interruptions are counted.
#[async_trait]
pub trait SpotBreakerStore: Send + Sync {
    /// Counts the interruption of `instance_id` in `pool` (once, however often it is
    /// reported), forgets those older than `forget_before`, and answers the state after.
    async fn note_interruption(
        &self,
        pool: &str,
        instance_id: &str,
        at: OffsetDateTime,
        forget_before: OffsetDateTime,
    ) -> Result<SpotBreakerState, StoreError>;

    /// Pauses spot launches of `pool` until `until`; a later pause already set stands.
    async fn pause_spot(&self, pool: &str, until: OffsetDateTime) -> Result<(), StoreError>;

    /// The pool's state (empty when nothing was ever counted).
    async fn breaker_state(&self, pool: &str) -> Result<SpotBreakerState, StoreError>;
}

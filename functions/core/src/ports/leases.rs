//! [`Leases`]: exclusive, expiring leases on a named piece of work, what makes "one
//! reaper at a time" hold by construction. EventBridge delivers a schedule at least once
//! and retries an asynchronous invocation that failed, so two reapers can start
//! together; the one that does not get the lease leaves at once. A holder that dies
//! leaves a lease that expires by itself.
//!
//! Fake: `memory::MemoryLeases`. Adapter: `ephemera_aws::DynamoRunnerStore`
//! (an item of the runners table).

use super::StoreError;
use async_trait::async_trait;
use time::OffsetDateTime;

/// Leases kept beside the records (an item of the table).
#[async_trait]
pub trait Leases: Send + Sync {
    /// Takes the lease `name` for `holder` until `until`, if nobody holds it or its
    /// holder's time is over at `now`. Conditional: of two callers at once, exactly one
    /// gets `true`.
    async fn acquire(
        &self,
        name: &str,
        holder: &str,
        until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// Gives the lease back if `holder` still holds it; idempotent, and never takes a
    /// lease someone else has taken since.
    async fn release(&self, name: &str, holder: &str) -> Result<(), StoreError>;
}

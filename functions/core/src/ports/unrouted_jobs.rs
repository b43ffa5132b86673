//! [`UnroutedJobs`]: the trace of jobs no pool takes ([`crate::unrouted`]), written by
//! the webhook and listed by `ephemera jobs list --status unrouted`.
//!
//! Fake: `memory::MemoryUnroutedJobs`. Adapter: `ephemera_aws::DynamoUnroutedJobs`.

use super::StoreError;
use crate::unrouted::UnroutedJob;
use async_trait::async_trait;

/// Where unrouted jobs are recorded and listed.
#[async_trait]
pub trait UnroutedJobs: Send + Sync {
    /// Records the job (a put: a redelivery overwrites the same record).
    async fn record_unrouted(&self, job: &UnroutedJob) -> Result<(), StoreError>;

    /// Every recorded job not yet expired, oldest first.
    async fn list_unrouted(&self) -> Result<Vec<UnroutedJob>, StoreError>;
}

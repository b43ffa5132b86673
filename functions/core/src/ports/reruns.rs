//! [`RerunStore`]: the wanted re-runs of interrupted jobs ([`crate::rerun`]), kept in
//! the deployment's table.
//!
//! Fake: `memory::MemoryReruns`. Adapter: `ephemera_aws::reruns::DynamoReruns`.

use super::StoreError;
use crate::model::{Rerun, RerunState, RunKey};
use async_trait::async_trait;
use time::OffsetDateTime;

/// The wanted re-runs, kept in the deployment's table.
#[async_trait]
pub trait RerunStore: Send + Sync {
    /// Records `rerun` unless its run has an entry already (conditional put; idempotent):
    /// true if recorded now.
    async fn want_rerun(&self, rerun: &Rerun) -> Result<bool, StoreError>;

    /// Every entry. Read-only.
    async fn reruns(&self) -> Result<Vec<Rerun>, StoreError>;

    /// The entry of `run`, if any. Read-only, strongly consistent.
    async fn rerun_of(&self, run: &RunKey) -> Result<Option<Rerun>, StoreError>;

    /// Moves `run`'s entry from exactly `from` to `to`, to be looked at again at
    /// `next_check_at`. Conditional: false (and nothing written) when the entry is not in
    /// `from` (another reaper moved it) or is gone.
    async fn move_rerun(
        &self,
        run: &RunKey,
        from: RerunState,
        to: RerunState,
        next_check_at: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// Forgets `run`'s entry. Idempotent.
    async fn forget_rerun(&self, run: &RunKey) -> Result<(), StoreError>;
}

//! [`JitConfigStore`]: where a runner's JIT config waits for its instance.
//!
//! Fake: `memory::MemoryJitStore`. Adapter: `ephemera_aws::DynamoJitConfigs`.

use super::{Cause, JitConfig};
use crate::model::HostRunner;
use async_trait::async_trait;
use time::OffsetDateTime;

#[derive(Debug, thiserror::Error)]
pub enum JitStoreError {
    #[error("JIT config store throttled the request")]
    Throttled(#[source] Cause),
    #[error("JIT config store request failed")]
    Transient(#[source] Cause),
    /// The store holds a config of a later registration for this instance: a try that
    /// lost its lease came back late. Nothing was written.
    #[error("a later JIT config (runner id {stored}) is already waiting for the instance")]
    Superseded { stored: u64 },
    /// The store refuses the request as it is (too large, no such table): retrying the
    /// same request cannot succeed.
    #[error("JIT config store refused the request")]
    Rejected(#[source] Cause),
}

/// What the reaper's delete of a JIT item learns from the tombstone the instance's
/// bootstrap left (empty for an item never read, or already gone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tombstone {
    /// When the instance read its config.
    pub read_at: Option<OffsetDateTime>,
    /// The runner the host ran, as it wrote it with the read.
    pub runner: HostRunner,
}

/// Where a runner's JIT config waits for its instance (never user data or tags).
#[async_trait]
pub trait JitConfigStore: Send + Sync {
    /// Stores the JIT config that only `instance_id` may read. Conditional: replaces a
    /// config of the same or an earlier registration (a lower GitHub runner id), refuses
    /// one of a later registration with [`JitStoreError::Superseded`]; idempotent.
    async fn put(
        &self,
        instance_id: &str,
        runner_name: &str,
        jit: &JitConfig,
    ) -> Result<(), JitStoreError>;

    /// Writes the `prepare` item of a stopped pool's instance: no config, only the word
    /// that the host prepares and powers off (docs/design.md, "Stopped pool"). Any put
    /// of a config replaces it; idempotent.
    async fn put_prepare(&self, instance_id: &str, runner_name: &str) -> Result<(), JitStoreError>;

    /// Deletes the item of `instance_id`, config or tombstone; one already gone counts
    /// as deleted. Returns when the instance read its config and the runner it ran, if it
    /// left the tombstone that says so (the bootstrap removes the config and stamps the
    /// read); never the config itself.
    async fn delete(&self, instance_id: &str) -> Result<Tombstone, JitStoreError>;
}

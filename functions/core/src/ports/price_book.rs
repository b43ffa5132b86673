//! [`PriceBook`]: the deployment's cached instance prices.
//!
//! Fake: `memory::MemoryPriceBook`. Adapter: `ephemera_aws::DynamoPriceBook`.

use super::StoreError;
use crate::model::Price;
use async_trait::async_trait;

/// The cached prices, kept in the deployment's table.
#[async_trait]
pub trait PriceBook: Send + Sync {
    /// Every cached price (none before the first read). Read-only.
    async fn read_prices(&self) -> Result<Vec<Price>, StoreError>;

    /// Replaces the cached prices with `prices`. Idempotent; one writer (the reaper,
    /// under its lease).
    async fn write_prices(&self, prices: &[Price]) -> Result<(), StoreError>;
}

//! [`PriceList`]: the providers' instance prices, read by the reaper for its cache.
//!
//! Fake: `memory::FakePriceList`. Adapter: `ephemera_aws::AwsPriceList`.

use super::Cause;
use crate::model::Market;
use async_trait::async_trait;

/// Why a price list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("price list throttled the request")]
    Throttled(#[source] Cause),
    #[error("price list request failed")]
    Transient(#[source] Cause),
}

/// The providers' price lists (AWS: the Price List Query API for on-demand, the spot
/// price history for spot), read by the reaper at most daily per type.
#[async_trait]
pub trait PriceList: Send + Sync {
    /// The region whose prices are read.
    fn region(&self) -> &str;

    /// The current price of an hour of `instance_type` in `market`, in millionths of a
    /// USD; `None` when the region does not offer it. Read-only.
    async fn hourly_price(
        &self,
        instance_type: &str,
        market: Market,
    ) -> Result<Option<u64>, PriceError>;

    /// The current price of a GiB-month of EBS volume type `volume_type` (`gp3`), in
    /// millionths of a USD; `None` when the region does not offer it. Read-only.
    async fn volume_price(&self, volume_type: &str) -> Result<Option<u64>, PriceError>;
}

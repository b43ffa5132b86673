//! The price cache and the providers' price lists, in memory: [`MemoryPriceBook`] holds
//! what the table would, [`FakePriceList`] answers from planted prices and counts every
//! read, so a test can say the reaper read a price once and not again within a day.

use super::{lock, InjectedFailure};
use crate::ports::{Market, PriceBook, PriceError, PriceList, StoreError};
use crate::prices::Price;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;

/// The cached prices, as the table's item would hold them.
#[derive(Debug, Default)]
pub struct MemoryPriceBook {
    prices: Mutex<Vec<Price>>,
}

impl MemoryPriceBook {
    pub fn new() -> MemoryPriceBook {
        MemoryPriceBook::default()
    }

    /// What is cached now.
    pub fn prices(&self) -> Vec<Price> {
        lock(&self.prices).clone()
    }
}

#[async_trait]
impl PriceBook for MemoryPriceBook {
    async fn read_prices(&self) -> Result<Vec<Price>, StoreError> {
        Ok(lock(&self.prices).clone())
    }

    async fn write_prices(&self, prices: &[Price]) -> Result<(), StoreError> {
        *lock(&self.prices) = prices.to_vec();
        Ok(())
    }
}

/// A price list answering from planted prices; a type with none planted is not offered.
#[derive(Debug)]
pub struct FakePriceList {
    region: String,
    prices: Mutex<HashMap<(String, Market), u64>>,
    reads: Mutex<Vec<(String, Market)>>,
    failing: Mutex<bool>,
}

impl FakePriceList {
    pub fn new(region: &str) -> FakePriceList {
        FakePriceList {
            region: region.to_owned(),
            prices: Mutex::default(),
            reads: Mutex::default(),
            failing: Mutex::new(false),
        }
    }

    /// Offers `instance_type` in `market` at `usd_micros_per_hour`.
    pub fn offer(&self, instance_type: &str, market: Market, usd_micros_per_hour: u64) {
        lock(&self.prices).insert((instance_type.to_owned(), market), usd_micros_per_hour);
    }

    /// Offers EBS volume type `volume_type` at `usd_micros_per_gib_month` (read through
    /// [`PriceList::volume_price`], recorded as `ebs:<type>`, on-demand).
    pub fn offer_volume(&self, volume_type: &str, usd_micros_per_gib_month: u64) {
        let key = (crate::prices::volume_key(volume_type), Market::OnDemand);
        lock(&self.prices).insert(key, usd_micros_per_gib_month);
    }

    /// Every read so far, in order.
    pub fn reads(&self) -> Vec<(String, Market)> {
        lock(&self.reads).clone()
    }

    /// Makes every read fail (or succeed again).
    pub fn fail(&self, failing: bool) {
        *lock(&self.failing) = failing;
    }
}

#[async_trait]
impl PriceList for FakePriceList {
    fn region(&self) -> &str {
        &self.region
    }

    async fn hourly_price(
        &self,
        instance_type: &str,
        market: Market,
    ) -> Result<Option<u64>, PriceError> {
        lock(&self.reads).push((instance_type.to_owned(), market));
        if *lock(&self.failing) {
            return Err(PriceError::Transient(Box::new(InjectedFailure(
                "price list",
            ))));
        }
        Ok(lock(&self.prices)
            .get(&(instance_type.to_owned(), market))
            .copied())
    }

    async fn volume_price(&self, volume_type: &str) -> Result<Option<u64>, PriceError> {
        let key = crate::prices::volume_key(volume_type);
        self.hourly_price(&key, Market::OnDemand).await
    }
}

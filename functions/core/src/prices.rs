//! Instance prices and what a job's instance cost.
//!
//! The reaper keeps one cached price per region, instance type and market in the
//! deployment's table ([`PriceBook`](crate::ports::PriceBook)) and reads the providers' price lists
//! ([`PriceList`](crate::ports::PriceList)) only for the entries missing or older than
//! [`PRICE_MAX_AGE`], at most [`PRICE_READS_PER_RUN`] a run (none for [`PRICE_RETRY`]
//! after a failed read): prices are read daily, never per job. When it finishes a runner's deletion it prices the instance's life from that
//! cache, in the write it makes anyway ([`JobCost`] on the runner record).
//!
//! Money is kept in whole millionths of a US dollar (`u64`), so records stay exactly
//! comparable and sums never drift. A type the region does not offer has no price, never
//! a guessed one and never zero: the cost then says why it is unknown.

pub use crate::model::{JobCost, Price};
use crate::model::{Market, RunnerRecord};
use crate::timeline::launch_requested_at;
use std::collections::BTreeSet;
use time::{Duration, OffsetDateTime};

/// How old a cached price may be before the reaper reads it again.
pub const PRICE_MAX_AGE: Duration = Duration::hours(24);
/// How long price reads wait after one failed.
pub const PRICE_RETRY: Duration = Duration::minutes(15);
/// Price-list reads per reaper run at most (each is one or two provider calls).
pub const PRICE_READS_PER_RUN: usize = 16;
/// EC2 bills a Linux instance per second with a minimum of 60 seconds.
pub const BILLING_MINIMUM_SECONDS: u64 = 60;
/// Millionths of a dollar in a dollar.
pub const MICROS_PER_USD: u64 = 1_000_000;

impl Price {
    /// Whether the price is due to be read again at `now`.
    pub fn is_stale(&self, now: OffsetDateTime) -> bool {
        now - self.read_at >= PRICE_MAX_AGE
    }
}

/// The price of `instance_type` in `market`, if cached.
pub fn find<'a>(prices: &'a [Price], instance_type: &str, market: Market) -> Option<&'a Price> {
    prices
        .iter()
        .find(|p| p.instance_type == instance_type && p.market == market)
}

/// The (type, market) pairs to read from the price list at `now`: every market of every
/// type in `types` whose cached price is missing or stale, at most
/// [`PRICE_READS_PER_RUN`], missing ones first.
pub fn to_read(
    prices: &[Price],
    types: &BTreeSet<String>,
    now: OffsetDateTime,
) -> Vec<(String, Market)> {
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    for instance_type in types {
        for market in [Market::OnDemand, Market::Spot] {
            match find(prices, instance_type, market) {
                None => missing.push((instance_type.clone(), market)),
                Some(price) if price.is_stale(now) => stale.push((instance_type.clone(), market)),
                Some(_) => {}
            }
        }
    }
    missing.extend(stale);
    missing.truncate(PRICE_READS_PER_RUN);
    missing
}

/// `prices` with `fresh` in place of the entries for the same type and market.
pub fn merge(prices: &[Price], fresh: Vec<Price>) -> Vec<Price> {
    let mut merged: Vec<Price> = prices
        .iter()
        .filter(|p| find(&fresh, &p.instance_type, p.market).is_none())
        .cloned()
        .collect();
    merged.extend(fresh);
    merged.sort_by(|a, b| {
        (a.instance_type.as_str(), a.market.as_str())
            .cmp(&(b.instance_type.as_str(), b.market.as_str()))
    });
    merged
}

/// Millionths of a USD for `seconds` at `usd_micros_per_hour`, billed per second with
/// EC2's 60-second minimum, rounded to the nearest millionth.
pub fn cost_micros(seconds: u64, usd_micros_per_hour: u64) -> u64 {
    let billed = u128::from(seconds.max(BILLING_MINIMUM_SECONDS));
    let micros = (billed * u128::from(usd_micros_per_hour) + 1800) / 3600;
    u64::try_from(micros).unwrap_or(u64::MAX)
}

/// What `runner`'s instance cost from its launch request until `until` (its
/// termination, or now while it lives), priced from `prices`; `None` for a runner that
/// never had an instance. `region` names the region in "not offered" reasons when the
/// cache has no entry to name it.
pub fn cost_of(
    runner: &RunnerRecord,
    until: OffsetDateTime,
    prices: &[Price],
    repository: Option<String>,
) -> Option<JobCost> {
    runner.instance_id.as_ref()?;
    let launched = launch_requested_at(runner).unwrap_or(runner.created_at);
    let seconds = u64::try_from((until - launched).whole_seconds()).unwrap_or(0);
    let price = match (&runner.instance_type, runner.market) {
        (Some(instance_type), Some(market)) => find(prices, instance_type, market)
            .ok_or_else(|| format!("no price: {instance_type} not read yet")),
        _ => Err("no price: instance type or market not recorded".to_owned()),
    };
    let per_hour = price.and_then(|p| {
        p.usd_micros_per_hour
            .ok_or_else(|| format!("no price: {} not offered in {}", p.instance_type, p.region))
    });
    let billed = seconds.max(BILLING_MINIMUM_SECONDS);
    Some(match per_hour {
        Ok(per_hour) => JobCost {
            seconds: billed,
            usd_micros_per_hour: Some(per_hour),
            usd_micros: Some(cost_micros(seconds, per_hour)),
            unpriced: None,
            repository,
        },
        Err(reason) => JobCost {
            seconds: billed,
            usd_micros_per_hour: None,
            usd_micros: None,
            unpriced: Some(reason),
            repository,
        },
    })
}

/// Dollars for people: `$0.0123`, four decimals (a hundredth of a cent).
pub fn usd(micros: u64) -> String {
    let hundredths_of_cents = (micros + 50) / 100;
    format!(
        "${}.{:04}",
        hundredths_of_cents / 10_000,
        hundredths_of_cents % 10_000
    )
}

/// Dollars as a number, for JSON and metrics.
pub fn usd_f64(micros: u64) -> f64 {
    micros as f64 / MICROS_PER_USD as f64
}

#[cfg(test)]
#[path = "prices_tests.rs"]
mod tests;

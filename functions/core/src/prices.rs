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
use crate::timeline::{launch_requested_at, stopped_span};
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
/// The month an EBS GB-month price is prorated over, in seconds: EBS bills provisioned
/// storage per second (60 seconds at least), a GB-month being a GB for a 30-day month
/// in AWS's own example ("Amazon EBS pricing", https://aws.amazon.com/ebs/pricing/:
/// "$0.125 per GB-month * 2000 GB * 43,200 seconds / (86,400 seconds/day * 30-day
/// month)").
pub const VOLUME_MONTH_SECONDS: u64 = 30 * 86_400;
/// The EBS type priced when a record does not say its root volume's: the stack's runner
/// template maps a `gp3` root volume (template.yaml, `RunnerLaunchTemplate`).
pub const DEFAULT_VOLUME_TYPE: &str = "gp3";

/// How the price cache's key of an EBS volume type begins.
pub const VOLUME_PREFIX: &str = "ebs:";

/// The price cache's key of EBS volume type `volume_type`: `ebs:gp3`.
pub fn volume_key(volume_type: &str) -> String {
    format!("{VOLUME_PREFIX}{volume_type}")
}

/// The cache key of the root volume a stopped pool's record waits on, `None` for any
/// other record (only a stopped instance's volume is priced).
pub fn volume_key_of(runner: &RunnerRecord) -> Option<String> {
    runner.prepare.then(|| {
        volume_key(
            runner
                .root_volume_type
                .as_deref()
                .unwrap_or(DEFAULT_VOLUME_TYPE),
        )
    })
}

/// Millionths of a USD for `gib` GiB kept `seconds` at `usd_micros_per_gib_month`,
/// billed per second with EBS's 60-second minimum, rounded to the nearest millionth.
pub fn volume_micros(gib: u32, seconds: u64, usd_micros_per_gib_month: u64) -> u64 {
    let billed = u128::from(seconds.max(BILLING_MINIMUM_SECONDS));
    let month = u128::from(VOLUME_MONTH_SECONDS);
    let micros =
        (u128::from(gib) * billed * u128::from(usd_micros_per_gib_month) + month / 2) / month;
    u64::try_from(micros).unwrap_or(u64::MAX)
}

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
/// type in `types` (an EBS volume's key: on-demand only) whose cached price is missing or stale, at most
/// [`PRICE_READS_PER_RUN`], missing ones first.
pub fn to_read(
    prices: &[Price],
    types: &BTreeSet<String>,
    now: OffsetDateTime,
) -> Vec<(String, Market)> {
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    for instance_type in types {
        // A volume has one price, kept as on-demand.
        let markets: &[Market] = if instance_type.starts_with(VOLUME_PREFIX) {
            &[Market::OnDemand]
        } else {
            &[Market::OnDemand, Market::Spot]
        };
        for &market in markets {
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
/// never had an instance. A stopped pool's instance is billed as EC2 bills a stopped
/// instance: not for the time it was stopped, only for its root volume then (priced
/// from the volume type's GB-month price, when cached; "Stop and start Amazon EC2
/// instances", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Stop_Start.html).
pub fn cost_of(
    runner: &RunnerRecord,
    until: OffsetDateTime,
    prices: &[Price],
    repository: Option<String>,
) -> Option<JobCost> {
    runner.instance_id.as_ref()?;
    let launched = launch_requested_at(runner).unwrap_or(runner.created_at);
    let whole = u64::try_from((until - launched).whole_seconds()).unwrap_or(0);
    let stopped_seconds = stopped_span(runner, until)
        .map_or(0, |span| u64::try_from(span.whole_seconds()).unwrap_or(0))
        .min(whole);
    let seconds = whole - stopped_seconds;
    let volume_usd_micros = (stopped_seconds > 0)
        .then(|| {
            let key = volume_key_of(runner)?;
            let per_gib_month = find(prices, &key, Market::OnDemand)?.usd_micros_per_gib_month?;
            Some(volume_micros(
                runner.root_volume_gib?,
                stopped_seconds,
                per_gib_month,
            ))
        })
        .flatten();
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
            usd_micros: Some(cost_micros(seconds, per_hour) + volume_usd_micros.unwrap_or(0)),
            unpriced: None,
            repository,
            stopped_seconds,
            volume_usd_micros,
        },
        Err(reason) => JobCost {
            seconds: billed,
            usd_micros_per_hour: None,
            usd_micros: None,
            unpriced: Some(reason),
            repository,
            stopped_seconds,
            volume_usd_micros,
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

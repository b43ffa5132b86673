//! Prices for the cost of each job: the cached prices are read from the table once per
//! container (then kept in memory), the entries missing or older than a day are read
//! from the providers' price lists, a few a run, and a deleted runner's instance is
//! priced from what is cached, in the deletion's own write ([`crate::prices`]).
//!
//! The types priced are the pools' `instance_types` and the types on live runner
//! records (a sized job's instance may be of a type no pool lists).

use super::{Reaper, Snapshot};
use crate::handlers::error_chain;
use crate::metrics::{Dimension, Metric};
use crate::model::RunnerRecord;
use crate::ports::{PriceBook, PriceList};
use crate::prices::{self, JobCost, Price};
use std::collections::BTreeSet;
use std::sync::Arc;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// Where prices are cached and where they are read from.
#[derive(Clone)]
pub struct Pricing {
    pub book: Arc<dyn PriceBook>,
    pub list: Arc<dyn PriceList>,
}

impl Reaper {
    /// Loads the cache if this container has not, then reads what is missing or stale
    /// (at most [`prices::PRICE_READS_PER_RUN`], none after `deadline`) and caches it.
    /// Returns the prices read from the price lists.
    pub(super) async fn refresh_prices(
        &self,
        snapshot: &Snapshot,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> usize {
        let Some(pricing) = &self.pricing else {
            return 0;
        };
        let cached = match self.cached_prices(pricing).await {
            Some(cached) => cached,
            None => return 0,
        };
        let mut types: BTreeSet<String> = self
            .config
            .pools
            .iter()
            .flat_map(|pool| pool.instance_types.iter().cloned())
            .collect();
        types.extend(
            snapshot
                .runners
                .iter()
                .filter_map(|r| r.instance_type.clone()),
        );
        // A stopped pool's root volumes, priced while they wait stopped.
        types.extend(snapshot.runners.iter().filter_map(prices::volume_key_of));
        let failed_at = self.memory().price_failure;
        if failed_at.is_some_and(|at| now - at < prices::PRICE_RETRY) {
            return 0;
        }
        let mut fresh = Vec::new();
        for (instance_type, market) in prices::to_read(&cached, &types, now) {
            if Instant::now() >= deadline {
                break;
            }
            let read = match instance_type.strip_prefix(prices::VOLUME_PREFIX) {
                Some(volume_type) => pricing
                    .list
                    .volume_price(volume_type)
                    .await
                    .map(|per_gib_month| (None, per_gib_month)),
                None => pricing
                    .list
                    .hourly_price(&instance_type, market)
                    .await
                    .map(|per_hour| (per_hour, None)),
            };
            match read {
                Ok((usd_micros_per_hour, usd_micros_per_gib_month)) => fresh.push(Price {
                    region: pricing.list.region().to_owned(),
                    instance_type,
                    market,
                    usd_micros_per_hour,
                    usd_micros_per_gib_month,
                    read_at: now,
                }),
                Err(err) => {
                    // A price list that fails for one type fails for the others: the
                    // rest waits, so a missing or throttled API is not asked every run.
                    warn!(%instance_type, market = market.as_str(), error = %error_chain(&err), retry_in = ?prices::PRICE_RETRY, "cannot read a price; reads wait");
                    self.memory().price_failure = Some(now);
                    break;
                }
            }
        }
        if fresh.len() == prices::to_read(&cached, &types, now).len() {
            self.memory().price_failure = None;
        }
        if fresh.is_empty() {
            return 0;
        }
        let read = fresh.len();
        let merged = prices::merge(&cached, fresh);
        if let Err(err) = pricing.book.write_prices(&merged).await {
            warn!(error = %error_chain(&err), "cannot cache prices; next run reads them again");
            return read;
        }
        info!(read, cached = merged.len(), "prices read");
        self.memory().prices = Some(merged);
        read
    }

    /// The prices this container knows, read from the table the first time.
    async fn cached_prices(&self, pricing: &Pricing) -> Option<Vec<Price>> {
        if let Some(prices) = self.memory().prices.clone() {
            return Some(prices);
        }
        match pricing.book.read_prices().await {
            Ok(prices) => {
                self.memory().prices = Some(prices.clone());
                Some(prices)
            }
            Err(err) => {
                warn!(error = %error_chain(&err), "cannot read cached prices; pricing waits");
                None
            }
        }
    }

    /// What `runner`'s instance cost until `at`, from the cached prices; the job's
    /// repository is the runner's own (repository-scoped) or its job's (one read).
    pub(super) async fn job_cost(
        &self,
        runner: &RunnerRecord,
        at: OffsetDateTime,
    ) -> Option<JobCost> {
        self.pricing.as_ref()?;
        let prices = self.memory().prices.clone().unwrap_or_default();
        let repository = match (&runner.repo, runner.job_id) {
            (Some(repo), _) => Some(format!("{}/{repo}", runner.owner)),
            (None, Some(job_id)) => match self.store.get_job(job_id).await {
                Ok(job) => job.map(|job| format!("{}/{}", job.owner, job.repo)),
                Err(err) => {
                    warn!(runner = %runner.name, error = %error_chain(&err), "cannot read the job's repository; its cost is kept without it");
                    None
                }
            },
            (None, None) => None,
        };
        prices::cost_of(runner, at, &prices, repository)
    }

    /// `JobCost`, once per priced job, when its deletion was written.
    pub(super) fn record_cost(&self, cost: &JobCost) {
        let Some(micros) = cost.usd_micros else {
            return;
        };
        let repository = cost.repository.as_deref().unwrap_or("-");
        self.metrics.record(
            Metric::JobCost,
            &[(Dimension::Repository, repository)],
            prices::usd_f64(micros),
        );
    }
}

//! A job's cost on its runner's item: one map attribute `cost`
//! `{seconds, usd_micros?, usd_micros_per_hour?, unpriced?, repository?, stopped_seconds?,
//! volume_usd_micros?}`, set with the
//! move to `deleted` (money in whole millionths of a USD, as [`ephemera_core::prices`]
//! keeps it).

use super::{n, put_opt, s, Item, Reader};
use aws_sdk_dynamodb::types::AttributeValue;
use ephemera_core::ports::StoreError;
use ephemera_core::prices::JobCost;
use std::collections::HashMap;

pub(crate) const COST: &str = "cost";
const SECONDS: &str = "seconds";
const USD_MICROS: &str = "usd_micros";
const USD_MICROS_PER_HOUR: &str = "usd_micros_per_hour";
const UNPRICED: &str = "unpriced";
const REPOSITORY: &str = "repository";
const STOPPED_SECONDS: &str = "stopped_seconds";
const VOLUME_USD_MICROS: &str = "volume_usd_micros";

/// The `cost` attribute of `cost`.
pub(crate) fn cost_value(cost: &JobCost) -> AttributeValue {
    let mut map = HashMap::from([(SECONDS.to_owned(), n(cost.seconds))]);
    put_opt(&mut map, USD_MICROS, cost.usd_micros.map(n));
    put_opt(
        &mut map,
        USD_MICROS_PER_HOUR,
        cost.usd_micros_per_hour.map(n),
    );
    put_opt(&mut map, UNPRICED, cost.unpriced.as_deref().map(s));
    put_opt(&mut map, REPOSITORY, cost.repository.as_deref().map(s));
    let stopped = (cost.stopped_seconds > 0).then_some(cost.stopped_seconds);
    put_opt(&mut map, STOPPED_SECONDS, stopped.map(n));
    put_opt(&mut map, VOLUME_USD_MICROS, cost.volume_usd_micros.map(n));
    AttributeValue::M(map)
}

impl Reader<'_> {
    /// The `cost` attribute, if set.
    pub(super) fn cost(&self) -> Result<Option<JobCost>, StoreError> {
        let map: &Item = match self.item.get(COST) {
            None | Some(AttributeValue::Null(_)) => return Ok(None),
            Some(AttributeValue::M(map)) => map,
            Some(_) => return Err(self.corrupt(format!("{COST} is not a map"))),
        };
        let inner = Reader { item: map };
        let named = |err: StoreError| match err {
            StoreError::Corrupt { message, .. } => self.corrupt(format!("{COST}.{message}")),
            other => other,
        };
        let read = || -> Result<JobCost, StoreError> {
            Ok(JobCost {
                seconds: inner.n(SECONDS)?,
                usd_micros: inner.opt_n(USD_MICROS)?,
                usd_micros_per_hour: inner.opt_n(USD_MICROS_PER_HOUR)?,
                unpriced: inner.opt_s(UNPRICED)?.map(str::to_owned),
                repository: inner.opt_s(REPOSITORY)?.map(str::to_owned),
                stopped_seconds: inner.opt_n(STOPPED_SECONDS)?.unwrap_or(0),
                volume_usd_micros: inner.opt_n(VOLUME_USD_MICROS)?,
            })
        };
        read().map(Some).map_err(named)
    }
}

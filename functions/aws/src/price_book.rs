//! The cached prices in the runners table ([`PriceBook`]): one item, `PRICES`, of kind
//! `prices`, holding a list of `{region, instance_type, market, usd_micros_per_hour?,
//! usd_micros_per_gib_month?, read_at}` maps (no price: the region does not offer the
//! type; an EBS volume type, `ebs:gp3`, has the second, per GiB-month). It carries no
//! `status`, so the `by-status` index never lists it. The reaper, under its lease, is
//! its only writer; the CLI reads it to price runners still alive.

use crate::dynamo::store_error;
use crate::items::{self, Item};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use ephemera_core::ports::{PriceBook, StoreError};
use ephemera_core::prices::Price;
use std::collections::HashMap;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tracing::instrument;

/// The key, and the kind, of the prices item.
pub(crate) const PRICES_KEY: &str = "PRICES";
const KIND_PRICES: &str = "prices";
const PRICES: &str = "prices";
const REGION: &str = "region";
const USD_MICROS_PER_HOUR: &str = "usd_micros_per_hour";
const USD_MICROS_PER_GIB_MONTH: &str = "usd_micros_per_gib_month";
const READ_AT: &str = "read_at";

/// The cached prices of one deployment.
#[derive(Debug, Clone)]
pub struct DynamoPriceBook {
    client: Client,
    table: String,
}

impl DynamoPriceBook {
    pub fn new(client: Client, table: impl Into<String>) -> DynamoPriceBook {
        DynamoPriceBook {
            client,
            table: table.into(),
        }
    }
}

/// The prices item.
pub(crate) fn prices_to_item(prices: &[Price]) -> Item {
    let entry = |p: &Price| {
        let mut map = HashMap::from([
            (REGION.to_owned(), items::s(p.region.as_str())),
            (
                items::INSTANCE_TYPE.to_owned(),
                items::s(p.instance_type.as_str()),
            ),
            (items::MARKET.to_owned(), items::s(p.market.as_str())),
            (READ_AT.to_owned(), items::timestamp(p.read_at)),
        ]);
        if let Some(micros) = p.usd_micros_per_hour {
            map.insert(USD_MICROS_PER_HOUR.to_owned(), items::n(micros));
        }
        if let Some(micros) = p.usd_micros_per_gib_month {
            map.insert(USD_MICROS_PER_GIB_MONTH.to_owned(), items::n(micros));
        }
        AttributeValue::M(map)
    };
    HashMap::from([
        (items::PK.to_owned(), items::s(PRICES_KEY)),
        (items::KIND.to_owned(), items::s(KIND_PRICES)),
        (
            PRICES.to_owned(),
            AttributeValue::L(prices.iter().map(entry).collect()),
        ),
    ])
}

/// The prices of the prices item.
pub(crate) fn prices_from_item(item: &Item) -> Result<Vec<Price>, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        key: PRICES_KEY.to_owned(),
        message,
    };
    let Some(AttributeValue::L(entries)) = item.get(PRICES) else {
        return Err(corrupt(format!("{PRICES} is not a list")));
    };
    entries
        .iter()
        .map(|entry| {
            let AttributeValue::M(map) = entry else {
                return Err(corrupt(format!("an entry of {PRICES} is not a map")));
            };
            let text = |name: &str| match map.get(name) {
                Some(AttributeValue::S(value)) => Ok(value.clone()),
                _ => Err(corrupt(format!("{PRICES}[].{name} is not a string"))),
            };
            let number = |name: &str| match map.get(name) {
                None => Ok(None),
                Some(AttributeValue::N(value)) => value
                    .parse()
                    .map(Some)
                    .map_err(|_| corrupt(format!("{PRICES}[].{name} is not a whole number"))),
                Some(_) => Err(corrupt(format!("{PRICES}[].{name} is not a number"))),
            };
            let usd_micros_per_hour = number(USD_MICROS_PER_HOUR)?;
            let usd_micros_per_gib_month = number(USD_MICROS_PER_GIB_MONTH)?;
            let read_at = OffsetDateTime::parse(&text(READ_AT)?, &Rfc3339)
                .map_err(|_| corrupt(format!("{PRICES}[].{READ_AT} is not RFC 3339")))?;
            Ok(Price {
                region: text(REGION)?,
                instance_type: text(items::INSTANCE_TYPE)?,
                market: items::market(&text(items::MARKET)?).map_err(corrupt)?,
                usd_micros_per_hour,
                usd_micros_per_gib_month,
                read_at,
            })
        })
        .collect()
}

#[async_trait]
impl PriceBook for DynamoPriceBook {
    #[instrument(skip_all)]
    async fn read_prices(&self) -> Result<Vec<Price>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(items::key(PRICES_KEY.to_owned())))
            .send()
            .await
            .map_err(store_error)?;
        match output.item() {
            Some(item) => prices_from_item(item),
            None => Ok(Vec::new()),
        }
    }

    #[instrument(skip_all, fields(prices = prices.len()))]
    async fn write_prices(&self, prices: &[Price]) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(prices_to_item(prices)))
            .send()
            .await
            .map_err(store_error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ephemera_core::ports::Market;
    use time::macros::datetime;

    #[test]
    fn prices_survive_the_item_and_a_missing_price_stays_missing() {
        let at = datetime!(2026-11-22 10:00:00 UTC);
        let prices = vec![
            Price {
                region: "us-east-1".into(),
                instance_type: "m7i.large".into(),
                market: Market::OnDemand,
                usd_micros_per_hour: Some(100_800),
                usd_micros_per_gib_month: None,
                read_at: at,
            },
            Price {
                region: "us-east-1".into(),
                instance_type: "x9.huge".into(),
                market: Market::Spot,
                usd_micros_per_hour: None,
                usd_micros_per_gib_month: None,
                read_at: at,
            },
            Price {
                region: "us-east-1".into(),
                instance_type: "ebs:gp3".into(),
                market: Market::OnDemand,
                usd_micros_per_hour: None,
                usd_micros_per_gib_month: Some(80_000),
                read_at: at,
            },
        ];
        let item = prices_to_item(&prices);
        assert!(
            !item.contains_key(items::STATUS),
            "never in the status index"
        );
        assert_eq!(prices_from_item(&item).expect("reads back"), prices);
    }
}

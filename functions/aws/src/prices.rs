//! Instance prices from AWS ([`PriceList`]): on-demand from the Price List Query API,
//! spot from EC2's spot price history. The reaper calls these at most daily per type
//! and market ([`ephemera_core::prices`]), never per job.
//!
//! - On-demand: `pricing:GetProducts` for service code `AmazonEC2`, with `TERM_MATCH`
//!   filters on `instanceType`, `regionCode`, `operatingSystem` Linux, `tenancy` Shared,
//!   `preInstalledSw` NA and `capacitystatus` Used (the plain on-demand product, not a
//!   reservation's or a Windows/SQL one). The API answers only in a few regions
//!   (us-east-1 among them), whatever region is priced: the client is built for
//!   us-east-1 and the region goes in the `regionCode` filter.
//!   <https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html>,
//!   <https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html>.
//!   Each `PriceList` entry is a JSON document (a string); the hourly price is at
//!   `terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD`, in the dimension whose `unit`
//!   is `Hrs`. No entry: the region does not offer the type.
//! - EBS volumes (a stopped pool's root volume while it waits stopped): the same
//!   `pricing:GetProducts`, `TERM_MATCH` on `productFamily` Storage, `volumeApiName` (the
//!   API's name of the type, `gp3`) and `regionCode`; the price is the `USD` of the
//!   dimension whose `unit` is `GB-Mo` (per GB-month, as <https://aws.amazon.com/ebs/pricing/>
//!   quotes it).
//! - Spot: `ec2:DescribeSpotPriceHistory` for the type, product description
//!   `Linux/UNIX`, start time now (so only the current price of each zone).
//!   <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html>.
//!   The runner record does not keep its zone, so the highest zone's price is taken: the
//!   figure errs high, never low. No history: not offered.
//! - Partitions ([`priced_in_usd`]): the us-east-1 endpoint belongs to the `aws` partition,
//!   and credentials of another partition cannot call it. The China regions have a Price
//!   List of their own, priced in CNY, and their spot prices are CNY as well
//!   (<https://docs.amazonaws.cn/en_us/awsaccountbilling/latest/aboutv2/price-changes.html>);
//!   costs here are USD, so no price is read there (never a call that can only fail, nor a
//!   CNY figure taken for USD). GovCloud (US) has no Price List Query API endpoint in its
//!   partition, so its on-demand prices are not read; its spot price history is USD and is.
//!   A price not read is `None`: the job's cost is shown as unknown, as for a type the
//!   region does not offer.

use async_trait::async_trait;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::InstanceType;
use aws_sdk_pricing::types::{Filter, FilterType};
use ephemera_core::ports::{Market, PriceError, PriceList};
use tracing::instrument;

/// The region the Price List Query API is reached in.
pub const PRICE_LIST_REGION: &str = "us-east-1";

/// Whether `region`'s prices can be read in USD from here, per market: (on-demand through
/// the Price List Query API in us-east-1, spot through EC2's price history). The `aws`
/// partition: both; GovCloud (US): spot only; China and the isolated partitions: neither.
pub(crate) fn priced_in_usd(region: &str) -> (bool, bool) {
    if region.starts_with("cn-") || region.starts_with("us-iso") || region.starts_with("eu-isoe") {
        (false, false)
    } else if region.starts_with("us-gov-") {
        (false, true)
    } else {
        (true, true)
    }
}

/// Prices of one region's instances.
#[derive(Debug, Clone)]
pub struct AwsPriceList {
    pricing: aws_sdk_pricing::Client,
    ec2: aws_sdk_ec2::Client,
    region: String,
}

impl AwsPriceList {
    /// Prices for the region of `sdk` (its EC2 client), read from the Price List Query
    /// API in [`PRICE_LIST_REGION`].
    pub fn new(sdk: &aws_config::SdkConfig) -> AwsPriceList {
        let pricing = aws_sdk_pricing::config::Builder::from(sdk)
            .region(aws_config::Region::new(PRICE_LIST_REGION))
            .build();
        AwsPriceList {
            pricing: aws_sdk_pricing::Client::from_conf(pricing),
            ec2: aws_sdk_ec2::Client::new(sdk),
            region: sdk
                .region()
                .map(|r| r.to_string())
                .unwrap_or_else(|| PRICE_LIST_REGION.to_owned()),
        }
    }

    /// Prices for `region`, read with these clients (`pricing` reaching
    /// [`PRICE_LIST_REGION`], `ec2` that region's).
    pub fn from_clients(
        pricing: aws_sdk_pricing::Client,
        ec2: aws_sdk_ec2::Client,
        region: impl Into<String>,
    ) -> AwsPriceList {
        AwsPriceList {
            pricing,
            ec2,
            region: region.into(),
        }
    }

    #[instrument(skip_all, fields(instance_type, region = %self.region))]
    async fn on_demand(&self, instance_type: &str) -> Result<Option<u64>, PriceError> {
        if !priced_in_usd(&self.region).0 {
            return Ok(None);
        }
        let filters = [
            ("instanceType", instance_type),
            ("regionCode", self.region.as_str()),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
        ];
        let found = self.products(&filters).await?;
        Ok(found.iter().find_map(|entry| on_demand_price(entry, "Hrs")))
    }

    #[instrument(skip_all, fields(volume_type, region = %self.region))]
    async fn volume(&self, volume_type: &str) -> Result<Option<u64>, PriceError> {
        if !priced_in_usd(&self.region).0 {
            return Ok(None);
        }
        let filters = [
            ("productFamily", "Storage"),
            ("volumeApiName", volume_type),
            ("regionCode", self.region.as_str()),
        ];
        let found = self.products(&filters).await?;
        Ok(found
            .iter()
            .find_map(|entry| on_demand_price(entry, "GB-Mo")))
    }

    /// GetProducts of `AmazonEC2` matching every `(field, value)` exactly.
    async fn products(&self, filters: &[(&str, &str)]) -> Result<Vec<String>, PriceError> {
        let mut request = self
            .pricing
            .get_products()
            .service_code("AmazonEC2")
            .format_version("aws_v1")
            .max_results(10);
        for &(field, value) in filters {
            let filter = Filter::builder()
                .r#type(FilterType::TermMatch)
                .field(field)
                .value(value)
                .build()
                .map_err(|err| PriceError::Transient(Box::new(err)))?;
            request = request.filters(filter);
        }
        let output = request.send().await.map_err(price_error)?;
        Ok(output.price_list().to_vec())
    }

    #[instrument(skip_all, fields(instance_type, region = %self.region))]
    async fn spot(&self, instance_type: &str) -> Result<Option<u64>, PriceError> {
        if !priced_in_usd(&self.region).1 {
            return Ok(None);
        }
        let output = self
            .ec2
            .describe_spot_price_history()
            .instance_types(InstanceType::from(instance_type))
            .product_descriptions("Linux/UNIX")
            .start_time(aws_sdk_ec2::primitives::DateTime::from(
                std::time::SystemTime::now(),
            ))
            .send()
            .await
            .map_err(price_error)?;
        Ok(output
            .spot_price_history()
            .iter()
            .filter(|p| p.instance_type().map(|t| t.as_str()) == Some(instance_type))
            .filter_map(|p| p.spot_price().and_then(usd_micros))
            .max())
    }
}

#[async_trait]
impl PriceList for AwsPriceList {
    fn region(&self) -> &str {
        &self.region
    }

    async fn hourly_price(
        &self,
        instance_type: &str,
        market: Market,
    ) -> Result<Option<u64>, PriceError> {
        match market {
            Market::OnDemand => self.on_demand(instance_type).await,
            Market::Spot => self.spot(instance_type).await,
        }
    }

    async fn volume_price(&self, volume_type: &str) -> Result<Option<u64>, PriceError> {
        self.volume(volume_type).await
    }
}

fn price_error<E, R>(err: SdkError<E, R>) -> PriceError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match err.code() {
        Some("RequestLimitExceeded" | "Throttling" | "ThrottlingException") => {
            PriceError::Throttled(Box::new(err))
        }
        _ => PriceError::Transient(Box::new(err)),
    }
}

/// The on-demand price in one `PriceList` entry, in millionths of a USD: the first
/// positive `USD` of a price dimension whose unit is `unit` (`Hrs` for an instance,
/// `GB-Mo` for a volume).
pub(crate) fn on_demand_price(entry: &str, unit: &str) -> Option<u64> {
    let product: serde_json::Value = serde_json::from_str(entry).ok()?;
    let terms = product.get("terms")?.get("OnDemand")?.as_object()?;
    terms
        .values()
        .filter_map(|term| term.get("priceDimensions")?.as_object())
        .flat_map(|dimensions| dimensions.values())
        .filter(|dimension| dimension.get("unit").and_then(|u| u.as_str()) == Some(unit))
        .filter_map(|dimension| {
            let usd = dimension.get("pricePerUnit")?.get("USD")?.as_str()?;
            usd_micros(usd)
        })
        .find(|&micros| micros > 0)
}

/// A decimal USD amount (`"0.1008000000"`) in millionths, rounded half up; `None` for
/// anything that is not a plain non-negative decimal.
pub fn usd_micros(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    let mut micros: u64 = whole.parse::<u64>().ok()?.checked_mul(1_000_000)?;
    let padded = format!("{fraction:0<7}");
    micros = micros.checked_add(padded[..6].parse().ok()?)?;
    if padded.as_bytes()[6] >= b'5' {
        micros = micros.checked_add(1)?;
    }
    Some(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_aws_partition_reads_on_demand_prices_and_china_reads_none() {
        assert_eq!(priced_in_usd("eu-west-1"), (true, true));
        assert_eq!(priced_in_usd("us-east-1"), (true, true));
        assert_eq!(priced_in_usd("us-gov-west-1"), (false, true));
        assert_eq!(priced_in_usd("cn-north-1"), (false, false));
        assert_eq!(priced_in_usd("cn-northwest-1"), (false, false));
    }

    /// Clients whose every call fails at once (nothing listens on port 9), so a price
    /// that comes back was not asked for.
    async fn unreachable_clients(region: &str) -> AwsPriceList {
        let settings = crate::AwsSettings {
            region: Some(region.to_owned()),
            ..crate::AwsSettings::emulator("http://127.0.0.1:9")
        };
        let sdk = crate::sdk_config(&settings).await;
        AwsPriceList::from_clients(
            aws_sdk_pricing::Client::new(&sdk),
            aws_sdk_ec2::Client::new(&sdk),
            region,
        )
    }

    #[tokio::test]
    async fn a_china_region_reads_no_price_and_makes_no_call() {
        let prices = unreachable_clients("cn-north-1").await;
        for market in [Market::OnDemand, Market::Spot] {
            assert_eq!(
                prices.hourly_price("m7i.large", market).await.ok(),
                Some(None)
            );
        }
        let gov = unreachable_clients("us-gov-west-1").await;
        assert_eq!(
            gov.hourly_price("m7i.large", Market::OnDemand).await.ok(),
            Some(None)
        );
        assert!(
            gov.hourly_price("m7i.large", Market::Spot).await.is_err(),
            "GovCloud's spot price history is read (and here, unreachable, fails)"
        );
    }

    #[test]
    fn usd_amounts_become_millionths() {
        assert_eq!(usd_micros("0.1008000000"), Some(100_800));
        assert_eq!(usd_micros("0.0000005"), Some(1));
        assert_eq!(usd_micros("2"), Some(2_000_000));
        assert_eq!(usd_micros("0.036100"), Some(36_100));
        assert_eq!(usd_micros("-1"), None);
        assert_eq!(usd_micros("1e3"), None);
        assert_eq!(usd_micros(""), None);
    }

    #[test]
    fn the_hourly_price_is_read_from_the_on_demand_terms() {
        let entry = r#"{"product":{"attributes":{"instanceType":"m7i.large"}},
            "terms":{"OnDemand":{"ABC.JRTCKXETXF":{"priceDimensions":{
                "ABC.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":"0.1008000000"}},
                "ABC.JRTCKXETXF.X":{"unit":"Quantity","pricePerUnit":{"USD":"5.0"}}}}}}}"#;
        assert_eq!(on_demand_price(entry, "Hrs"), Some(100_800));
    }

    #[test]
    fn an_entry_without_an_hourly_price_gives_none_never_zero() {
        let zero = r#"{"terms":{"OnDemand":{"T":{"priceDimensions":{"D":{"unit":"Hrs","pricePerUnit":{"USD":"0.0000000000"}}}}}}}"#;
        assert_eq!(on_demand_price(zero, "Hrs"), None);
        assert_eq!(on_demand_price(r#"{"terms":{}}"#, "Hrs"), None);
        assert_eq!(on_demand_price("not json", "Hrs"), None);
    }

    #[test]
    fn a_volume_price_is_the_gb_month_dimension() {
        let entry = r#"{"product":{"productFamily":"Storage","attributes":{"volumeApiName":"gp3"}},
            "terms":{"OnDemand":{"V.JRTCKXETXF":{"priceDimensions":{
                "V.JRTCKXETXF.6YS6EN2CT7":{"unit":"GB-Mo","pricePerUnit":{"USD":"0.0800000000"}}}}}}}"#;
        assert_eq!(on_demand_price(entry, "GB-Mo"), Some(80_000));
        assert_eq!(on_demand_price(entry, "Hrs"), None, "not an hourly price");
    }
}

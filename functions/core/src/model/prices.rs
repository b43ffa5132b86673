//! Instance prices as the deployment caches them, and what a runner's instance cost as
//! its record keeps it; how they are read and computed is [`crate::prices`]'s.

use super::Market;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// One cached price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    pub region: String,
    pub instance_type: String,
    pub market: Market,
    /// Millionths of a USD per instance-hour; `None`: the region does not offer the type
    /// in this market (the price list had no entry for it).
    pub usd_micros_per_hour: Option<u64>,
    /// When the price list was read.
    #[serde(with = "time::serde::rfc3339")]
    pub read_at: OffsetDateTime,
}

/// What one runner's instance cost, written on its record when it is deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCost {
    /// Instance-seconds billed: launch requested → terminated, at least
    /// [`BILLING_MINIMUM_SECONDS`](crate::prices::BILLING_MINIMUM_SECONDS).
    pub seconds: u64,
    /// The hourly price used, in millionths of a USD.
    pub usd_micros_per_hour: Option<u64>,
    /// The cost in millionths of a USD; `None` when no price is known.
    pub usd_micros: Option<u64>,
    /// Why there is no figure (`None` when priced).
    pub unpriced: Option<String>,
    /// The repository (`owner/name`) of the job the runner ran, when known.
    pub repository: Option<String>,
}

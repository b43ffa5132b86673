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
    /// in this market (the price list had no entry for it). `None` for a volume type.
    pub usd_micros_per_hour: Option<u64>,
    /// For an EBS volume type (`instance_type` is [`crate::prices::volume_key`]'s
    /// `ebs:<type>`, market on-demand): millionths of a USD per GiB-month; `None` for an
    /// instance type, or a volume type the region does not offer.
    #[serde(default)]
    pub usd_micros_per_gib_month: Option<u64>,
    /// When the price list was read.
    #[serde(with = "time::serde::rfc3339")]
    pub read_at: OffsetDateTime,
}

/// What one runner's instance cost, written on its record when it is deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCost {
    /// Instance-seconds billed: launch requested → terminated, less `stopped_seconds`, at
    /// least [`BILLING_MINIMUM_SECONDS`](crate::prices::BILLING_MINIMUM_SECONDS).
    pub seconds: u64,
    /// The hourly price used, in millionths of a USD.
    pub usd_micros_per_hour: Option<u64>,
    /// The cost in millionths of a USD; `None` when no price is known.
    pub usd_micros: Option<u64>,
    /// Why there is no figure (`None` when priced).
    pub unpriced: Option<String>,
    /// The repository (`owner/name`) of the job the runner ran, when known.
    pub repository: Option<String>,
    /// Of `seconds`, those a stopped pool's instance spent stopped (recorded `stopped`
    /// until a job took it, or until its end): billed for its volume only, not for the
    /// instance (docs/design.md, "Stopped pool"); 0 for any other runner.
    #[serde(default)]
    pub stopped_seconds: u64,
    /// What its root volume cost while it was stopped, in millionths of a USD, included
    /// in `usd_micros`; `None` when it was never stopped or no volume price is known.
    #[serde(default)]
    pub volume_usd_micros: Option<u64>,
}

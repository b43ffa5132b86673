//! [`HookDeliveries`]: the App's webhook deliveries, for the reaper's redelivery sweep.
//!
//! Fake: `memory::MemoryDeliveries`. Adapter: `ephemera_github::GitHubApp`.

use super::ForgeError;
use async_trait::async_trait;
use time::OffsetDateTime;

/// One delivery of the App's webhook, as GitHub lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookDelivery {
    pub id: u64,
    /// The same for every attempt at one event (`X-GitHub-Delivery`).
    pub guid: String,
    pub event: String,
    pub action: Option<String>,
    /// The HTTP status the webhook endpoint answered (0 when it could not be reached).
    pub status_code: u16,
    /// When GitHub made the attempt (whole seconds, GitHub's clock). With `redelivery`,
    /// the sweep reads from these how often and since when an event was asked for.
    pub delivered_at: OffsetDateTime,
    /// Whether this was itself a redelivery (asked for by anyone).
    pub redelivery: bool,
}

impl HookDelivery {
    /// Whether the endpoint took it (any 2xx answer).
    pub fn delivered(&self) -> bool {
        (200..300).contains(&self.status_code)
    }
}

/// One page of deliveries, newest first, and where the next (older) page starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryPage {
    pub deliveries: Vec<HookDelivery>,
    pub next_cursor: Option<String>,
}

/// The App's webhook deliveries (the reaper's redelivery sweep): GitHub does not
/// redeliver a failed delivery by itself, but lists them and redelivers one on request.
#[async_trait]
pub trait HookDeliveries: Send + Sync {
    /// One page of the App's recent deliveries, newest first, from `cursor` (the newest
    /// when `None`). Read-only.
    async fn list_deliveries(&self, cursor: Option<&str>) -> Result<DeliveryPage, ForgeError>;

    /// Asks GitHub to deliver delivery `id` again. Not idempotent: each call is one more
    /// attempt (the webhook handles a repeated event idempotently).
    async fn redeliver(&self, id: u64) -> Result<(), ForgeError>;
}
